"""The SQLite coordinator's read side: batch lookup for fetch, log bounds, ListOffsets.
Each function runs inside a read transaction, so it sees one consistent snapshot."""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from typing import Any

from lakelog.coordinator.interface import (
    EARLIEST_TIMESTAMP,
    LATEST_TIMESTAMP,
    MAX_TIMESTAMP,
    BatchCoordinate,
    FindBatchesRequest,
    FindBatchesResult,
    ListOffsetsRequest,
    ListOffsetsResult,
    LogInfo,
    PartitionKey,
)
from lakelog.coordinator.sqlite.rows import (
    BATCH_COLUMNS,
    BATCH_TIMESTAMP_SQL,
    PartitionRow,
    batch_timestamp,
    coordinate,
    find_partition,
)
from lakelog.errors import ErrorCode

EARLIEST_LOCAL_TIMESTAMP = -4
"""KIP-405's "earliest local offset": with no tiered storage, the log start."""

_FROM = "FROM batches b JOIN files f ON f.id = b.file_id WHERE b.topic_id = ? AND b.partition = ?"


def find_batches(
    conn: sqlite3.Connection, requests: Sequence[FindBatchesRequest]
) -> list[FindBatchesResult]:
    return [_find(conn, req) for req in requests]


def _find(conn: sqlite3.Connection, req: FindBatchesRequest) -> FindBatchesResult:
    part = find_partition(conn, req.topic_id, req.partition)
    if part is None:
        return FindBatchesResult(ErrorCode.unknown_topic_or_partition)
    bounds = {"log_start_offset": part.log_start_offset, "high_watermark": part.high_watermark}
    if req.offset < part.log_start_offset or req.offset > part.high_watermark:
        return FindBatchesResult(ErrorCode.offset_out_of_range, **bounds)
    if req.offset == part.high_watermark:
        return FindBatchesResult(ErrorCode.none, **bounds)
    cursor = conn.execute(
        f"SELECT {BATCH_COLUMNS} {_FROM} AND b.last_offset >= ? ORDER BY b.last_offset",
        (part.topic_id, part.partition, req.offset),
    )
    batches: list[BatchCoordinate] = []
    total = 0
    try:
        for row in cursor:
            batch = coordinate(row)
            batches.append(batch)
            total += batch.byte_size
            if total >= req.max_bytes:
                break
    finally:
        cursor.close()
    return FindBatchesResult(ErrorCode.none, batches, **bounds)


def log_info(conn: sqlite3.Connection, partitions: Sequence[PartitionKey]) -> list[LogInfo]:
    results: list[LogInfo] = []
    for key in partitions:
        part = find_partition(conn, key.topic_id, key.partition)
        if part is None:
            results.append(LogInfo(ErrorCode.unknown_topic_or_partition))
        else:
            results.append(
                LogInfo(ErrorCode.none, part.log_start_offset, part.high_watermark, part.byte_size)
            )
    return results


def list_offsets(
    conn: sqlite3.Connection, requests: Sequence[ListOffsetsRequest]
) -> list[ListOffsetsResult]:
    return [_list_offset(conn, req) for req in requests]


def _list_offset(conn: sqlite3.Connection, req: ListOffsetsRequest) -> ListOffsetsResult:
    part = find_partition(conn, req.topic_id, req.partition)
    if part is None:
        return ListOffsetsResult(ErrorCode.unknown_topic_or_partition)
    if req.timestamp in (EARLIEST_TIMESTAMP, EARLIEST_LOCAL_TIMESTAMP):
        return ListOffsetsResult(ErrorCode.none, part.log_start_offset)
    if req.timestamp == LATEST_TIMESTAMP:
        return ListOffsetsResult(ErrorCode.none, part.high_watermark)
    if req.timestamp == MAX_TIMESTAMP:
        return _max_timestamp(conn, part)
    if req.timestamp < 0:
        return ListOffsetsResult(ErrorCode.invalid_request)
    return _by_timestamp(conn, part, req.timestamp)


def _by_timestamp(conn: sqlite3.Connection, part: PartitionRow, time: int) -> ListOffsetsResult:
    key = (part.topic_id, part.partition)
    # timestamp_high never decreases with the offset, so the first batch reaching `time`
    # is an index seek. It may be a batch whose own timestamp is lower when the high
    # mark came from a batch already deleted; then scan on from there.
    row = conn.execute(
        f"SELECT {BATCH_COLUMNS} {_FROM} AND b.timestamp_high >= ?"
        " ORDER BY b.timestamp_high, b.last_offset LIMIT 1",
        (*key, time),
    ).fetchone()
    if row is not None and _timestamp_of(row) < time:
        row = conn.execute(
            f"SELECT {BATCH_COLUMNS} {_FROM} AND b.last_offset > ?"
            f" AND {BATCH_TIMESTAMP_SQL} >= ? ORDER BY b.last_offset LIMIT 1",
            (*key, row[4], time),
        ).fetchone()
    if row is None:
        return ListOffsetsResult(ErrorCode.none)
    batch = coordinate(row)
    return ListOffsetsResult(
        ErrorCode.none,
        offset=max(batch.base_offset, part.log_start_offset),
        timestamp=_timestamp_of(row),
        batch=batch,
    )


def _max_timestamp(conn: sqlite3.Connection, part: PartitionRow) -> ListOffsetsResult:
    key = (part.topic_id, part.partition)
    row = conn.execute(
        f"SELECT {BATCH_COLUMNS}, b.timestamp_high {_FROM} ORDER BY b.timestamp_high DESC LIMIT 1",
        key,
    ).fetchone()
    if row is None:
        return ListOffsetsResult(ErrorCode.none)
    highest = row[13]
    row = conn.execute(
        f"SELECT {BATCH_COLUMNS} {_FROM} AND b.timestamp_high = ? ORDER BY b.last_offset LIMIT 1",
        (*key, highest),
    ).fetchone()
    if _timestamp_of(row) != highest:
        # The highest timestamp belonged to a deleted batch: find the live maximum.
        row = conn.execute(
            f"SELECT {BATCH_COLUMNS} {_FROM}"
            f" ORDER BY {BATCH_TIMESTAMP_SQL} DESC, b.last_offset LIMIT 1",
            key,
        ).fetchone()
    return ListOffsetsResult(
        ErrorCode.none, offset=row[4], timestamp=_timestamp_of(row), batch=coordinate(row)
    )


def _timestamp_of(row: tuple[Any, ...]) -> int:
    return batch_timestamp(row[7], row[6], row[8])
