"""The batch coordinator contract.

Every method takes and returns lists of frozen dataclasses; answer *i* belongs to request *i*.
Errors are Kafka error codes (`lakelog.errors.ErrorCode`) carried in the results, never
raised, so that one bad partition never fails a whole request. Exceptions mean the database
itself failed; callers treat them as retriable.

Offsets: `high_watermark` is the next offset to be assigned; `log_start_offset` the first
offset still readable. As in Kafka, the log start offset may fall inside a batch (after
DeleteRecords); that batch stays until the log start passes its last offset, and fetch
serves it whole (clients skip the records below their position).
"""

from __future__ import annotations

import abc
import enum
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from uuid import UUID

from lakelog.errors import ErrorCode

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


# ---------------------------------------------------------------- topics


@dataclass(frozen=True, slots=True)
class TopicInfo:
    topic_id: UUID
    name: str
    num_partitions: int
    replication_factor: int
    configs: Mapping[str, str]
    """Only the configs set on the topic (not broker defaults)."""


@dataclass(frozen=True, slots=True)
class CreateTopicRequest:
    name: str
    num_partitions: int
    replication_factor: int
    configs: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class CreateTopicResult:
    name: str
    error: ErrorCode
    topic_id: UUID | None = None
    message: str | None = None


@dataclass(frozen=True, slots=True)
class DeleteTopicResult:
    name: str
    error: ErrorCode
    topic_id: UUID | None = None


@dataclass(frozen=True, slots=True)
class CreatePartitionsRequest:
    name: str
    new_total: int


@dataclass(frozen=True, slots=True)
class TopicResult:
    """The outcome of a per-topic admin change."""

    name: str
    error: ErrorCode
    message: str | None = None


@dataclass(frozen=True, slots=True)
class AlterTopicConfigsRequest:
    name: str
    set_configs: Mapping[str, str] = field(default_factory=dict)
    delete_configs: Sequence[str] = ()
    replace: bool = False
    """True: the topic's configs become exactly `set_configs` (legacy AlterConfigs)."""


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

    @property
    def last_sequence(self) -> int:
        if self.base_sequence == NO_SEQUENCE:
            return NO_SEQUENCE
        return (self.base_sequence + self.record_count - 1) % (2**31)


@dataclass(frozen=True, slots=True)
class CommitBatchResult:
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


@dataclass(frozen=True, slots=True)
class BatchCoordinate:
    """Where one committed batch lives and what the broker must patch when serving it."""

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


@dataclass(frozen=True, slots=True)
class FindBatchesResult:
    error: ErrorCode
    batches: Sequence[BatchCoordinate] = ()
    log_start_offset: int = -1
    high_watermark: int = -1


@dataclass(frozen=True, slots=True)
class LogInfo:
    error: ErrorCode
    log_start_offset: int = -1
    high_watermark: int = -1
    byte_size: int = 0


# ---------------------------------------------------------------- offsets, deletion


@dataclass(frozen=True, slots=True)
class ListOffsetsRequest:
    topic_id: UUID
    partition: int
    timestamp: int
    """A time in ms, or LATEST_TIMESTAMP / EARLIEST_TIMESTAMP / MAX_TIMESTAMP."""


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
    bytes_deleted: int = 0


@dataclass(frozen=True, slots=True)
class FileToDelete:
    object_key: str
    marked_at: int
    """ms since the epoch when the file lost its last live batch."""
    size: int


# ---------------------------------------------------------------- consumer groups


@dataclass(frozen=True, slots=True)
class OffsetCommit:
    topic: str
    partition: int
    offset: int
    leader_epoch: int = -1
    metadata: str | None = None


@dataclass(frozen=True, slots=True)
class CommittedOffset:
    topic: str
    partition: int
    offset: int
    """-1 when the group has no committed offset for the partition."""
    leader_epoch: int = -1
    metadata: str | None = None
    commit_time: int = -1


@dataclass(frozen=True, slots=True)
class GroupMemberRecord:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    protocols: Sequence[tuple[str, bytes]]
    """(protocol name, member metadata) in the member's order of preference."""
    assignment: bytes = b""


@dataclass(frozen=True, slots=True)
class GroupRecord:
    """A classic group's durable state, saved on every generation change, so a restarted
    or replacing broker resumes the generation instead of forgetting it."""

    group_id: str
    state: str
    """Empty, PreparingRebalance, CompletingRebalance, Stable or Dead (Kafka's names)."""
    protocol_type: str | None = None
    protocol: str | None = None
    generation: int = 0
    leader: str | None = None
    members: Sequence[GroupMemberRecord] = ()
    updated_at: int = 0


# ---------------------------------------------------------------- brokers, producers


@dataclass(frozen=True, slots=True)
class BrokerInfo:
    broker_id: int
    broker_epoch: int
    rack: str | None
    host: str
    port: int
    last_heartbeat: int


class BatchCoordinator(abc.ABC):
    """Assigns offsets and remembers where every batch lives. The only durable state."""

    # -- lifecycle
    @abc.abstractmethod
    async def start(self) -> None:
        """Open connections and apply schema migrations."""

    @abc.abstractmethod
    async def close(self) -> None: ...

    # -- topics
    @abc.abstractmethod
    async def create_topics(
        self, requests: Sequence[CreateTopicRequest], validate_only: bool = False
    ) -> list[CreateTopicResult]:
        """TOPIC_ALREADY_EXISTS for a taken name; INVALID_PARTITIONS for < 1 partitions;
        INVALID_REPLICATION_FACTOR for < 1 (callers resolve -1 to the default first)."""

    @abc.abstractmethod
    async def delete_topics(self, names: Sequence[str]) -> list[DeleteTopicResult]:
        """UNKNOWN_TOPIC_OR_PARTITION for a missing name. The topic's batches stop counting
        as live bytes of their files; files left with none are marked for deletion. Groups'
        committed offsets for the topic are deleted too (Kafka's behaviour)."""

    @abc.abstractmethod
    async def create_partitions(
        self, requests: Sequence[CreatePartitionsRequest], validate_only: bool = False
    ) -> list[TopicResult]:
        """INVALID_PARTITIONS unless new_total exceeds the current count."""

    @abc.abstractmethod
    async def get_topics(self, names: Sequence[str] | None = None) -> list[TopicInfo]:
        """The named topics that exist (missing names are left out), or all with None."""

    @abc.abstractmethod
    async def get_topics_by_id(self, topic_ids: Sequence[UUID]) -> list[TopicInfo]: ...

    @abc.abstractmethod
    async def alter_topic_configs(
        self, requests: Sequence[AlterTopicConfigsRequest], validate_only: bool = False
    ) -> list[TopicResult]: ...

    # -- produce
    @abc.abstractmethod
    async def commit_file(
        self,
        object_key: str,
        uploader_broker_id: int,
        broker_epoch: int,
        file_size: int,
        batches: Sequence[CommitBatch],
    ) -> list[CommitBatchResult]:
        """Assign offsets to the batches of one uploaded object, in list order, in one
        database transaction, with the idempotent-producer checks:

        - producer_id == -1: no checks;
        - epoch below the producer's current epoch: INVALID_PRODUCER_EPOCH;
        - epoch above it: the producer restarts; its state for the partition resets;
          a known producer's new epoch must start at sequence 0, else
          OUT_OF_ORDER_SEQUENCE_NUMBER (Kafka's rule);
        - a batch equal (base and last sequence) to one of the producer's last 5 batches
          on the partition: NONE, is_duplicate, the original base offset;
        - same epoch, base_sequence != last sequence + 1 (mod 2**31):
          OUT_OF_ORDER_SEQUENCE_NUMBER; a producer the partition has not seen may start at
          any sequence.
        Unknown topic or partition: UNKNOWN_TOPIC_OR_PARTITION. Rejected batches' bytes
        stay in the object as dead bytes. The file is recorded even if every batch failed
        (with zero live bytes, marked for deletion).

        Also: broker_epoch >= 0 and a newer epoch registered for the uploader: every batch
        STALE_BROKER_EPOCH. A byte range outside the object, record_count < 1 or
        byte_size < 1: CORRUPT_MESSAGE. An object key the coordinator already knows: every
        batch INVALID_REQUEST and nothing changes."""

    # -- fetch
    @abc.abstractmethod
    async def find_batches(self, requests: Sequence[FindBatchesRequest]) -> list[FindBatchesResult]:
        """Batches with last_offset >= offset, in offset order. offset == high watermark:
        no batches. offset > high watermark or < log start: OFFSET_OUT_OF_RANGE."""

    @abc.abstractmethod
    async def log_info(self, partitions: Sequence[PartitionKey]) -> list[LogInfo]: ...

    @abc.abstractmethod
    async def list_offsets(self, requests: Sequence[ListOffsetsRequest]) -> list[ListOffsetsResult]:
        """EARLIEST: log start; LATEST: high watermark; MAX_TIMESTAMP: the last offset of the
        first batch holding the largest max timestamp (-1 if empty); T >= 0: see
        ListOffsetsResult."""

    # -- deletion and retention
    @abc.abstractmethod
    async def delete_records(
        self, requests: Sequence[DeleteRecordsRequest]
    ) -> list[DeleteRecordsResult]:
        """Set the log start offset to `offset` (-1: the high watermark), never lowering it;
        OFFSET_OUT_OF_RANGE above the high watermark or below 0 (other than -1). Batches
        whose last offset is below the new log start are dropped: they stop counting as
        live bytes of their files, and files left with none are marked for deletion."""

    @abc.abstractmethod
    async def enforce_retention(
        self, policies: Sequence[RetentionPolicy], now_ms: int
    ) -> list[RetentionResult]:
        """Drop whole leading batches: those whose max timestamp is older than
        now - retention_ms, and while the partition's bytes minus the first batch are still
        >= retention_bytes. The log start becomes the next batch's base offset (or the high
        watermark), never lower than before. Dropped batches are handled as in
        delete_records."""

    @abc.abstractmethod
    async def files_to_delete(self, marked_before_ms: int) -> list[FileToDelete]: ...

    @abc.abstractmethod
    async def delete_files(self, object_keys: Sequence[str]) -> None:
        """Forget files the cleaner removed from object storage (only files marked)."""

    @abc.abstractmethod
    async def list_files(self) -> list[str]:
        """Every object key the coordinator knows, any state (for GC and tests)."""

    # -- producers
    @abc.abstractmethod
    async def allocate_producer_id(self) -> int:
        """A producer id never handed out before, >= 0."""

    # -- consumer groups
    @abc.abstractmethod
    async def commit_offsets(
        self, group_id: str, offsets: Sequence[OffsetCommit], now_ms: int
    ) -> None:
        """Store (replace) the group's committed offsets, all in one transaction. Member
        and generation checks belong to the group coordinator, not here."""

    @abc.abstractmethod
    async def fetch_offsets(
        self, group_id: str, partitions: Sequence[tuple[str, int]] | None
    ) -> list[CommittedOffset]:
        """One answer per asked (topic, partition), offset -1 when none; with None, every
        offset the group has committed, ordered by topic and partition."""

    @abc.abstractmethod
    async def delete_offsets(
        self, group_id: str, partitions: Sequence[tuple[str, int]]
    ) -> None: ...

    @abc.abstractmethod
    async def save_group(self, group: GroupRecord) -> None:
        """Insert or replace the group's record."""

    @abc.abstractmethod
    async def load_group(self, group_id: str) -> GroupRecord | None: ...

    @abc.abstractmethod
    async def list_groups(self) -> list[GroupRecord]:
        """Every group with a record or committed offsets; a group known only by its
        offsets is reported as an Empty record with no protocol type."""

    @abc.abstractmethod
    async def delete_groups(self, group_ids: Sequence[str]) -> list[ErrorCode]:
        """Forget the groups' records and offsets. GROUP_ID_NOT_FOUND when the group has
        neither. (Whether the group may be deleted, i.e. is empty, is the group
        coordinator's check.)"""

    @abc.abstractmethod
    async def expire_offsets(self, committed_before_ms: int) -> int:
        """Delete offsets committed before the given time by groups that are Empty (or have
        no record); Kafka's offsets.retention.minutes. Returns how many were deleted."""

    # -- brokers
    @abc.abstractmethod
    async def register_broker(self, broker_id: int, rack: str | None, host: str, port: int) -> int:
        """Record the broker as alive and return its new broker epoch (strictly larger than
        any earlier epoch of that broker id)."""

    @abc.abstractmethod
    async def heartbeat_broker(self, broker_id: int, broker_epoch: int) -> ErrorCode:
        """STALE_BROKER_EPOCH if the epoch is no longer current; BROKER_ID_NOT_REGISTERED
        for an id never registered."""

    @abc.abstractmethod
    async def list_brokers(self, alive_since_ms: int) -> list[BrokerInfo]:
        """Brokers whose last heartbeat is at or after the given time, by id."""

    @abc.abstractmethod
    async def fence_broker(self, broker_id: int, broker_epoch: int, silent_since_ms: int) -> bool:
        """Declare a silent broker dead: if `broker_epoch` is still its current epoch and its
        last heartbeat is older than `silent_since_ms`, replace the epoch with a new one
        nobody holds, so its later commits (STALE_BROKER_EPOCH for every batch) and
        heartbeats (STALE_BROKER_EPOCH) are refused: the zombie-broker fencing of KIP-1164.
        A fenced broker is left out of every `list_brokers` answer until it registers again.
        True if this call fenced it."""

    # -- change notification
    @abc.abstractmethod
    async def change_token(self) -> int:
        """A number that changes whenever any process commits; polled to wake fetches
        waiting on another process's produce. Any write transaction counts (not only
        commit_file), and a call made after a commit returned, in any process sharing the
        database, already sees the change."""
