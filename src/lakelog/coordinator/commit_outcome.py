"""What an earlier `commit_file` of an object decided, read back from its rows.

A commit whose answer was lost (the database connection broke around COMMIT) may or may
not have happened. The WAL writer asks this before it tries again: an unknown key means
nothing happened and the commit can be repeated; a known key gives each accepted batch its
original offsets, so the producer is answered exactly as the first commit decided. One
query for both engines; only the placeholder differs."""

from __future__ import annotations

from collections.abc import Iterable

from lakelog.coordinator.interface import CommitBatchResult
from lakelog.errors import ErrorCode

CommitOutcome = dict[int, CommitBatchResult]
"""By the batch's byte offset in the object: the accepted batches. A batch of the object
that is absent was refused (its error is not kept)."""


def file_query(placeholder: str) -> str:
    return f"SELECT id FROM files WHERE object_key = {placeholder}"


def batches_query(placeholder: str) -> str:
    return (
        "SELECT b.byte_offset, b.base_offset, b.log_append_time, p.log_start_offset"
        " FROM batches b JOIN partitions p"
        " ON p.topic_id = b.topic_id AND p.partition = b.partition"
        f" WHERE b.file_id = {placeholder}"
    )


def outcome(rows: Iterable[tuple[int, int, int, int]]) -> CommitOutcome:
    return {
        int(byte_offset): CommitBatchResult(
            ErrorCode.none, int(base_offset), int(append_time), int(log_start)
        )
        for byte_offset, base_offset, append_time, log_start in rows
    }
