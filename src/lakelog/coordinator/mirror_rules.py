"""What `commit_mirror` decides, shared by every coordinator (pure: the implementations load
the partitions, mirror rows and open mirrored transactions, call `plan_mirror_batch` per
batch, then write what the plan collected).

A mirrored batch keeps the offsets it has on the source. It is accepted only while its
partition is MIRRORING under the committing broker's lease; a batch wholly below the log
end is a retry of one already copied (a duplicate, answered with its offset); one that
straddles the log end is refused. The local transaction index follows the batches: a
transactional data batch opens its producer's range, a control batch closes it, and an
abort records the aborted range (producer, first offset, marker offset)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING
from uuid import UUID

from lakelog.coordinator.commit_plan import BATCH_ROW_COLUMNS
from lakelog.coordinator.log_types import (
    NO_TIMESTAMP,
    CommitBatch,
    CommitBatchResult,
    TimestampType,
)
from lakelog.coordinator.mirror_types import READ_ONLY_ERROR, MirrorBatch, MirrorState
from lakelog.util.errors import ErrorCode

if TYPE_CHECKING:
    from lakelog.coordinator.ops.rows import PartitionRow

CONTROL_ABORT = 0

_NOT_OWNER = CommitBatchResult(ErrorCode.not_leader_or_follower)
_CORRUPT = CommitBatchResult(ErrorCode.corrupt_message)
_UNKNOWN = CommitBatchResult(ErrorCode.unknown_topic_or_partition)
_OVERLAP = CommitBatchResult(ErrorCode.invalid_record)

MIRROR_BATCH_COLUMNS = (*BATCH_ROW_COLUMNS[:-1], "control_type", BATCH_ROW_COLUMNS[-1])
"""The `batches` columns of a plan row, in order: commit_file's and the control type."""


@dataclass(slots=True)
class MirrorTarget:
    """A partition a mirror commit may write: its log and its mirror row."""

    part: PartitionRow
    state: MirrorState
    lease_owner: int
    open_txns: dict[int, int] = field(default_factory=dict)
    """Producer id -> first offset of its open mirrored transaction."""
    source_epoch: int = -1
    touched: bool = False
    added_bytes: int = 0


@dataclass(slots=True)
class MirrorPlan:
    now: int
    broker_id: int
    file_id: int
    targets: dict[tuple[UUID, int], MirrorTarget] = field(default_factory=dict)
    """By (topic id, partition); absent when the partition does not exist."""
    rows: list[tuple[int, ...]] = field(default_factory=list)
    aborted: list[tuple[int, int, int, int, int]] = field(default_factory=list)
    """(topic row id, partition, marker offset, producer id, first offset)."""
    live_bytes: int = 0

    def touched(self) -> list[MirrorTarget]:
        return [t for t in self.targets.values() if t.touched]


def well_formed(batch: MirrorBatch, file_size: int) -> bool:
    return not (
        batch.byte_size < 1
        or batch.byte_offset < 0
        or batch.byte_offset + batch.byte_size > file_size
        or batch.base_offset < 0
        or batch.last_offset < batch.base_offset
    )


def plan_mirror_batch(plan: MirrorPlan, batch: MirrorBatch, file_size: int) -> CommitBatchResult:
    """Accept or refuse one batch; batches of a partition must come in offset order."""
    if not well_formed(batch, file_size):
        return _CORRUPT
    target = plan.targets.get((batch.topic_id, batch.partition))
    if target is None:
        return _UNKNOWN
    if target.state != MirrorState.MIRRORING or target.lease_owner != plan.broker_id:
        return _NOT_OWNER
    part = target.part
    if batch.last_offset < part.high_watermark:
        return CommitBatchResult(
            ErrorCode.none,
            base_offset=batch.base_offset,
            log_start_offset=part.log_start_offset,
            is_duplicate=True,
        )
    if batch.base_offset < part.high_watermark:
        return _OVERLAP
    part.high_watermark = batch.last_offset + 1
    if batch.max_timestamp > part.max_timestamp:
        part.max_timestamp = batch.max_timestamp
    target.touched = True
    target.added_bytes += batch.byte_size
    target.source_epoch = batch.leader_epoch
    plan.live_bytes += batch.byte_size
    plan.rows.append(
        (
            part.topic_id,
            part.partition,
            batch.base_offset,
            batch.last_offset,
            batch.byte_offset,
            batch.byte_size,
            batch.base_timestamp,
            batch.max_timestamp,
            # The bytes keep their own timestamp type; as rows they are CreateTime, so
            # fetch never re-stamps them and time lookups use the source's timestamps.
            int(TimestampType.CREATE_TIME),
            NO_TIMESTAMP,
            part.max_timestamp,
            batch.producer_id,
            batch.producer_epoch,
            batch.base_sequence,
            int(batch.is_transactional),
            batch.control_type,
            plan.file_id,
        )
    )
    _track_transaction(plan, target, batch)
    return CommitBatchResult(ErrorCode.none, batch.base_offset, NO_TIMESTAMP, part.log_start_offset)


def _track_transaction(plan: MirrorPlan, target: MirrorTarget, batch: MirrorBatch) -> None:
    if not batch.is_transactional or batch.producer_id < 0:
        return
    pid = batch.producer_id
    if batch.control_type < 0:
        target.open_txns.setdefault(pid, batch.base_offset)
        return
    first = target.open_txns.pop(pid, None)
    if batch.control_type == CONTROL_ABORT and first is not None:
        part = target.part
        plan.aborted.append((part.topic_id, part.partition, batch.base_offset, pid, first))


def truncation_point(high_watermark: int, open_firsts: list[int], log_start: int) -> int:
    """Where failover cuts a partition: its last stable offset (the first offset of its
    oldest open transaction, else the log end), never below the log start."""
    if not open_firsts:
        return high_watermark
    return max(min(min(open_firsts), high_watermark), log_start)


_READ_ONLY = CommitBatchResult(READ_ONLY_ERROR)


def refuse_read_only(
    batches: Sequence[CommitBatch],
    results: list[CommitBatchResult],
    read_only: set[tuple[UUID, int]],
) -> list[CommitBatchResult]:
    """commit_file's answers with READ_ONLY_ERROR for the batches of mirror topics (whose
    partitions the plan never saw, so nothing of them was written)."""
    if not read_only:
        return results
    return [
        _READ_ONLY if (b.topic_id, b.partition) in read_only else r
        for b, r in zip(batches, results, strict=True)
    ]
