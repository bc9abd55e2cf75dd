"""The commit planner every coordinator shares (coordinator/commit_plan.py): what it asks
to load, and what it decides and collects per batch."""

from __future__ import annotations

import uuid

from lakelog.coordinator.commit_plan import (
    BATCH_ROW_COLUMNS,
    CommitPlan,
    plan_batch,
    wanted,
)
from lakelog.coordinator.idempotence import ProducerBatch
from lakelog.coordinator.log_types import CommitBatch, TimestampType
from lakelog.coordinator.ops.rows import PartitionRow
from lakelog.util.errors import ErrorCode

T1, T2 = uuid.uuid4(), uuid.uuid4()
FILE_SIZE = 1000
NOW = 5_000


def batch(
    topic: uuid.UUID = T1,
    partition: int = 0,
    *,
    offset: int = 0,
    size: int = 10,
    records: int = 2,
    pid: int = -1,
    seq: int = -1,
    ts_type: TimestampType = TimestampType.CREATE_TIME,
    max_ts: int = 100,
) -> CommitBatch:
    return CommitBatch(
        topic,
        partition,
        offset,
        size,
        records,
        50,
        max_ts,
        ts_type,
        pid,
        0 if pid >= 0 else -1,
        seq,
    )


def plan_over(*partitions: tuple[uuid.UUID, int, int]) -> CommitPlan:
    """A plan whose loaded partitions are (topic, partition, topic row id), all empty."""
    plan = CommitPlan(now=NOW, file_id=9)
    for topic, partition, row_id in partitions:
        plan.partitions[(topic, partition)] = PartitionRow(row_id, partition, 0, 0, 0, -1)
    return plan


def test_wanted_lists_each_key_once_in_first_seen_order_and_skips_malformed() -> None:
    batches = [
        batch(T1, 1, pid=7, seq=0),
        batch(T1, 1, pid=7, seq=2),
        batch(T2, 0),
        batch(T1, 1, pid=8, seq=0),
        batch(T2, 5, size=0),  # malformed: nothing to load for it
        batch(T2, 0, pid=7, seq=0),
        batch(T1, 1, pid=7, seq=4),
    ]
    want = wanted(batches, FILE_SIZE)
    assert want.partitions == [(T1, 1), (T2, 0)]
    assert want.producers == [(T1, 1, 7), (T1, 1, 8), (T2, 0, 7)]


def test_offsets_are_dense_per_partition_and_rows_follow_the_column_order() -> None:
    plan = plan_over((T1, 0, 1), (T2, 3, 2))
    results = [
        plan_batch(plan, batch(T1, 0, offset=0, records=3), FILE_SIZE),
        plan_batch(plan, batch(T2, 3, offset=10, records=1), FILE_SIZE),
        plan_batch(plan, batch(T1, 0, offset=20, records=2, max_ts=90), FILE_SIZE),
    ]
    assert [(r.error, r.base_offset) for r in results] == [
        (ErrorCode.none, 0),
        (ErrorCode.none, 0),
        (ErrorCode.none, 3),
    ]
    assert plan.partitions[(T1, 0)].high_watermark == 5
    assert plan.added_bytes == {(1, 0): 20, (2, 3): 10}
    assert plan.live_bytes == 30
    rows = [dict(zip(BATCH_ROW_COLUMNS, row, strict=True)) for row in plan.rows]
    assert len(rows) == 3
    assert rows[2] == {
        "topic_id": 1,
        "partition": 0,
        "base_offset": 3,
        "last_offset": 4,
        "byte_offset": 20,
        "byte_size": 10,
        "base_timestamp": 50,
        "max_timestamp": 90,
        "timestamp_type": 0,
        "log_append_time": -1,
        "timestamp_high": 100,  # the partition's largest timestamp so far, never lower
        "producer_id": -1,
        "producer_epoch": -1,
        "base_sequence": -1,
        "is_transactional": 0,
        "file_id": 9,
    }


def test_log_append_time_is_the_commit_time() -> None:
    plan = plan_over((T1, 0, 1))
    result = plan_batch(plan, batch(ts_type=TimestampType.LOG_APPEND_TIME), FILE_SIZE)
    assert result.log_append_time == NOW
    assert plan.partitions[(T1, 0)].max_timestamp == NOW


def test_refusals_change_nothing() -> None:
    plan = plan_over((T1, 0, 1))
    assert plan_batch(plan, batch(offset=995), FILE_SIZE).error == ErrorCode.corrupt_message
    assert plan_batch(plan, batch(records=0), FILE_SIZE).error == ErrorCode.corrupt_message
    assert plan_batch(plan, batch(T2), FILE_SIZE).error == ErrorCode.unknown_topic_or_partition
    gap = plan_batch(plan, batch(pid=7, seq=-1), FILE_SIZE)
    assert gap.error == ErrorCode.out_of_order_sequence_number
    assert (len(plan.rows), plan.touched, plan.live_bytes, plan.changed_producers) == (
        0,
        {},
        0,
        set(),
    )


def test_producer_history_carries_through_one_plan() -> None:
    plan = plan_over((T1, 0, 1))
    plan.histories[(1, 0, 7)] = [ProducerBatch(0, 0, 1, 0, 1)]
    plan.partitions[(T1, 0)].high_watermark = 2
    first = plan_batch(plan, batch(pid=7, seq=2), FILE_SIZE)
    retry = plan_batch(plan, batch(pid=7, seq=2), FILE_SIZE)
    old_retry = plan_batch(plan, batch(pid=7, seq=0), FILE_SIZE)
    gap = plan_batch(plan, batch(pid=7, seq=9), FILE_SIZE)
    assert (first.base_offset, first.is_duplicate) == (2, False)
    assert (retry.base_offset, retry.is_duplicate) == (2, True)
    assert (old_retry.base_offset, old_retry.is_duplicate) == (0, True)
    assert gap.error == ErrorCode.out_of_order_sequence_number
    assert plan.histories[(1, 0, 7)] == [ProducerBatch(0, 0, 1, 0, 1), ProducerBatch(0, 2, 3, 2, 3)]
    assert plan.changed_producers == {(1, 0, 7)}
    assert len(plan.rows) == 1
