"""The pipeline's side of the SQLite coordinator: files and their batches for gc, merge and
compaction, and `commit_merge`, which swaps batches to rewritten objects. Runs inside the
caller's transaction (BEGIN IMMEDIATE for commit_merge), so a swap is atomic against every
commit, retention pass and other merge."""

from __future__ import annotations

import itertools
import json
import sqlite3
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from uuid import UUID

from lakelog.coordinator.ops.rows import now_ms
from lakelog.coordinator.pipeline_types import (
    BatchMove,
    FileBatch,
    FileInfo,
    FileReference,
    MergeCommit,
    MergeCommitResult,
)
from lakelog.coordinator.sqlite.rows import release_file_bytes
from lakelog.errors import ErrorCode

MERGE_UPLOADER = -1
"""`uploader_broker_id` and `broker_epoch` of objects the pipeline wrote."""


def prefix_upper_bound(prefix: str) -> str | None:
    """The smallest string above every string starting with `prefix` (None: no bound)."""
    if not prefix:
        return None
    return prefix[:-1] + chr(ord(prefix[-1]) + 1)


def list_file_infos(
    conn: sqlite3.Connection, key_prefix: str, after_key: str, limit: int
) -> list[FileInfo]:
    upper = prefix_upper_bound(key_prefix)
    sql = (
        "SELECT object_key, state, size, live_bytes, committed_at, marked_at FROM files"
        " WHERE object_key > ? AND object_key >= ?"
    )
    args: list[object] = [after_key, key_prefix]
    if upper is not None:
        sql += " AND object_key < ?"
        args.append(upper)
    sql += " ORDER BY object_key LIMIT ?"
    args.append(max(limit, 0))
    return [FileInfo(*row) for row in conn.execute(sql, args)]


def file_batches(conn: sqlite3.Connection, object_keys: Sequence[str]) -> list[FileBatch]:
    rows = conn.execute(
        "SELECT f.object_key, t.topic_uuid, b.partition, b.base_offset, b.last_offset,"
        " b.byte_offset, b.byte_size, b.timestamp_type, b.is_transactional FROM files f"
        " JOIN batches b ON b.file_id = f.id JOIN topics t ON t.id = b.topic_id"
        " WHERE f.object_key IN (SELECT value FROM json_each(?))",
        (json.dumps(list(object_keys)),),
    ).fetchall()
    batches = [
        FileBatch(key, UUID(topic), *rest[:-1], bool(rest[-1])) for key, topic, *rest in rows
    ]
    batches.sort(key=lambda b: (b.topic_id.bytes, b.partition, b.base_offset))
    return batches


def file_references(conn: sqlite3.Connection, object_keys: Sequence[str]) -> list[FileReference]:
    rows = conn.execute(
        "SELECT f.object_key, f.state, (SELECT COUNT(*) FROM batches b WHERE b.file_id = f.id)"
        " FROM files f WHERE f.object_key IN (SELECT value FROM json_each(?))",
        (json.dumps(list(object_keys)),),
    ).fetchall()
    known = {key: (state, count) for key, state, count in rows}
    return [
        FileReference(key, True, *known[key]) if key in known else FileReference(key, False)
        for key in object_keys
    ]


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


def commit_merge(
    conn: sqlite3.Connection, commits: Sequence[MergeCommit], all_or_nothing: bool
) -> list[MergeCommitResult]:
    now = now_ms()
    errors = [_check(conn, commit) for commit in commits]
    matched = [
        [m for m in (_match(conn, move) for move in commit.moves) if m]
        if error == ErrorCode.none
        else []
        for commit, error in zip(commits, errors, strict=True)
    ]
    verdicts = decide(commits, errors, matched, all_or_nothing)
    results: list[MergeCommitResult] = []
    for commit, verdict in zip(commits, verdicts, strict=True):
        if verdict.error != ErrorCode.none:
            results.append(MergeCommitResult(verdict.error, skipped=verdict.skipped))
            continue
        kept = [m for m in verdict.apply if not m.move.drop]
        dropped = [m for m in verdict.apply if m.move.drop]
        if commit.new_object_key is not None:
            _record_new_file(conn, commit, kept, now)
        conn.executemany(
            "DELETE FROM batches WHERE id = ?",
            [(r.batch_id,) for m in dropped for r in m.rows],
        )
        results.append(MergeCommitResult(ErrorCode.none, len(kept), len(dropped), verdict.skipped))
    freed, size_change = bytes_changes([m for v in verdicts for m in v.apply])
    release_file_bytes(conn, sorted(freed.items()), now)
    conn.executemany(
        "UPDATE partitions SET byte_size = byte_size + ? WHERE topic_id = ? AND partition = ?",
        [(delta, *part) for part, delta in size_change.items() if delta],
    )
    return results


def _check(conn: sqlite3.Connection, commit: MergeCommit) -> ErrorCode:
    if invalid_moves(commit):
        return ErrorCode.corrupt_message
    key = commit.new_object_key
    if key is not None:
        known = conn.execute("SELECT 1 FROM files WHERE object_key = ?", (key,)).fetchone()
        if known:
            return ErrorCode.invalid_request
    return ErrorCode.none


def _record_new_file(
    conn: sqlite3.Connection, commit: MergeCommit, kept: Sequence[Matched], now: int
) -> None:
    """Insert the new object, live with the kept batches, and point them at it; with none
    it is recorded already marked for deletion."""
    live = sum(m.move.new_byte_size for m in kept)
    state, marked_at = ("committed", None) if kept else ("deleting", now)
    new_file_id = conn.execute(
        "INSERT INTO files (object_key, state, size, live_bytes, uploader_broker_id,"
        " broker_epoch, committed_at, marked_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
        (
            commit.new_object_key,
            state,
            commit.new_object_size,
            live,
            MERGE_UPLOADER,
            MERGE_UPLOADER,
            now,
            marked_at,
        ),
    ).lastrowid
    # The joined rows go first: the first row takes over their last offset (unique index).
    conn.executemany(
        "DELETE FROM batches WHERE id = ?", [(r.batch_id,) for m in kept for r in m.rows[1:]]
    )
    conn.executemany(
        "UPDATE batches SET file_id = ?, byte_offset = ?, byte_size = ?, base_offset = ?,"
        " last_offset = ?, max_timestamp = ?, timestamp_high = ? WHERE id = ?",
        [(new_file_id, *row_update(m), m.rows[0].batch_id) for m in kept],
    )


def _match(conn: sqlite3.Connection, move: BatchMove) -> Matched | None:
    """The move with its source rows, if every one still lives where the move says."""
    rows: list[SourceRow] = []
    topic_row = -1
    for source in move.sources:
        row = conn.execute(
            "SELECT b.id, b.file_id, b.byte_size, b.max_timestamp, b.timestamp_high, b.topic_id"
            " FROM batches b JOIN topics t ON t.id = b.topic_id JOIN files f ON f.id = b.file_id"
            " WHERE t.topic_uuid = ? AND b.partition = ? AND b.last_offset = ?"
            " AND b.base_offset = ? AND b.byte_offset = ? AND f.object_key = ?",
            (
                str(move.topic_id),
                move.partition,
                source.last_offset,
                source.base_offset,
                source.byte_offset,
                source.object_key,
            ),
        ).fetchone()
        if row is None:
            return None
        rows.append(SourceRow(*row[:5]))
        topic_row = row[5]
    return Matched(move, tuple(rows), (topic_row, move.partition))
