"""The merge pipeline's rules, no SQL: which moves of a `commit_merge` are well formed,
which apply (per commit, or all or nothing), and what a swap changes (bytes freed per file,
byte size per partition, the rewritten row). `ops/merge.py` runs them in one
transaction."""

from __future__ import annotations

import itertools
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass

from lakelog.coordinator.pipeline_types import BatchMove, MergeCommit
from lakelog.util.errors import ErrorCode

MERGE_UPLOADER = -1
"""`uploader_broker_id` and `broker_epoch` of objects the pipeline wrote."""


def prefix_upper_bound(prefix: str) -> str | None:
    """The smallest string above every string starting with `prefix` (None: no bound)."""
    if not prefix:
        return None
    return prefix[:-1] + chr(ord(prefix[-1]) + 1)


@dataclass(frozen=True, slots=True)
class SourceRow:
    batch_id: int
    file_id: int
    byte_size: int
    max_timestamp: int
    timestamp_high: int


@dataclass(frozen=True, slots=True)
class Matched:
    """A move whose source rows all still live where it says, with what the swap needs."""

    move: BatchMove
    rows: tuple[SourceRow, ...]
    partition_row: tuple[int, int]
    """(topic row id, partition)."""

    @property
    def old_size(self) -> int:
        return sum(r.byte_size for r in self.rows)


@dataclass(slots=True)
class Verdict:
    """What happens to one commit: an error (nothing changes), or the moves to apply."""

    error: ErrorCode
    apply: list[Matched]
    skipped: int


def invalid_move(move: BatchMove, object_key: str | None, object_size: int) -> bool:
    """Malformed: no sources, sources not adjacent, new offsets outside their span, or a
    kept row with no bytes or outside its object."""
    sources = move.sources
    if not sources or any(
        b.base_offset != a.last_offset + 1 for a, b in itertools.pairwise(sources)
    ):
        return True
    first, last = sources[0].base_offset, sources[-1].last_offset
    if not first <= move.base_offset <= move.last_offset <= last:
        return True
    if move.drop:
        return False
    if object_key is None or move.new_byte_size < 1 or move.new_byte_offset < 0:
        return True
    return move.new_byte_offset + move.new_byte_size > object_size


def invalid_moves(commit: MergeCommit) -> bool:
    return any(invalid_move(m, commit.new_object_key, commit.new_object_size) for m in commit.moves)


def decide(
    commits: Sequence[MergeCommit],
    errors: Sequence[ErrorCode],
    matched: Sequence[list[Matched]],
    all_or_nothing: bool,
) -> list[Verdict]:
    """Both coordinators' rule: per-commit errors and skips, widened to the whole call
    under `all_or_nothing`."""
    verdicts = []
    for commit, error, found in zip(commits, errors, matched, strict=True):
        applied = found if error == ErrorCode.none else []
        verdicts.append(Verdict(error, applied, len(commit.moves) - len(applied)))
    if all_or_nothing and any(v.error != ErrorCode.none or v.skipped for v in verdicts):
        for verdict, commit in zip(verdicts, commits, strict=True):
            verdict.apply, verdict.skipped = [], len(commit.moves)
    return verdicts


def bytes_changes(
    applied: Sequence[Matched],
) -> tuple[dict[int, int], dict[tuple[int, int], int]]:
    """(bytes freed per old file id, byte size change per partition row) of a swap."""
    freed: defaultdict[int, int] = defaultdict(int)
    size_change: defaultdict[tuple[int, int], int] = defaultdict(int)
    for m in applied:
        for row in m.rows:
            freed[row.file_id] += row.byte_size
        new_size = 0 if m.move.drop else m.move.new_byte_size
        size_change[m.partition_row] += new_size - m.old_size
    return freed, size_change


def row_update(m: Matched) -> tuple[int, int, int, int, int, int]:
    """(byte offset, byte size, base offset, last offset, max timestamp, timestamp high)
    of the row a kept move leaves (the first source's row, rewritten)."""
    return (
        m.move.new_byte_offset,
        m.move.new_byte_size,
        m.move.base_offset,
        m.move.last_offset,
        max(r.max_timestamp for r in m.rows),
        max(r.timestamp_high for r in m.rows),
    )
