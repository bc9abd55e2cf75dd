"""Moving the log start (DeleteRecords, retention) and the file lifecycle that follows:
files lose live bytes, get marked, and are forgotten once the cleaner removed them."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Sequence

from lakelog.coordinator.interface import (
    DeleteRecordsRequest,
    DeleteRecordsResult,
    FileToDelete,
    RetentionPolicy,
    RetentionResult,
)
from lakelog.coordinator.ops.rows import BATCH_TIMESTAMP_SQL, PartitionRow, now_ms
from lakelog.coordinator.sqlite.release import drop_batches_below
from lakelog.coordinator.sqlite.rows import find_partition
from lakelog.errors import ErrorCode


def _advance_log_start(
    conn: sqlite3.Connection, part: PartitionRow, offset: int
) -> tuple[int, int]:
    """Raise the log start to `offset` (if higher) and drop what falls below it."""
    if offset <= part.log_start_offset:
        return 0, 0
    conn.execute(
        "UPDATE partitions SET log_start_offset = ? WHERE topic_id = ? AND partition = ?",
        (offset, part.topic_id, part.partition),
    )
    part.log_start_offset = offset
    return drop_batches_below(conn, part.topic_id, part.partition, offset, now_ms())


def delete_records(
    conn: sqlite3.Connection, requests: Sequence[DeleteRecordsRequest]
) -> list[DeleteRecordsResult]:
    results: list[DeleteRecordsResult] = []
    for req in requests:
        part = find_partition(conn, req.topic_id, req.partition)
        if part is None:
            results.append(DeleteRecordsResult(ErrorCode.unknown_topic_or_partition))
            continue
        target = part.high_watermark if req.offset == -1 else req.offset
        if target < 0 or target > part.high_watermark:
            results.append(DeleteRecordsResult(ErrorCode.offset_out_of_range))
            continue
        _advance_log_start(conn, part, target)
        results.append(DeleteRecordsResult(ErrorCode.none, part.log_start_offset))
    return results


def enforce_retention(
    conn: sqlite3.Connection, policies: Sequence[RetentionPolicy], now: int
) -> list[RetentionResult]:
    results: list[RetentionResult] = []
    for policy in policies:
        part = find_partition(conn, policy.topic_id, policy.partition)
        if part is None:
            results.append(RetentionResult(ErrorCode.unknown_topic_or_partition))
            continue
        new_start = _retention_start(conn, part, policy, now)
        count, size = _advance_log_start(conn, part, new_start)
        results.append(RetentionResult(ErrorCode.none, part.log_start_offset, count, size))
    return results


def _retention_start(
    conn: sqlite3.Connection, part: PartitionRow, policy: RetentionPolicy, now: int
) -> int:
    """The log start after dropping the leading batches the policy expires."""
    by_time = policy.retention_ms >= 0
    by_size = policy.retention_bytes >= 0
    if not (by_time or by_size):
        return part.log_start_offset
    cutoff = now - policy.retention_ms
    remaining = part.byte_size
    cursor = conn.execute(
        f"SELECT b.base_offset, b.byte_size, {BATCH_TIMESTAMP_SQL} FROM batches b"
        " WHERE b.topic_id = ? AND b.partition = ? ORDER BY b.last_offset",
        (part.topic_id, part.partition),
    )
    try:
        for base_offset, byte_size, timestamp in cursor:
            expired = by_time and timestamp < cutoff
            too_big = by_size and remaining - byte_size >= policy.retention_bytes
            if not (expired or too_big):
                return max(base_offset, part.log_start_offset)
            remaining -= byte_size
    finally:
        cursor.close()
    return part.high_watermark


def files_to_delete(conn: sqlite3.Connection, marked_before_ms: int) -> list[FileToDelete]:
    rows = conn.execute(
        "SELECT object_key, marked_at, size FROM files"
        " WHERE state = 'deleting' AND marked_at < ? ORDER BY marked_at, object_key",
        (marked_before_ms,),
    ).fetchall()
    return [FileToDelete(*row) for row in rows]


def delete_files(conn: sqlite3.Connection, object_keys: Sequence[str]) -> None:
    conn.execute(
        "DELETE FROM files WHERE state = 'deleting'"
        " AND object_key IN (SELECT value FROM json_each(?))",
        (json.dumps(list(object_keys)),),
    )


def list_files(conn: sqlite3.Connection) -> list[str]:
    return [row[0] for row in conn.execute("SELECT object_key FROM files ORDER BY object_key")]
