"""Row shapes and lookups the PostgreSQL transaction bodies share. The pure helpers (batch
coordinates, the timestamp rule) are the SQLite coordinator's, so both answer alike."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any
from uuid import UUID

from psycopg import AsyncConnection, AsyncCursor

from lakelog.coordinator.ops.rows import (
    BATCH_COLUMN_COUNT,
    BATCH_COLUMNS,
    BATCH_TIMESTAMP_SQL,
    BATCHES_FROM,
    PartitionRow,
    batch_timestamp,
    coordinate,
    fetch_weight,
    now_ms,
)

__all__ = [
    "BATCHES_FROM",
    "BATCH_COLUMNS",
    "BATCH_COLUMN_COUNT",
    "BATCH_TIMESTAMP_SQL",
    "Conn",
    "PartitionRow",
    "batch_timestamp",
    "coordinate",
    "fetch_weight",
    "find_partitions",
    "now_ms",
    "partitions_of",
    "query_partitions",
]

Conn = AsyncConnection[Any]

PartitionKeyTuple = tuple[UUID, int]

_PARTITIONS_SQL = (
    "SELECT t.topic_uuid, p.topic_id, p.partition, p.log_start_offset, p.high_watermark,"
    " p.byte_size, p.max_timestamp"
    " FROM unnest(%s::uuid[], %s::int[]) AS k (topic_uuid, partition)"
    " JOIN topics t ON t.topic_uuid = k.topic_uuid"
    " JOIN partitions p ON p.topic_id = t.id AND p.partition = k.partition"
    " ORDER BY p.topic_id, p.partition"
)


async def query_partitions(
    conn: Conn, keys: Iterable[PartitionKeyTuple], lock: bool = False
) -> AsyncCursor[Any] | None:
    """Send the lookup of the partitions among `keys` (None if there are none); read the
    answer with `partitions_of`. In pipeline mode nothing waits until then, so further
    queries can travel in the same round trip. With `lock`, the rows are locked FOR
    UPDATE in (topic row id, partition) order, the one order every writer uses, so two
    writers touching the same partitions never deadlock."""
    wanted = list(dict.fromkeys(keys))
    if not wanted:
        return None
    sql = _PARTITIONS_SQL + (" FOR UPDATE OF p" if lock else "")
    return await conn.execute(
        sql, ([topic for topic, _ in wanted], [partition for _, partition in wanted])
    )


async def partitions_of(
    cursor: AsyncCursor[Any] | None,
) -> dict[PartitionKeyTuple, PartitionRow]:
    if cursor is None:
        return {}
    return {(row[0], row[2]): PartitionRow(*row[1:]) for row in await cursor.fetchall()}


async def find_partitions(
    conn: Conn, keys: Iterable[PartitionKeyTuple], lock: bool = False
) -> dict[PartitionKeyTuple, PartitionRow]:
    """The partitions that exist among `keys`, in one query (see `query_partitions`)."""
    return await partitions_of(await query_partitions(conn, keys, lock))


async def lock_topic_partitions(conn: Conn, topic_ids: Iterable[int]) -> None:
    """Lock every partition of the topics (by row id), in the writers' order."""
    await conn.execute(
        "SELECT 1 FROM partitions WHERE topic_id = ANY(%s::bigint[])"
        " ORDER BY topic_id, partition FOR UPDATE",
        (sorted(set(topic_ids)),),
    )
