"""What `commit_file` decides for each batch, shared by every coordinator: offsets from the
high watermark, the idempotent-producer verdict, LogAppendTime, and the rows to write.

Pure: each implementation first loads, in one place and a few set-wise queries, the state
the commit needs (the partitions and producer histories `wanted` lists), then calls
`plan_batch` per batch, then writes what the plan collected with one statement per table.
`plan_batch` runs once per batch of every object (1,600 in a full 8 MiB one), so it keeps
its per-batch work to dictionary lookups and tuples.

Rows are runs: a batch that follows the previous accepted batch of the object in the same
partition, from the same producer, joins its row (up to RUN_MAX_BYTES and
RUN_MAX_BATCHES), so a full object writes about one row per partition and producer
instead of one per batch. Readers split a row's bytes back into batches
(`protocol.batch_runs`); results stay one per batch."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING
from uuid import UUID

from lakelog.coordinator import idempotence
from lakelog.coordinator.idempotence import SEQUENCE_MODULUS, ProducerBatch
from lakelog.coordinator.log_types import (
    NO_TIMESTAMP,
    CommitBatch,
    CommitBatchResult,
    TimestampType,
)
from lakelog.coordinator.txn_rules import OngoingTxn, barrier
from lakelog.util.errors import ErrorCode

if TYPE_CHECKING:
    # Only a type here: importing the sqlite package would import this module back.
    from lakelog.coordinator.ops.rows import PartitionRow

ProducerKey = tuple[int, int, int]
"""(topic row id, partition, producer id)."""

WantedProducer = tuple[UUID, int, int]
"""(topic id, partition, producer id) of a producer whose history a commit needs."""

_LOG_APPEND_TIME = TimestampType.LOG_APPEND_TIME
_NONE = ErrorCode.none
_CORRUPT = CommitBatchResult(ErrorCode.corrupt_message)
_UNKNOWN = CommitBatchResult(ErrorCode.unknown_topic_or_partition)


@dataclass(slots=True)
class Wanted:
    """What a commit loads before planning, each key once, in first-seen order."""

    partitions: list[tuple[UUID, int]]
    producers: list[WantedProducer]
    """Idempotent producers (producer_id >= 0) by partition."""


@dataclass(slots=True)
class CommitPlan:
    """What one commit_file call changes, kept in memory and written at the end."""

    now: int
    file_id: int
    """The object's row in `files`: written first, so batch rows can name it."""
    partitions: dict[tuple[UUID, int], PartitionRow] = field(default_factory=dict)
    """By (topic id, partition); absent for one that does not exist."""
    histories: dict[ProducerKey, list[ProducerBatch]] = field(default_factory=dict)
    """Absent for a producer the partition has not seen."""
    touched: dict[tuple[int, int], PartitionRow] = field(default_factory=dict)
    added_bytes: dict[tuple[int, int], int] = field(default_factory=dict)
    changed_producers: set[ProducerKey] = field(default_factory=set)
    rows: list[list[int]] = field(default_factory=list)
    """In BATCH_ROW_COLUMNS order: one per run of accepted batches (see `plan_batch`); the
    last one may still grow while batches are planned."""
    live_bytes: int = 0
    txns: dict[int, OngoingTxn] = field(default_factory=dict)
    """By producer id: the transactions of the transactional batches' producers (the
    commit barrier's view, loaded under the partition locks)."""
    run_batches: int = 0
    """Batches in the last row."""
    last_lookup: tuple[object, int, PartitionRow | None] = (None, -1, None)
    """(topic id object, partition, its row) of the last batch planned."""
    txn_firsts: list[tuple[str, int, int, int]] = field(default_factory=list)
    """(transactional id, topic row id, partition, offset): transactions' first batches."""


BATCH_ROW_COLUMNS = (
    "topic_id",
    "partition",
    "base_offset",
    "last_offset",
    "byte_offset",
    "byte_size",
    "base_timestamp",
    "max_timestamp",
    "timestamp_type",
    "log_append_time",
    "timestamp_high",
    "producer_id",
    "producer_epoch",
    "base_sequence",
    "is_transactional",
    "file_id",
)
"""The `batches` columns of a plan row, in order."""

_ROW = {name: i for i, name in enumerate(BATCH_ROW_COLUMNS)}
_R_TOPIC = _ROW["topic_id"]
_R_PARTITION = _ROW["partition"]
_R_LAST = _ROW["last_offset"]
_R_BYTE_OFFSET = _ROW["byte_offset"]
_R_BYTE_SIZE = _ROW["byte_size"]
_R_MAX_TIMESTAMP = _ROW["max_timestamp"]
_R_TIMESTAMP_TYPE = _ROW["timestamp_type"]
_R_TIMESTAMP_HIGH = _ROW["timestamp_high"]
_R_PRODUCER_ID = _ROW["producer_id"]
_R_PRODUCER_EPOCH = _ROW["producer_epoch"]
_R_TRANSACTIONAL = _ROW["is_transactional"]

RUN_MAX_BYTES = 1024 * 1024
"""A run of batches sharing one row stops growing at this size. A fetch reads a whole row
from object storage even when it starts inside it, so this bounds that read (about
max.partition.fetch.bytes, like the pipeline's merge.row.max.bytes)."""
RUN_MAX_BATCHES = 256
"""...or at this many batches: a fetch starting inside a row walks the batch headers before
its offset, so this bounds that walk (a consumer fetching tiny pieces of a row of tiny
batches would otherwise walk the row over and over)."""


def well_formed(batch: CommitBatch, file_size: int) -> bool:
    return not (
        batch.record_count < 1
        or batch.byte_size < 1
        or batch.byte_offset < 0
        or batch.byte_offset + batch.byte_size > file_size
    )


def wanted(batches: Sequence[CommitBatch], file_size: int) -> Wanted:
    """The partitions and producer histories the well-formed batches need. Objects group
    their batches by partition, so a batch is compared with the one before first."""
    partitions: dict[tuple[UUID, int], None] = {}
    producers: dict[WantedProducer, None] = {}
    last: tuple[UUID | None, int, int] = (None, -1, -1)
    for b in batches:
        if not well_formed(b, file_size):
            continue
        topic, partition, pid = b.topic_id, b.partition, b.producer_id
        if partition == last[1] and pid == last[2] and topic == last[0]:
            continue
        last = (topic, partition, pid)
        partitions[(topic, partition)] = None
        if pid >= 0:
            producers[last] = None
    return Wanted(list(partitions), list(producers))


def plan_batch(plan: CommitPlan, batch: CommitBatch, file_size: int) -> CommitBatchResult:
    """Assign the batch its offsets (or refuse it); `plan.partitions` must hold its
    partition and `plan.histories` its producer's history (absent means none)."""
    byte_offset = batch.byte_offset
    byte_size = batch.byte_size
    record_count = batch.record_count
    if record_count < 1 or byte_size < 1 or byte_offset < 0 or byte_offset + byte_size > file_size:
        return _CORRUPT
    topic, partition = batch.topic_id, batch.partition
    last = plan.last_lookup
    if topic is last[0] and partition == last[1]:
        part = last[2]  # objects group batches by partition: no UUID hash per batch
    else:
        part = plan.partitions.get((topic, partition))
        plan.last_lookup = (topic, partition, part)
    if part is None:
        return _UNKNOWN
    pid = batch.producer_id
    if batch.is_transactional:
        error = barrier(plan.txns.get(pid), (part.topic_id, part.partition), batch)
        if error != _NONE:
            return CommitBatchResult(error)
    if pid >= 0:
        key = (part.topic_id, part.partition, pid)
        history = plan.histories.get(key, ())
        verdict = idempotence.check(history, batch)
        if verdict.error != _NONE:
            return CommitBatchResult(verdict.error)
        if verdict.duplicate_of is not None:
            return CommitBatchResult(
                _NONE,
                base_offset=verdict.duplicate_of.base_offset,
                log_start_offset=part.log_start_offset,
                is_duplicate=True,
            )

    base_offset = part.high_watermark
    last_offset = base_offset + record_count - 1
    part.high_watermark = last_offset + 1
    max_timestamp = batch.max_timestamp
    if batch.timestamp_type == _LOG_APPEND_TIME:
        log_append_time = timestamp = plan.now
    else:
        log_append_time, timestamp = NO_TIMESTAMP, max_timestamp
    if timestamp > part.max_timestamp:
        part.max_timestamp = timestamp
    where = (part.topic_id, part.partition)
    if batch.is_transactional:
        txn = plan.txns[pid]
        if txn.first_offsets[where] < 0:
            txn.first_offsets[where] = base_offset
            plan.txn_firsts.append((txn.transactional_id, *where, base_offset))
    plan.touched[where] = part
    added = plan.added_bytes
    added[where] = added.get(where, 0) + byte_size
    plan.live_bytes += byte_size
    row = plan.rows[-1] if plan.rows else None
    if (
        row is not None
        and row[_R_LAST] + 1 == base_offset
        and row[_R_BYTE_OFFSET] + row[_R_BYTE_SIZE] == byte_offset
        and row[_R_BYTE_SIZE] + byte_size <= RUN_MAX_BYTES
        and plan.run_batches < RUN_MAX_BATCHES
        and row[_R_PARTITION] == part.partition
        and row[_R_TOPIC] == part.topic_id
        and row[_R_PRODUCER_ID] == pid
        and row[_R_PRODUCER_EPOCH] == batch.producer_epoch
        and row[_R_TRANSACTIONAL] == batch.is_transactional
        and row[_R_TIMESTAMP_TYPE] == batch.timestamp_type
    ):
        # The batch right after the row's last one in the object, of the same producer and
        # partition: the row's run grows to cover it (`protocol.batch_runs`).
        row[_R_LAST] = last_offset
        row[_R_BYTE_SIZE] += byte_size
        if max_timestamp > row[_R_MAX_TIMESTAMP]:
            row[_R_MAX_TIMESTAMP] = max_timestamp
        row[_R_TIMESTAMP_HIGH] = part.max_timestamp
        plan.run_batches += 1
    else:
        plan.run_batches = 1
        plan.rows.append(
            [
                part.topic_id,
                part.partition,
                base_offset,
                last_offset,
                byte_offset,
                byte_size,
                batch.base_timestamp,
                max_timestamp,
                int(batch.timestamp_type),
                log_append_time,
                part.max_timestamp,
                pid,
                batch.producer_epoch,
                batch.base_sequence,
                int(batch.is_transactional),
                plan.file_id,
            ]
        )
    if pid >= 0:
        base_sequence = batch.base_sequence
        entry = ProducerBatch(
            batch.producer_epoch,
            base_sequence,
            (base_sequence + record_count - 1) % SEQUENCE_MODULUS,
            base_offset,
            last_offset,
        )
        plan.histories[key] = idempotence.remember(history, entry)
        plan.changed_producers.add(key)
    return CommitBatchResult(_NONE, base_offset, log_append_time, part.log_start_offset)
