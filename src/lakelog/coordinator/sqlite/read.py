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
from lakelog.coordinator.ops.rows import (
    BATCH_COLUMN_COUNT,
    BATCH_COLUMNS,
    BATCH_TIMESTAMP_SQL,
    BATCHES_FROM,
    PartitionRow,
    batch_timestamp,
    coordinate,
    fetch_weight,
)
from lakelog.coordinator.sqlite.rows import find_partition
from lakelog.coordinator.txn_types import AbortedTxn
from lakelog.errors import ErrorCode

EARLIEST_LOCAL_TIMESTAMP = -4
"""KIP-405's "earliest local offset": with no tiered storage, the log start."""

_FROM = f"FROM {BATCHES_FROM} WHERE b.topic_id = ? AND b.partition = ?"

_FIRST_UNSTABLE_SQL = (
    "SELECT MIN(f) FROM (SELECT MIN(first_offset) AS f FROM txn_partitions"
    " WHERE topic_id = ?1 AND partition = ?2 AND first_offset >= 0"
    " UNION ALL SELECT MIN(first_offset) FROM mirror_txns"
    " WHERE topic_id = ?1 AND partition = ?2)"
)
"""The first offset of the partition's oldest ongoing transaction (index txn_partitions_lso),
local or mirrored (mirror_txns, rebuilt from mirrored batches: see mirror_types)."""

_ABORTED_SQL = (
    "SELECT producer_id, first_offset FROM aborted_txns"
    " WHERE topic_id = ? AND partition = ? AND marker_offset >= ? AND first_offset <= ?"
    " ORDER BY marker_offset"
)
"""Aborted transactions meeting [from, to]: Kafka's rule (the marker at or after the fetch
offset, the first offset at or before the last offset returned)."""


def stable_offset(first_unstable: int | None, part: PartitionRow) -> int:
    """The last stable offset from the oldest ongoing transaction's first offset (None: no
    transaction has written to the partition): never below the log start (Kafka's rule,
    for a transaction whose start was deleted) nor above the high watermark."""
    if first_unstable is None:
        return part.high_watermark
    return min(max(first_unstable, part.log_start_offset), part.high_watermark)


def last_stable_offset(conn: sqlite3.Connection, part: PartitionRow) -> int:
    row = conn.execute(_FIRST_UNSTABLE_SQL, (part.topic_id, part.partition)).fetchone()
    return stable_offset(row[0], part)


def find_batches(
    conn: sqlite3.Connection, requests: Sequence[FindBatchesRequest]
) -> list[FindBatchesResult]:
    return [_find(conn, req) for req in requests]


def _find(conn: sqlite3.Connection, req: FindBatchesRequest) -> FindBatchesResult:
    part = find_partition(conn, req.topic_id, req.partition)
    if part is None:
        return FindBatchesResult(ErrorCode.unknown_topic_or_partition)
    lso = last_stable_offset(conn, part)
    bounds = {
        "log_start_offset": part.log_start_offset,
        "high_watermark": part.high_watermark,
        "last_stable_offset": lso,
    }
    if req.offset < part.log_start_offset or req.offset > part.high_watermark:
        return FindBatchesResult(ErrorCode.offset_out_of_range, **bounds)
    limit = lso if req.read_committed else part.high_watermark
    if req.offset >= limit:
        return FindBatchesResult(ErrorCode.none, **bounds)
    cursor = conn.execute(
        f"SELECT {BATCH_COLUMNS} {_FROM} AND b.last_offset >= ? AND b.last_offset < ?"
        " ORDER BY b.last_offset",
        (part.topic_id, part.partition, req.offset, limit),
    )
    batches: list[BatchCoordinate] = []
    total = 0
    try:
        for row in cursor:
            batch = coordinate(row)
            batches.append(batch)
            total += fetch_weight(batch)
            if total >= req.max_bytes:
                break
    finally:
        cursor.close()
    aborted: list[AbortedTxn] = []
    if req.read_committed and batches:
        aborted = [
            AbortedTxn(*row)
            for row in conn.execute(
                _ABORTED_SQL, (part.topic_id, part.partition, req.offset, batches[-1].last_offset)
            )
        ]
    return FindBatchesResult(ErrorCode.none, batches, aborted=aborted, **bounds)


def log_info(conn: sqlite3.Connection, partitions: Sequence[PartitionKey]) -> list[LogInfo]:
    results: list[LogInfo] = []
    for key in partitions:
        part = find_partition(conn, key.topic_id, key.partition)
        if part is None:
            results.append(LogInfo(ErrorCode.unknown_topic_or_partition))
        else:
            results.append(
                LogInfo(
                    ErrorCode.none,
                    part.log_start_offset,
                    part.high_watermark,
                    part.byte_size,
                    last_stable_offset(conn, part),
                )
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
    if req.timestamp < 0 and req.timestamp not in (LATEST_TIMESTAMP, MAX_TIMESTAMP):
        return ListOffsetsResult(ErrorCode.invalid_request)
    limit = last_stable_offset(conn, part) if req.read_committed else part.high_watermark
    if req.timestamp == LATEST_TIMESTAMP:
        return ListOffsetsResult(ErrorCode.none, limit)
    if req.timestamp == MAX_TIMESTAMP:
        found = _max_timestamp(conn, part)
    else:
        found = _by_timestamp(conn, part, req.timestamp)
    return visible(found, limit)


def visible(found: ListOffsetsResult, limit: int) -> ListOffsetsResult:
    """Kafka answers a time lookup only with an offset the isolation level may read
    (below the last stable offset for read_committed), else no offset."""
    if found.offset >= limit:
        return ListOffsetsResult(ErrorCode.none)
    return found


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
    highest = row[BATCH_COLUMN_COUNT]
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
