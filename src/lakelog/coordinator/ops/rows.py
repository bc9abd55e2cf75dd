"""Row shapes and lookups the coordinator operations share."""

from __future__ import annotations

import time
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any
from uuid import UUID

from lakelog.coordinator.engine import Pending, Session
from lakelog.coordinator.log_types import BatchCoordinate, TimestampType

BATCH_COLUMNS = (
    "COALESCE(f.object_key, ''), b.byte_offset, b.byte_size, b.base_offset, b.last_offset, "
    "b.base_timestamp, b.max_timestamp, b.timestamp_type, b.log_append_time, "
    "b.producer_id, b.producer_epoch, b.base_sequence, b.is_transactional, b.control_type"
)
"""Select list for `coordinate`; the query must read `BATCHES_FROM`."""

BATCH_COLUMN_COUNT = 14

BATCHES_FROM = "batches b LEFT JOIN files f ON f.id = b.file_id"
"""Batches with their object keys. A LEFT JOIN: transaction markers have no file."""

MARKER_FETCH_BYTES = 78
"""What a marker weighs against find_batches' max_bytes: its control batch's size (markers
have byte_size 0, and a log of markers alone must still fill a fetch)."""

BATCH_TIMESTAMP_SQL = (
    "(CASE WHEN b.timestamp_type = 1 THEN b.log_append_time ELSE b.max_timestamp END)"
)
"""A batch's timestamp for list_offsets and retention: the commit time on LogAppendTime
topics, as Kafka rewrites maxTimestamp there."""


def now_ms() -> int:
    return time.time_ns() // 1_000_000


def batch_timestamp(timestamp_type: int, max_timestamp: int, log_append_time: int) -> int:
    """Python twin of BATCH_TIMESTAMP_SQL."""
    if timestamp_type == TimestampType.LOG_APPEND_TIME:
        return log_append_time
    return max_timestamp


def coordinate(row: tuple[Any, ...]) -> BatchCoordinate:
    return BatchCoordinate(
        object_key=row[0],
        byte_offset=row[1],
        byte_size=row[2],
        base_offset=row[3],
        last_offset=row[4],
        base_timestamp=row[5],
        max_timestamp=row[6],
        timestamp_type=TimestampType(row[7]),
        log_append_time=row[8],
        producer_id=row[9],
        producer_epoch=row[10],
        base_sequence=row[11],
        is_transactional=bool(row[12]),
        control_type=row[13],
    )


def fetch_weight(batch: BatchCoordinate) -> int:
    """The bytes a batch counts for against find_batches' max_bytes."""
    return batch.byte_size if batch.control_type < 0 else MARKER_FETCH_BYTES


@dataclass(slots=True)
class PartitionRow:
    topic_id: int
    """The topic's internal row id."""
    partition: int
    log_start_offset: int
    high_watermark: int
    byte_size: int
    max_timestamp: int


TIME_MARK_TYPES = (
    ("topic_id", "bigint"),
    ("partition", "int"),
    ("timestamp_high", "bigint"),
    ("last_offset", "bigint"),
)
"""The `time_index` columns (`Session.insert_int_rows`)."""


def time_marks(touched: Iterable[PartitionRow]) -> list[tuple[int, int, int, int]]:
    """One time-index mark per partition a commit appended to: its timestamp_high and last
    offset after the commit (every batch up to that offset has a timestamp_high no higher)."""
    return [(p.topic_id, p.partition, p.max_timestamp, p.high_watermark - 1) for p in touched]


PartitionKeyTuple = tuple[UUID, int]

_PARTITION_KEYS = (("topic_uuid", "uuid"), ("partition", "int"))


async def send_partitions(
    s: Session, keys: Iterable[PartitionKeyTuple], lock: bool = False
) -> Pending | None:
    """Send the lookup of the partitions that exist among `keys` (None if there are none);
    read it with `partitions_of`, after sending what else can travel in the same round
    trip. With `lock` (PostgreSQL), the rows are locked FOR UPDATE in (topic row id,
    partition) order, the one order every writer uses, so two writers touching the same
    partitions never deadlock."""
    wanted = list(dict.fromkeys(keys))
    if not wanted:
        return None
    d = s.dialect
    keyset, params = d.keyset("k", _PARTITION_KEYS, [(d.uuid(t), p) for t, p in wanted])
    return await s.send(
        "SELECT t.topic_uuid, p.topic_id, p.partition, p.log_start_offset, p.high_watermark,"
        f" p.byte_size, p.max_timestamp FROM {keyset}"
        " JOIN topics t ON t.topic_uuid = k.topic_uuid"
        " JOIN partitions p ON p.topic_id = t.id AND p.partition = k.partition"
        " ORDER BY p.topic_id, p.partition"
        + (d.for_update + " OF p" if lock and d.for_update else ""),
        params,
    )


async def partitions_of(s: Session, sent: Pending | None) -> dict[PartitionKeyTuple, PartitionRow]:
    """The answer to `send_partitions`, by (topic id, partition)."""
    if sent is None:
        return {}
    to_uuid = s.dialect.to_uuid
    return {(to_uuid(row[0]), row[2]): PartitionRow(*row[1:]) for row in await sent.fetchall()}


async def find_partitions(
    s: Session, keys: Iterable[PartitionKeyTuple], lock: bool = False
) -> dict[PartitionKeyTuple, PartitionRow]:
    """The partitions that exist among `keys`, in one query (see `send_partitions`)."""
    return await partitions_of(s, await send_partitions(s, keys, lock))


async def lock_topic_partitions(s: Session, topic_ids: Iterable[int]) -> None:
    """Lock every partition of the topics (by row id), in the writers' order."""
    if not s.dialect.for_update:
        return
    keyset, params = s.dialect.keyset(
        "k", (("id", "bigint"),), [(t,) for t in sorted(set(topic_ids))]
    )
    await s.execute(
        f"SELECT 1 FROM partitions WHERE topic_id IN (SELECT k.id FROM {keyset})"
        " ORDER BY topic_id, partition" + s.dialect.for_update,
        params,
    )
