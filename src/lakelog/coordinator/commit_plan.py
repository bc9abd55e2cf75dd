"""What `commit_file` decides for each batch, shared by every coordinator: offsets from the
high watermark, the idempotent-producer verdict, LogAppendTime, and the rows to write.
Pure: each implementation loads the partitions and producer histories, calls
`plan_batch` per batch, then writes what the plan collected."""

from __future__ import annotations

from dataclasses import dataclass, field
from uuid import UUID

from lakelog.coordinator import idempotence
from lakelog.coordinator.idempotence import ProducerBatch
from lakelog.coordinator.interface import (
    NO_TIMESTAMP,
    CommitBatch,
    CommitBatchResult,
    TimestampType,
)
from lakelog.coordinator.sqlite.rows import PartitionRow, batch_timestamp
from lakelog.coordinator.txn_rules import OngoingTxn, barrier
from lakelog.errors import ErrorCode

ProducerKey = tuple[int, int, int]
"""(topic row id, partition, producer id)."""


@dataclass(slots=True)
class CommitPlan:
    """What one commit_file call changes, kept in memory and written at the end."""

    now: int
    partitions: dict[tuple[UUID, int], PartitionRow | None] = field(default_factory=dict)
    """By (topic id, partition); None for one that does not exist."""
    histories: dict[ProducerKey, list[ProducerBatch]] = field(default_factory=dict)
    touched: dict[tuple[int, int], PartitionRow] = field(default_factory=dict)
    added_bytes: dict[tuple[int, int], int] = field(default_factory=dict)
    changed_producers: set[ProducerKey] = field(default_factory=set)
    rows: list[tuple[int, ...]] = field(default_factory=list)
    live_bytes: int = 0
    txns: dict[int, OngoingTxn] = field(default_factory=dict)
    """By producer id: the transactions of the transactional batches' producers."""
    txn_firsts: list[tuple[str, int, int, int]] = field(default_factory=list)
    """(transactional id, topic row id, partition, offset): transactions' first batches."""


def well_formed(batch: CommitBatch, file_size: int) -> bool:
    return not (
        batch.record_count < 1
        or batch.byte_size < 1
        or batch.byte_offset < 0
        or batch.byte_offset + batch.byte_size > file_size
    )


def producer_key(part: PartitionRow, batch: CommitBatch) -> ProducerKey:
    return (part.topic_id, part.partition, batch.producer_id)


def plan_batch(plan: CommitPlan, batch: CommitBatch, file_size: int) -> CommitBatchResult:
    """Assign the batch its offsets (or refuse it); `plan.partitions` must hold its
    partition and `plan.histories` its producer's history (absent means none)."""
    if not well_formed(batch, file_size):
        return CommitBatchResult(ErrorCode.corrupt_message)
    part = plan.partitions.get((batch.topic_id, batch.partition))
    if part is None:
        return CommitBatchResult(ErrorCode.unknown_topic_or_partition)
    key = producer_key(part, batch)
    where = (part.topic_id, part.partition)
    if batch.is_transactional:
        error = barrier(plan.txns.get(batch.producer_id), where, batch)
        if error != ErrorCode.none:
            return CommitBatchResult(error)
    history: list[ProducerBatch] = []
    if batch.producer_id >= 0:
        history = plan.histories.get(key, [])
        verdict = idempotence.check(history, batch)
        if verdict.error != ErrorCode.none:
            return CommitBatchResult(verdict.error)
        if verdict.duplicate_of is not None:
            return CommitBatchResult(
                ErrorCode.none,
                base_offset=verdict.duplicate_of.base_offset,
                log_start_offset=part.log_start_offset,
                is_duplicate=True,
            )

    base_offset = part.high_watermark
    last_offset = base_offset + batch.record_count - 1
    part.high_watermark = last_offset + 1
    log_append_time = (
        plan.now if batch.timestamp_type == TimestampType.LOG_APPEND_TIME else NO_TIMESTAMP
    )
    timestamp = batch_timestamp(batch.timestamp_type, batch.max_timestamp, log_append_time)
    part.max_timestamp = max(part.max_timestamp, timestamp)
    if batch.is_transactional:
        txn = plan.txns[batch.producer_id]
        if txn.first_offsets[where] < 0:
            txn.first_offsets[where] = base_offset
            plan.txn_firsts.append((txn.transactional_id, *where, base_offset))
    plan.touched[where] = part
    plan.added_bytes[where] = plan.added_bytes.get(where, 0) + batch.byte_size
    plan.live_bytes += batch.byte_size
    plan.rows.append(
        (
            part.topic_id,
            part.partition,
            base_offset,
            last_offset,
            batch.byte_offset,
            batch.byte_size,
            batch.base_timestamp,
            batch.max_timestamp,
            int(batch.timestamp_type),
            log_append_time,
            part.max_timestamp,
            batch.producer_id,
            batch.producer_epoch,
            batch.base_sequence,
            int(batch.is_transactional),
        )
    )
    if batch.producer_id >= 0:
        entry = ProducerBatch(
            producer_epoch=batch.producer_epoch,
            base_sequence=batch.base_sequence,
            last_sequence=batch.last_sequence,
            base_offset=base_offset,
            last_offset=last_offset,
        )
        plan.histories[key] = idempotence.remember(history, entry)
        plan.changed_producers.add(key)
    return CommitBatchResult(
        ErrorCode.none,
        base_offset=base_offset,
        log_append_time=log_append_time,
        log_start_offset=part.log_start_offset,
    )
