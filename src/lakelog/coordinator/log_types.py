"""The partition log as the batch coordinator stores it: the records its produce, fetch,
offset, deletion and retention methods take and return (see `coordinator.interface`), and
the wire's special offsets and timestamps."""

from __future__ import annotations

import enum
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, NamedTuple
from uuid import UUID

from lakelog.util.errors import ErrorCode

if TYPE_CHECKING:
    from lakelog.coordinator.txn_types import AbortedTxn

NO_PRODUCER_ID = -1
NO_SEQUENCE = -1
NO_TIMESTAMP = -1

# ListOffsets special timestamps, as on the wire.
LATEST_TIMESTAMP = -1
EARLIEST_TIMESTAMP = -2
MAX_TIMESTAMP = -3


class TimestampType(enum.IntEnum):
    CREATE_TIME = 0
    LOG_APPEND_TIME = 1


# ---------------------------------------------------------------- produce


@dataclass(frozen=True, slots=True)
class CommitBatch:
    """One record batch inside an uploaded object, as the broker read its header."""

    topic_id: UUID
    partition: int
    byte_offset: int
    byte_size: int
    record_count: int
    """lastOffsetDelta + 1."""
    base_timestamp: int
    max_timestamp: int
    timestamp_type: TimestampType
    """The topic's message.timestamp.type at produce time."""
    producer_id: int = NO_PRODUCER_ID
    producer_epoch: int = -1
    base_sequence: int = NO_SEQUENCE
    is_transactional: bool = False
    owner_zone: str | None = None
    owner_epoch: int | None = None
    """A plain producer's batch: the claim (`claim_plain_partitions`) it was accepted under,
    for the partition and the client's zone. The commit refuses it with NOT_PLAIN_OWNER
    once another broker has claimed them since. None: no check."""

    @property
    def last_sequence(self) -> int:
        if self.base_sequence == NO_SEQUENCE:
            return NO_SEQUENCE
        return (self.base_sequence + self.record_count - 1) % (2**31)


NOT_PLAIN_OWNER = ErrorCode.not_leader_or_follower
"""commit_file's answer for a plain producer's batch whose claim another broker has taken
over. Never sent as such: a client re-queues NOT_LEADER_OR_FOLLOWER without counting a
retry, behind what it sent the new owner, so the broker answers KAFKA_STORAGE_ERROR."""


class PlainOwnerKey(NamedTuple):
    """What a plain-write claim covers: a partition for the clients of one zone (None: the
    clients that name none), as the brokers serving that zone share it out."""

    topic_id: UUID
    partition: int
    zone: str | None


class CommitBatchResult(NamedTuple):
    """A named tuple, not a frozen dataclass: commit_file makes one per batch (1,600 in a
    full object) and a tuple is made in half the time."""

    error: ErrorCode
    base_offset: int = -1
    log_append_time: int = NO_TIMESTAMP
    """The commit time in ms for LOG_APPEND_TIME topics, else -1."""
    log_start_offset: int = -1
    is_duplicate: bool = False
    """The batch was a retry of one already committed; base_offset is the original."""


# ---------------------------------------------------------------- fetch


@dataclass(frozen=True, slots=True)
class PartitionKey:
    topic_id: UUID
    partition: int


@dataclass(frozen=True, slots=True)
class FindBatchesRequest:
    topic_id: UUID
    partition: int
    offset: int
    max_bytes: int
    """Stop adding batches once their sizes reach this; the first batch always comes."""
    read_committed: bool = False
    """Stop at the last stable offset and report the aborted transactions of the range."""


@dataclass(frozen=True, slots=True)
class BatchCoordinate:
    """Where one committed row of batches lives and what the broker must patch when
    serving it. A row holds one batch or a run of batches of the partition back to back
    (a producer's batches that one commit appended, or plain batches a merge joined), with
    the run's offsets, bytes and largest timestamp and its first batch's producer fields:
    readers split it with `protocol.batch_runs`."""

    object_key: str
    byte_offset: int
    byte_size: int
    base_offset: int
    last_offset: int
    base_timestamp: int
    max_timestamp: int
    timestamp_type: TimestampType
    log_append_time: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    is_transactional: bool
    control_type: int = -1
    """-1 for data; 0 (abort) or 1 (commit) for a transaction marker, which has no object
    (object_key "", byte_size 0): the broker synthesizes the control batch."""


@dataclass(frozen=True, slots=True)
class FindBatchesResult:
    error: ErrorCode
    batches: Sequence[BatchCoordinate] = ()
    log_start_offset: int = -1
    high_watermark: int = -1
    last_stable_offset: int = -1
    """The smallest first offset of the partition's ongoing transactions, else the high
    watermark. Always set when error is NONE or OFFSET_OUT_OF_RANGE."""
    aborted: Sequence[AbortedTxn] = ()
    """read_committed only: aborted transactions whose range meets the returned batches
    (first offset <= last returned offset and marker offset >= requested offset)."""


@dataclass(frozen=True, slots=True)
class LogInfo:
    error: ErrorCode
    log_start_offset: int = -1
    high_watermark: int = -1
    byte_size: int = 0
    last_stable_offset: int = -1


# ---------------------------------------------------------------- offsets, deletion


@dataclass(frozen=True, slots=True)
class ListOffsetsRequest:
    topic_id: UUID
    partition: int
    timestamp: int
    """A time in ms, or LATEST_TIMESTAMP / EARLIEST_TIMESTAMP / MAX_TIMESTAMP."""
    read_committed: bool = False
    """LATEST answers the last stable offset instead of the high watermark."""


@dataclass(frozen=True, slots=True)
class ListOffsetsResult:
    """For a time T >= 0, `batch` is the first batch whose max timestamp is >= T and `offset`
    its base offset; the caller may read the batch to narrow the answer to a record. No such
    batch: offset -1 and timestamp -1 (Kafka's answer).

    Precisely: `offset` is max(base offset, log start) and `timestamp` the batch's max
    timestamp, an upper bound for the record found; on LogAppendTime batches the commit
    time stands for the max timestamp (here, for MAX_TIMESTAMP and for retention).
    `batch` is set for T >= 0 and for MAX_TIMESTAMP (the caller may narrow that to the
    record holding the largest timestamp), never for EARLIEST/LATEST."""

    error: ErrorCode
    offset: int = -1
    timestamp: int = NO_TIMESTAMP
    batch: BatchCoordinate | None = None


@dataclass(frozen=True, slots=True)
class DeleteRecordsRequest:
    topic_id: UUID
    partition: int
    offset: int
    """Delete everything below this offset; -1 means the high watermark."""


@dataclass(frozen=True, slots=True)
class DeleteRecordsResult:
    error: ErrorCode
    low_watermark: int = -1


@dataclass(frozen=True, slots=True)
class RetentionPolicy:
    topic_id: UUID
    partition: int
    retention_ms: int
    """-1: unlimited."""
    retention_bytes: int
    """-1: unlimited."""


@dataclass(frozen=True, slots=True)
class RetentionResult:
    error: ErrorCode
    log_start_offset: int = -1
    batches_deleted: int = 0
    """Rows deleted (a row holds one batch or a run of them: see BatchCoordinate)."""
    bytes_deleted: int = 0


@dataclass(frozen=True, slots=True)
class FileToDelete:
    object_key: str
    marked_at: int
    """ms since the epoch when the file lost its last live batch."""
    size: int


@dataclass(frozen=True, slots=True)
class InlineUsage:
    """Inline files the coordinator holds (issue 32): their count and bytes, in all and
    uploaded by one broker; the broker falls back to objects past its caps."""

    files: int
    total_bytes: int
    broker_bytes: int


@dataclass(frozen=True, slots=True)
class InlineFile:
    """An inline file that still holds batches: what the mover chooses by."""

    object_key: str
    size: int
    committed_at: int
    """ms since the epoch."""
    uploader_broker_id: int
