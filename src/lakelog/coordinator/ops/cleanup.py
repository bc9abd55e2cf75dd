"""Moving the log start (DeleteRecords, retention) and the file lifecycle that follows:
files lose live bytes, get marked, and are forgotten once the cleaner removed them. The
partitions a call changes are locked up front, in the writers' order (PostgreSQL)."""

from __future__ import annotations

from collections.abc import Sequence

from lakelog.coordinator.engine import Session
from lakelog.coordinator.log_types import (
    DeleteRecordsRequest,
    DeleteRecordsResult,
    FileToDelete,
    RetentionPolicy,
    RetentionResult,
)
from lakelog.coordinator.ops import inline
from lakelog.coordinator.ops.release import FreedBytes, drop_batches_below
from lakelog.coordinator.ops.rows import BATCH_TIMESTAMP_SQL, PartitionRow, find_partitions, now_ms
from lakelog.util.errors import ErrorCode

RETENTION_PAGE = 512
"""Leading batches read per query while looking for the new log start."""


async def _advance_log_start(
    s: Session, freed: FreedBytes, part: PartitionRow, offset: int
) -> tuple[int, int]:
    """Raise the log start to `offset` (if higher) and drop what falls below it."""
    if offset <= part.log_start_offset:
        return 0, 0
    await s.execute(
        "UPDATE partitions SET log_start_offset = ? WHERE topic_id = ? AND partition = ?",
        (offset, part.topic_id, part.partition),
    )
    part.log_start_offset = offset
    count, size = await drop_batches_below(s, freed, part.topic_id, part.partition, offset)
    part.byte_size -= size
    return count, size


async def delete_records(
    s: Session, requests: Sequence[DeleteRecordsRequest]
) -> list[DeleteRecordsResult]:
    parts = await find_partitions(s, ((r.topic_id, r.partition) for r in requests), True)
    freed = FreedBytes()
    results: list[DeleteRecordsResult] = []
    for req in requests:
        part = parts.get((req.topic_id, req.partition))
        if part is None:
            results.append(DeleteRecordsResult(ErrorCode.unknown_topic_or_partition))
            continue
        target = part.high_watermark if req.offset == -1 else req.offset
        if target < 0 or target > part.high_watermark:
            results.append(DeleteRecordsResult(ErrorCode.offset_out_of_range))
            continue
        await _advance_log_start(s, freed, part, target)
        results.append(DeleteRecordsResult(ErrorCode.none, part.log_start_offset))
    await freed.apply(s, now_ms())
    return results


async def enforce_retention(
    s: Session, policies: Sequence[RetentionPolicy], now: int
) -> list[RetentionResult]:
    parts = await find_partitions(s, ((p.topic_id, p.partition) for p in policies), True)
    freed = FreedBytes()
    results: list[RetentionResult] = []
    for policy in policies:
        part = parts.get((policy.topic_id, policy.partition))
        if part is None:
            results.append(RetentionResult(ErrorCode.unknown_topic_or_partition))
            continue
        new_start = await _retention_start(s, part, policy, now)
        count, size = await _advance_log_start(s, freed, part, new_start)
        results.append(RetentionResult(ErrorCode.none, part.log_start_offset, count, size))
    await freed.apply(s, now_ms())
    return results


async def _retention_start(
    s: Session, part: PartitionRow, policy: RetentionPolicy, now: int
) -> int:
    """The log start after dropping the leading batches the policy expires."""
    by_time = policy.retention_ms >= 0
    by_size = policy.retention_bytes >= 0
    if not (by_time or by_size):
        return part.log_start_offset
    cutoff = now - policy.retention_ms
    remaining = part.byte_size
    after = -1
    while True:
        rows = await s.fetchall(
            f"SELECT b.base_offset, b.last_offset, b.byte_size, {BATCH_TIMESTAMP_SQL}"
            " FROM batches b WHERE b.topic_id = ? AND b.partition = ? AND b.last_offset > ?"
            f" ORDER BY b.last_offset LIMIT {RETENTION_PAGE}",
            (part.topic_id, part.partition, after),
        )
        for base_offset, last_offset, byte_size, timestamp in rows:
            expired = by_time and timestamp < cutoff
            too_big = by_size and remaining - byte_size >= policy.retention_bytes
            if not (expired or too_big):
                return max(base_offset, part.log_start_offset)
            remaining -= byte_size
            after = last_offset
        if len(rows) < RETENTION_PAGE:
            return part.high_watermark


async def files_to_delete(s: Session, marked_before_ms: int) -> list[FileToDelete]:
    rows = await s.fetchall(
        "SELECT object_key, marked_at, size FROM files"
        " WHERE state = 'deleting' AND marked_at < ? ORDER BY marked_at, object_key",
        (marked_before_ms,),
    )
    return [FileToDelete(*row) for row in rows]


async def delete_files(s: Session, object_keys: Sequence[str]) -> None:
    keyset, params = s.dialect.keyset("k", (("object_key", "text"),), [(k,) for k in object_keys])
    await inline.delete_with_files(s, keyset, params)
    await s.execute(
        "DELETE FROM files WHERE state = 'deleting'"
        f" AND object_key IN (SELECT k.object_key FROM {keyset})",
        params,
    )


async def list_files(s: Session) -> list[str]:
    return [row[0] for row in await s.fetchall("SELECT object_key FROM files ORDER BY object_key")]
