"""The PostgreSQL coordinator's read side: batch lookup for fetch, log bounds, ListOffsets.
Each function runs in a REPEATABLE READ, READ ONLY transaction, so it sees one snapshot
(a partition's bounds and its batches agree) and never conflicts with writers.

Round trips cost more than rows here, so lookups are set-wise: for find_batches one query
finds every asked partition and another brings the first page of batches for all of them,
both sent in one round trip."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from psycopg import AsyncCursor

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
from lakelog.coordinator.postgres.rows import (
    BATCH_COLUMNS,
    BATCH_TIMESTAMP_SQL,
    Conn,
    PartitionRow,
    batch_timestamp,
    coordinate,
    find_partitions,
    partitions_of,
    query_partitions,
)
from lakelog.coordinator.sqlite.read import EARLIEST_LOCAL_TIMESTAMP
from lakelog.errors import ErrorCode

PAGE = 128
"""Batches read per partition and query; a fetch needing more reads further pages."""

_FROM = "FROM batches b JOIN files f ON f.id = b.file_id WHERE b.topic_id = %s AND b.partition = %s"

_FIRST_PAGES = (
    f"SELECT k.i, x.* FROM unnest(%s::int[], %s::uuid[], %s::int[], %s::bigint[])"
    f" AS k (i, topic_uuid, partition, from_offset)"
    f" JOIN topics t ON t.topic_uuid = k.topic_uuid"
    f" CROSS JOIN LATERAL (SELECT {BATCH_COLUMNS} FROM batches b"
    f"  JOIN files f ON f.id = b.file_id"
    f"  WHERE b.topic_id = t.id AND b.partition = k.partition"
    f"  AND b.last_offset >= k.from_offset ORDER BY b.last_offset LIMIT {PAGE}) AS x"
    f" ORDER BY k.i, x.last_offset"
)
"""The first page of batches of every request, found by topic id like the partitions, so
both queries go out together (one snapshot: they agree)."""


class _Reading:
    """One find_batches request being filled."""

    def __init__(self, part: PartitionRow, req: FindBatchesRequest) -> None:
        self.part = part
        self.req = req
        self.batches: list[BatchCoordinate] = []
        self.total = 0
        self.full = False
        """max_bytes reached: no more batches wanted."""

    def add(self, rows: Sequence[tuple[Any, ...]]) -> bool:
        """Take rows in offset order until max_bytes; True if the page ran out first and
        was full, so more batches may follow."""
        for row in rows:
            batch = coordinate(row)
            self.batches.append(batch)
            self.total += batch.byte_size
            if self.total >= self.req.max_bytes:
                self.full = True
                return False
        return len(rows) >= PAGE

    def result(self) -> FindBatchesResult:
        return FindBatchesResult(
            ErrorCode.none, self.batches, self.part.log_start_offset, self.part.high_watermark
        )


async def find_batches(
    conn: Conn, requests: Sequence[FindBatchesRequest]
) -> list[FindBatchesResult]:
    located = await query_partitions(conn, ((r.topic_id, r.partition) for r in requests))
    pages = await _query_first_pages(conn, requests)
    parts = await partitions_of(located)
    first_pages = await _first_pages(pages)
    results: list[FindBatchesResult] = []
    for i, req in enumerate(requests):
        part = parts.get((req.topic_id, req.partition))
        if part is None:
            results.append(FindBatchesResult(ErrorCode.unknown_topic_or_partition))
            continue
        bounds = {"log_start_offset": part.log_start_offset, "high_watermark": part.high_watermark}
        if req.offset < part.log_start_offset or req.offset > part.high_watermark:
            results.append(FindBatchesResult(ErrorCode.offset_out_of_range, **bounds))
            continue
        if req.offset == part.high_watermark:
            results.append(FindBatchesResult(ErrorCode.none, **bounds))
            continue
        reading = _Reading(part, req)
        more = reading.add(first_pages.get(i, []))
        while more:
            more = await _next_page(conn, reading)
        results.append(reading.result())
    return results


async def _query_first_pages(
    conn: Conn, requests: Sequence[FindBatchesRequest]
) -> AsyncCursor[Any] | None:
    if not requests:
        return None
    return await conn.execute(
        _FIRST_PAGES,
        (
            list(range(len(requests))),
            [r.topic_id for r in requests],
            [r.partition for r in requests],
            [r.offset for r in requests],
        ),
    )


async def _first_pages(cursor: AsyncCursor[Any] | None) -> dict[int, list[tuple[Any, ...]]]:
    pages: dict[int, list[tuple[Any, ...]]] = {}
    if cursor is not None:
        for row in await cursor.fetchall():
            pages.setdefault(row[0], []).append(row[1:])
    return pages


async def _next_page(conn: Conn, reading: _Reading) -> bool:
    after = reading.batches[-1].last_offset
    cursor = await conn.execute(
        f"SELECT {BATCH_COLUMNS} {_FROM} AND b.last_offset > %s ORDER BY b.last_offset"
        f" LIMIT {PAGE}",
        (reading.part.topic_id, reading.part.partition, after),
    )
    return reading.add(await cursor.fetchall())


async def log_info(conn: Conn, partitions: Sequence[PartitionKey]) -> list[LogInfo]:
    parts = await find_partitions(conn, ((k.topic_id, k.partition) for k in partitions))
    results: list[LogInfo] = []
    for key in partitions:
        part = parts.get((key.topic_id, key.partition))
        if part is None:
            results.append(LogInfo(ErrorCode.unknown_topic_or_partition))
        else:
            results.append(
                LogInfo(ErrorCode.none, part.log_start_offset, part.high_watermark, part.byte_size)
            )
    return results


async def list_offsets(
    conn: Conn, requests: Sequence[ListOffsetsRequest]
) -> list[ListOffsetsResult]:
    parts = await find_partitions(conn, ((r.topic_id, r.partition) for r in requests))
    return [
        await _list_offset(conn, parts.get((req.topic_id, req.partition)), req) for req in requests
    ]


async def _list_offset(
    conn: Conn, part: PartitionRow | None, req: ListOffsetsRequest
) -> ListOffsetsResult:
    if part is None:
        return ListOffsetsResult(ErrorCode.unknown_topic_or_partition)
    if req.timestamp in (EARLIEST_TIMESTAMP, EARLIEST_LOCAL_TIMESTAMP):
        return ListOffsetsResult(ErrorCode.none, part.log_start_offset)
    if req.timestamp == LATEST_TIMESTAMP:
        return ListOffsetsResult(ErrorCode.none, part.high_watermark)
    if req.timestamp == MAX_TIMESTAMP:
        return await _max_timestamp(conn, part)
    if req.timestamp < 0:
        return ListOffsetsResult(ErrorCode.invalid_request)
    return await _by_timestamp(conn, part, req.timestamp)


async def _one(conn: Conn, sql: str, args: tuple[Any, ...]) -> tuple[Any, ...] | None:
    cursor = await conn.execute(sql, args)
    return await cursor.fetchone()


async def _by_timestamp(conn: Conn, part: PartitionRow, time: int) -> ListOffsetsResult:
    key = (part.topic_id, part.partition)
    # timestamp_high never decreases with the offset, so the first batch reaching `time`
    # is an index seek. It may be a batch whose own timestamp is lower when the high
    # mark came from a batch already deleted; then scan on from there.
    row = await _one(
        conn,
        f"SELECT {BATCH_COLUMNS} {_FROM} AND b.timestamp_high >= %s"
        " ORDER BY b.timestamp_high, b.last_offset LIMIT 1",
        (*key, time),
    )
    if row is not None and _timestamp_of(row) < time:
        row = await _one(
            conn,
            f"SELECT {BATCH_COLUMNS} {_FROM} AND b.last_offset > %s"
            f" AND {BATCH_TIMESTAMP_SQL} >= %s ORDER BY b.last_offset LIMIT 1",
            (*key, row[4], time),
        )
    if row is None:
        return ListOffsetsResult(ErrorCode.none)
    batch = coordinate(row)
    return ListOffsetsResult(
        ErrorCode.none,
        offset=max(batch.base_offset, part.log_start_offset),
        timestamp=_timestamp_of(row),
        batch=batch,
    )


async def _max_timestamp(conn: Conn, part: PartitionRow) -> ListOffsetsResult:
    key = (part.topic_id, part.partition)
    row = await _one(
        conn,
        f"SELECT {BATCH_COLUMNS}, b.timestamp_high {_FROM} ORDER BY b.timestamp_high DESC LIMIT 1",
        key,
    )
    if row is None:
        return ListOffsetsResult(ErrorCode.none)
    highest = row[13]
    row = await _one(
        conn,
        f"SELECT {BATCH_COLUMNS} {_FROM} AND b.timestamp_high = %s ORDER BY b.last_offset LIMIT 1",
        (*key, highest),
    )
    if row is None or _timestamp_of(row) != highest:
        # The highest timestamp belonged to a deleted batch: find the live maximum.
        row = await _one(
            conn,
            f"SELECT {BATCH_COLUMNS} {_FROM}"
            f" ORDER BY {BATCH_TIMESTAMP_SQL} DESC, b.last_offset LIMIT 1",
            key,
        )
    assert row is not None  # the partition has batches: the first query found one
    return ListOffsetsResult(
        ErrorCode.none, offset=row[4], timestamp=_timestamp_of(row), batch=coordinate(row)
    )


def _timestamp_of(row: tuple[Any, ...]) -> int:
    return batch_timestamp(row[7], row[6], row[8])
