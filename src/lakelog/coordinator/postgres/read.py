"""The PostgreSQL coordinator's read side: batch lookup for fetch, log bounds, ListOffsets.
Each function runs in a REPEATABLE READ, READ ONLY transaction, so it sees one snapshot
(a partition's bounds and its batches agree) and never conflicts with writers.

Round trips cost more than rows here, so lookups are set-wise: for find_batches one query
finds every asked partition, another the oldest ongoing transaction of each (the last
stable offset) and a third brings the first page of batches for all of them, all sent in
one round trip; read_committed fetches then ask for their aborted transactions in one
more."""

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
    BATCH_COLUMN_COUNT,
    BATCH_COLUMNS,
    BATCH_TIMESTAMP_SQL,
    BATCHES_FROM,
    Conn,
    PartitionKeyTuple,
    PartitionRow,
    batch_timestamp,
    coordinate,
    fetch_weight,
    partitions_of,
    query_partitions,
)
from lakelog.coordinator.sqlite.read import EARLIEST_LOCAL_TIMESTAMP, stable_offset, visible
from lakelog.coordinator.txn_types import AbortedTxn
from lakelog.errors import ErrorCode

PAGE = 128
"""Batches read per partition and query; a fetch needing more reads further pages."""

_FROM = f"FROM {BATCHES_FROM} WHERE b.topic_id = %s AND b.partition = %s"

_FIRST_PAGES = (
    f"SELECT k.i, x.* FROM unnest(%s::int[], %s::uuid[], %s::int[], %s::bigint[])"
    f" AS k (i, topic_uuid, partition, from_offset)"
    f" JOIN topics t ON t.topic_uuid = k.topic_uuid"
    f" CROSS JOIN LATERAL (SELECT {BATCH_COLUMNS} FROM {BATCHES_FROM}"
    f"  WHERE b.topic_id = t.id AND b.partition = k.partition"
    f"  AND b.last_offset >= k.from_offset ORDER BY b.last_offset LIMIT {PAGE}) AS x"
    f" ORDER BY k.i, x.last_offset"
)
"""The first page of batches of every request, found by topic id like the partitions, so
both queries go out together (one snapshot: they agree). read_committed requests take
only the rows below their last stable offset."""

_FIRST_UNSTABLE = (
    "SELECT t.topic_uuid, k.partition, LEAST((SELECT MIN(tp.first_offset) FROM txn_partitions tp"
    "  WHERE tp.topic_id = t.id AND tp.partition = k.partition AND tp.first_offset >= 0),"
    " (SELECT MIN(mt.first_offset) FROM mirror_txns mt"
    "  WHERE mt.topic_id = t.id AND mt.partition = k.partition))"
    " FROM unnest(%s::uuid[], %s::int[]) AS k (topic_uuid, partition)"
    " JOIN topics t ON t.topic_uuid = k.topic_uuid"
)
"""Per asked partition, the first offset of its oldest ongoing transaction (NULL: none),
local or mirrored (mirror_txns, see mirror_types), one index seek each."""

_ABORTED = (
    "SELECT k.i, a.producer_id, a.first_offset"
    " FROM unnest(%s::int[], %s::bigint[], %s::int[], %s::bigint[], %s::bigint[])"
    " AS k (i, topic_id, partition, from_offset, to_offset)"
    " CROSS JOIN LATERAL (SELECT producer_id, first_offset, marker_offset FROM aborted_txns"
    "  WHERE topic_id = k.topic_id AND partition = k.partition"
    "  AND marker_offset >= k.from_offset AND first_offset <= k.to_offset) AS a"
    " ORDER BY k.i, a.marker_offset"
)
"""Aborted transactions meeting each read range (Kafka's rule: the marker at or after the
fetch offset, the first offset at or before the last offset returned)."""


async def query_first_unstable(
    conn: Conn, keys: Sequence[PartitionKeyTuple]
) -> AsyncCursor[Any] | None:
    """Send the oldest-ongoing-transaction lookup (read it with `first_unstable_of`)."""
    if not keys:
        return None
    return await conn.execute(
        _FIRST_UNSTABLE, ([topic for topic, _ in keys], [partition for _, partition in keys])
    )


async def first_unstable_of(
    cursor: AsyncCursor[Any] | None,
) -> dict[PartitionKeyTuple, int | None]:
    if cursor is None:
        return {}
    return {(row[0], row[1]): row[2] for row in await cursor.fetchall()}


async def _partitions_with_lso(
    conn: Conn, keys: Sequence[PartitionKeyTuple]
) -> tuple[dict[PartitionKeyTuple, PartitionRow], dict[PartitionKeyTuple, int]]:
    """The partitions that exist among `keys` and their last stable offsets, in one round
    trip."""
    located = await query_partitions(conn, keys)
    unstable = await query_first_unstable(conn, keys)
    parts = await partitions_of(located)
    firsts = await first_unstable_of(unstable)
    return parts, {key: stable_offset(firsts.get(key), part) for key, part in parts.items()}


class _Reading:
    """One find_batches request being filled."""

    def __init__(self, part: PartitionRow, req: FindBatchesRequest, lso: int) -> None:
        self.part = part
        self.req = req
        self.lso = lso
        self.limit = lso if req.read_committed else part.high_watermark
        """Batches end below this."""
        self.batches: list[BatchCoordinate] = []
        self.aborted: list[AbortedTxn] = []
        self.total = 0
        self.full = False
        """max_bytes or the limit reached: no more batches wanted."""

    def add(self, rows: Sequence[tuple[Any, ...]]) -> bool:
        """Take rows in offset order until max_bytes or the limit; True if the page ran out
        first and was full, so more batches may follow."""
        for row in rows:
            batch = coordinate(row)
            if batch.last_offset >= self.limit:
                self.full = True
                return False
            self.batches.append(batch)
            self.total += fetch_weight(batch)
            if self.total >= self.req.max_bytes:
                self.full = True
                return False
        return len(rows) >= PAGE

    def result(self) -> FindBatchesResult:
        return FindBatchesResult(
            ErrorCode.none,
            self.batches,
            self.part.log_start_offset,
            self.part.high_watermark,
            self.lso,
            self.aborted,
        )


async def find_batches(
    conn: Conn, requests: Sequence[FindBatchesRequest]
) -> list[FindBatchesResult]:
    keys = list(dict.fromkeys((r.topic_id, r.partition) for r in requests))
    located = await query_partitions(conn, keys)
    unstable = await query_first_unstable(conn, keys)
    pages = await _query_first_pages(conn, requests)
    parts = await partitions_of(located)
    firsts = await first_unstable_of(unstable)
    first_pages = await _first_pages(pages)
    results: list[FindBatchesResult | _Reading] = []
    for i, req in enumerate(requests):
        key = (req.topic_id, req.partition)
        part = parts.get(key)
        if part is None:
            results.append(FindBatchesResult(ErrorCode.unknown_topic_or_partition))
            continue
        lso = stable_offset(firsts.get(key), part)
        bounds = {
            "log_start_offset": part.log_start_offset,
            "high_watermark": part.high_watermark,
            "last_stable_offset": lso,
        }
        if req.offset < part.log_start_offset or req.offset > part.high_watermark:
            results.append(FindBatchesResult(ErrorCode.offset_out_of_range, **bounds))
            continue
        reading = _Reading(part, req, lso)
        if req.offset >= reading.limit:
            results.append(FindBatchesResult(ErrorCode.none, **bounds))
            continue
        more = reading.add(first_pages.get(i, []))
        while more:
            more = await _next_page(conn, reading)
        results.append(reading)
    await _find_aborted([r for r in results if isinstance(r, _Reading)], conn)
    return [r.result() if isinstance(r, _Reading) else r for r in results]


async def _find_aborted(readings: Sequence[_Reading], conn: Conn) -> None:
    """Fill the aborted transactions of every read_committed reading, in one query."""
    wanted = [r for r in readings if r.req.read_committed and r.batches]
    if not wanted:
        return
    cursor = await conn.execute(
        _ABORTED,
        (
            list(range(len(wanted))),
            [r.part.topic_id for r in wanted],
            [r.part.partition for r in wanted],
            [r.req.offset for r in wanted],
            [r.batches[-1].last_offset for r in wanted],
        ),
    )
    for i, producer_id, first_offset in await cursor.fetchall():
        wanted[i].aborted.append(AbortedTxn(producer_id, first_offset))


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
        f"SELECT {BATCH_COLUMNS} {_FROM} AND b.last_offset > %s AND b.last_offset < %s"
        f" ORDER BY b.last_offset LIMIT {PAGE}",
        (reading.part.topic_id, reading.part.partition, after, reading.limit),
    )
    return reading.add(await cursor.fetchall())


async def log_info(conn: Conn, partitions: Sequence[PartitionKey]) -> list[LogInfo]:
    parts, lsos = await _partitions_with_lso(
        conn, list(dict.fromkeys((k.topic_id, k.partition) for k in partitions))
    )
    results: list[LogInfo] = []
    for key in partitions:
        part = parts.get((key.topic_id, key.partition))
        if part is None:
            results.append(LogInfo(ErrorCode.unknown_topic_or_partition))
        else:
            results.append(
                LogInfo(
                    ErrorCode.none,
                    part.log_start_offset,
                    part.high_watermark,
                    part.byte_size,
                    lsos[(key.topic_id, key.partition)],
                )
            )
    return results


async def list_offsets(
    conn: Conn, requests: Sequence[ListOffsetsRequest]
) -> list[ListOffsetsResult]:
    parts, lsos = await _partitions_with_lso(
        conn, list(dict.fromkeys((r.topic_id, r.partition) for r in requests))
    )
    results = []
    for req in requests:
        key = (req.topic_id, req.partition)
        results.append(await _list_offset(conn, parts.get(key), lsos.get(key, -1), req))
    return results


async def _list_offset(
    conn: Conn, part: PartitionRow | None, lso: int, req: ListOffsetsRequest
) -> ListOffsetsResult:
    if part is None:
        return ListOffsetsResult(ErrorCode.unknown_topic_or_partition)
    if req.timestamp in (EARLIEST_TIMESTAMP, EARLIEST_LOCAL_TIMESTAMP):
        return ListOffsetsResult(ErrorCode.none, part.log_start_offset)
    if req.timestamp < 0 and req.timestamp not in (LATEST_TIMESTAMP, MAX_TIMESTAMP):
        return ListOffsetsResult(ErrorCode.invalid_request)
    limit = lso if req.read_committed else part.high_watermark
    if req.timestamp == LATEST_TIMESTAMP:
        return ListOffsetsResult(ErrorCode.none, limit)
    if req.timestamp == MAX_TIMESTAMP:
        found = await _max_timestamp(conn, part)
    else:
        found = await _by_timestamp(conn, part, req.timestamp)
    return visible(found, limit)


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
    highest = row[BATCH_COLUMN_COUNT]
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
