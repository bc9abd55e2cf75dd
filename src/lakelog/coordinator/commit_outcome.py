"""What an earlier `commit_file` of an object decided, read back from its rows.

A commit whose answer was lost (the database connection broke around COMMIT) may or may
not have happened. The WAL writer asks this before it tries again: an unknown key means
nothing happened and the commit can be repeated; a known key gives each accepted batch its
original offsets, so the producer is answered exactly as the first commit decided.

A row may cover a run of batches (`commit_plan`): its base offset is its first batch's,
and each batch after it starts where the one before ended (by its record count), so the
caller's batch list, in object order, resolves every accepted batch."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from lakelog.coordinator.log_types import CommitBatch, CommitBatchResult
from lakelog.util.errors import ErrorCode


@dataclass(frozen=True, slots=True)
class _Run:
    byte_size: int
    base_offset: int
    log_append_time: int
    log_start_offset: int


@dataclass(frozen=True, slots=True)
class CommitOutcome:
    """The rows an object's commit wrote, by the byte offset where each run starts."""

    runs: dict[int, _Run]

    def results(self, batches: Sequence[CommitBatch]) -> list[CommitBatchResult | None]:
        """Each batch's original result (`batches` as committed: the object's batches), or
        None for one the commit refused."""
        found: list[CommitBatchResult | None] = [None] * len(batches)
        run: _Run | None = None
        run_end = next_byte = next_offset = -1
        for i in sorted(range(len(batches)), key=lambda i: batches[i].byte_offset):
            b = batches[i]
            start = self.runs.get(b.byte_offset)
            if start is not None:
                run, next_offset = start, start.base_offset
                run_end = b.byte_offset + start.byte_size
            elif run is None or b.byte_offset != next_byte or b.byte_offset >= run_end:
                run = None
                continue
            found[i] = CommitBatchResult(
                ErrorCode.none, next_offset, run.log_append_time, run.log_start_offset
            )
            next_offset += b.record_count
            next_byte = b.byte_offset + b.byte_size
            if next_byte >= run_end:
                run = None
        return found


def outcome(rows: Iterable[Sequence[int]]) -> CommitOutcome:
    """From rows of (byte offset, byte size, base offset, log append time, log start)."""
    return CommitOutcome(
        {
            int(byte_offset): _Run(int(size), int(base), int(append_time), int(log_start))
            for byte_offset, size, base, append_time, log_start in rows
        }
    )
