"""The batch coordinator contract.

Kept whole past 600 lines: it is the one abstract interface every engine (SQLite,
PostgreSQL) implements and the facade forwards, documented method by method, so splitting
it would scatter the contract; the records it takes and returns live in `*_types.py` by area.

Every method takes and returns lists of frozen dataclasses; answer *i* belongs to request *i*.
Errors are Kafka error codes (`lakelog.util.errors.ErrorCode`) carried in the results, never
raised, so that one bad partition never fails a whole request. Exceptions mean the database
itself failed; callers treat them as retriable.

Offsets: `high_watermark` is the next offset to be assigned; `log_start_offset` the first
offset still readable. As in Kafka, the log start offset may fall inside a batch (after
DeleteRecords); that batch stays until the log start passes its last offset, and fetch
serves it whole (clients skip the records below their position).
"""

from __future__ import annotations

import abc
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING
from uuid import UUID

from lakelog.coordinator import group_types, log_types, topic_types
from lakelog.coordinator.share_types import SharePartitionRow, SharePartitionWrite
from lakelog.util.errors import ErrorCode

if TYPE_CHECKING:
    from lakelog.coordinator.commit_outcome import CommitOutcome
    from lakelog.coordinator.mirror_types import (
        MirrorBatch,
        MirrorDefinition,
        MirrorPartition,
        MirrorPartitionUpdate,
        MirrorResult,
    )
    from lakelog.coordinator.pipeline_types import (
        CompactionLease,
        FileBatch,
        FileInfo,
        FileReference,
        MergeCommit,
        MergeCommitResult,
        PipelineRun,
    )
    from lakelog.coordinator.registry_types import (
        RegisterOutcome,
        RegisterSchema,
        RegistryConfig,
        StoredSchema,
        SubjectVersion,
    )
    from lakelog.coordinator.scram_types import ScramCredentialInfo, StoredScramCredential
    from lakelog.coordinator.txn_types import (
        DescribeProducersResult,
        InitTxnProducerRequest,
        InitTxnProducerResult,
        TransactionInfo,
        TxnOffsetCommitRequest,
        TxnRef,
    )
    from lakelog.security.acl import AclBinding, AclFilter


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
        self, requests: Sequence[topic_types.CreateTopicRequest], validate_only: bool = False
    ) -> list[topic_types.CreateTopicResult]:
        """TOPIC_ALREADY_EXISTS for a taken name; INVALID_PARTITIONS for < 1 partitions;
        INVALID_REPLICATION_FACTOR for < 1 (callers resolve -1 to the default first)."""

    @abc.abstractmethod
    async def delete_topics(self, names: Sequence[str]) -> list[topic_types.DeleteTopicResult]:
        """UNKNOWN_TOPIC_OR_PARTITION for a missing name. The topic's batches stop counting
        as live bytes of their files; files left with none are marked for deletion. Groups'
        committed offsets for the topic are deleted too (Kafka's behaviour)."""

    @abc.abstractmethod
    async def create_partitions(
        self, requests: Sequence[topic_types.CreatePartitionsRequest], validate_only: bool = False
    ) -> list[topic_types.TopicResult]:
        """INVALID_PARTITIONS unless new_total exceeds the current count."""

    @abc.abstractmethod
    async def get_topics(self, names: Sequence[str] | None = None) -> list[topic_types.TopicInfo]:
        """The named topics that exist (missing names are left out), or all with None."""

    @abc.abstractmethod
    async def get_topics_by_id(self, topic_ids: Sequence[UUID]) -> list[topic_types.TopicInfo]: ...

    @abc.abstractmethod
    async def alter_topic_configs(
        self, requests: Sequence[topic_types.AlterTopicConfigsRequest], validate_only: bool = False
    ) -> list[topic_types.TopicResult]: ...

    # -- produce
    @abc.abstractmethod
    async def commit_file(
        self,
        object_key: str,
        uploader_broker_id: int,
        broker_epoch: int,
        file_size: int,
        batches: Sequence[log_types.CommitBatch],
        inline: bytes | None = None,
    ) -> list[log_types.CommitBatchResult]:
        """Assign offsets to the batches of one uploaded object, in list order, in one
        database transaction, with the idempotent-producer checks. With `inline`, the
        object was not uploaded: its bytes are stored in the coordinator in the same
        transaction (an inline file, `inline/<uuid7>`; `inline_file` reads them, and
        `delete_files` drops them with the row):

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

        Transactional batches pass the commit barrier first: the producer's transaction must
        be Ongoing with the batch's epoch and hold the partition. An older epoch than the
        transaction's: INVALID_PRODUCER_EPOCH; no ongoing transaction or the partition not
        in it: INVALID_TXN_STATE. The first batch sets the transaction's first offset in
        the partition (which bounds the last stable offset).

        Also: broker_epoch >= 0 and a newer epoch registered for the uploader: every batch
        STALE_BROKER_EPOCH. A byte range outside the object, record_count < 1 or
        byte_size < 1: CORRUPT_MESSAGE. An object key the coordinator already knows: every
        batch INVALID_REQUEST and nothing changes. A partition a mirror holds (any state but
        STOPPED): mirror_types.READ_ONLY_ERROR, as only commit_mirror writes there. A batch
        with an `owner_epoch` that is no longer the current claim on its partition and
        zone (`claim_plain_partitions`): log_types.NOT_PLAIN_OWNER, checked under the
        partition locks."""

    @abc.abstractmethod
    async def claim_plain_partitions(
        self, broker_id: int, broker_epoch: int, keys: Sequence[log_types.PlainOwnerKey]
    ) -> list[int | None]:
        """Make this broker the one that commits plain producers' batches (producer_id -1)
        for each partition and client zone: the epoch of its claim per key, the one it
        already holds or a new one (never handed out before) that takes over another
        broker's. commit_file refuses batches carrying an epoch that is no longer current,
        so two brokers that both think they lead a partition cannot commit one client's
        records out of order. None for an unknown topic or partition, and for every key
        when broker_epoch >= 0 is not the broker's registered epoch."""

    @abc.abstractmethod
    async def commit_outcome(self, object_key: str) -> CommitOutcome | None:
        """What the commit of `object_key` decided: None if the key is unknown (no commit
        happened), else its rows, which give each batch of the object its original result
        (`CommitOutcome.results`). For a commit whose answer was lost."""

    # -- fetch
    @abc.abstractmethod
    async def find_batches(
        self, requests: Sequence[log_types.FindBatchesRequest]
    ) -> list[log_types.FindBatchesResult]:
        """Batches with last_offset >= offset, in offset order. offset == high watermark:
        no batches. offset > high watermark or < log start: OFFSET_OUT_OF_RANGE."""

    @abc.abstractmethod
    async def log_info(
        self, partitions: Sequence[log_types.PartitionKey]
    ) -> list[log_types.LogInfo]: ...

    @abc.abstractmethod
    async def list_offsets(
        self, requests: Sequence[log_types.ListOffsetsRequest]
    ) -> list[log_types.ListOffsetsResult]:
        """EARLIEST: log start; LATEST: high watermark; MAX_TIMESTAMP: the last offset of the
        first batch holding the largest max timestamp (-1 if empty); T >= 0: see
        ListOffsetsResult."""

    # -- deletion and retention
    @abc.abstractmethod
    async def delete_records(
        self, requests: Sequence[log_types.DeleteRecordsRequest]
    ) -> list[log_types.DeleteRecordsResult]:
        """Set the log start offset to `offset` (-1: the high watermark), never lowering it;
        OFFSET_OUT_OF_RANGE above the high watermark or below 0 (other than -1). Batches
        whose last offset is below the new log start are dropped: they stop counting as
        live bytes of their files, and files left with none are marked for deletion."""

    @abc.abstractmethod
    async def enforce_retention(
        self, policies: Sequence[log_types.RetentionPolicy], now_ms: int
    ) -> list[log_types.RetentionResult]:
        """Drop whole leading batches: those whose max timestamp is older than
        now - retention_ms, and while the partition's bytes minus the first batch are still
        >= retention_bytes. The log start becomes the next batch's base offset (or the high
        watermark), never lower than before. Dropped batches are handled as in
        delete_records."""

    @abc.abstractmethod
    async def files_to_delete(self, marked_before_ms: int) -> list[log_types.FileToDelete]: ...

    @abc.abstractmethod
    async def delete_files(self, object_keys: Sequence[str]) -> None:
        """Forget files the cleaner removed from object storage (only files marked); an
        inline file's bytes go with its row."""

    @abc.abstractmethod
    async def inline_file(self, object_key: str) -> bytes | None:
        """The bytes of an inline file (None: unknown, or deleted)."""

    @abc.abstractmethod
    async def inline_files_data(self, object_keys: Sequence[str]) -> dict[str, bytes]:
        """The bytes of several inline files at once (unknown or deleted ones left out):
        the mover reads hundreds, and one transaction keeps it from queueing a database
        round trip per file among the commits."""

    @abc.abstractmethod
    async def inline_usage(self, broker_id: int) -> log_types.InlineUsage:
        """Inline files held in all and for one uploader (the caps' measure)."""

    @abc.abstractmethod
    async def inline_files(self, limit: int = 1000) -> list[log_types.InlineFile]:
        """Inline files still holding batches (state committed), oldest first."""

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
        self, group_id: str, offsets: Sequence[group_types.OffsetCommit], now_ms: int
    ) -> None:
        """Store (replace) the group's committed offsets, all in one transaction. Member
        and generation checks belong to the group coordinator, not here."""

    @abc.abstractmethod
    async def commit_offset_batch(
        self,
        items: Sequence[group_types.GroupOffsetCommit | TxnOffsetCommitRequest],
        now_ms: int,
    ) -> list[list[ErrorCode]]:
        """Several OffsetCommit and TxnOffsetCommit requests in one transaction, in arrival
        order: each is checked and answered as if it ran alone (an error per offset), and a
        partition committed twice keeps the later offset."""

    @abc.abstractmethod
    async def fetch_offsets(
        self, group_id: str, partitions: Sequence[tuple[str, int]] | None
    ) -> list[group_types.CommittedOffset]:
        """One answer per asked (topic, partition), offset -1 when none; with None, every
        offset the group has committed, ordered by topic and partition."""

    @abc.abstractmethod
    async def delete_offsets(
        self, group_id: str, partitions: Sequence[tuple[str, int]]
    ) -> None: ...

    @abc.abstractmethod
    async def save_group(self, group: group_types.GroupRecord) -> None:
        """Insert or replace the group's record."""

    @abc.abstractmethod
    async def load_group(self, group_id: str) -> group_types.GroupRecord | None: ...

    @abc.abstractmethod
    async def list_groups(self) -> list[group_types.GroupRecord]:
        """Every group with a record or committed offsets; a group known only by its
        offsets is reported as an Empty record with no protocol type."""

    @abc.abstractmethod
    async def delete_groups(self, group_ids: Sequence[str]) -> list[ErrorCode]:
        """Forget the groups' records (classic and consumer) and offsets.
        GROUP_ID_NOT_FOUND when the group has none of them. (Whether the group may be
        deleted, i.e. is empty, is the group coordinator's check.)"""

    @abc.abstractmethod
    async def save_consumer_group(
        self, group: group_types.ConsumerGroupRecord, expected: int
    ) -> bool:
        """Replace the consumer group's record if the stored one has revision `expected`
        (0: there is none yet); True when written. A copy of the group that someone else
        has saved since it was loaded can never overwrite their state."""

    @abc.abstractmethod
    async def load_consumer_group(
        self, group_id: str
    ) -> group_types.ConsumerGroupRecord | None: ...

    @abc.abstractmethod
    async def list_consumer_groups(self) -> list[group_types.ConsumerGroupRecord]:
        """Every consumer group record, by group id."""

    @abc.abstractmethod
    async def load_broker_configs(self) -> dict[str, dict[str, str]]:
        """Every dynamic broker config set: scope ('' for the cluster default, else the
        broker id) -> keys."""

    @abc.abstractmethod
    async def alter_broker_configs(
        self,
        scope: str,
        set_configs: Mapping[str, str],
        delete: Sequence[str],
        replace: bool = False,
    ) -> dict[str, str]:
        """Set and remove dynamic keys of one scope atomically; returns its keys."""

    @abc.abstractmethod
    async def load_group_configs(self, group_ids: Sequence[str]) -> dict[str, dict[str, str]]:
        """The config keys each group overrides (groups without overrides are absent)."""

    @abc.abstractmethod
    async def alter_group_configs(
        self, group_id: str, set_configs: Mapping[str, str], delete: Sequence[str]
    ) -> dict[str, str]:
        """Set and remove override keys of one group atomically; returns its overrides.
        Values are stored as given: validation is the caller's (`groups.group_configs`)."""

    # -- share groups (KIP-932)
    @abc.abstractmethod
    async def save_share_group(self, group_id: str, now_ms: int) -> None:
        """Record that a share group exists (kept if already recorded)."""

    @abc.abstractmethod
    async def list_share_groups(self) -> list[str]:
        """Every recorded share group id, sorted."""

    @abc.abstractmethod
    async def load_share_partitions(
        self, group_id: str, keys: Sequence[tuple[str, int]]
    ) -> list[SharePartitionRow | None]:
        """Stored states of (topic id text, partition) keys, None where none; every state
        of the group when `keys` is empty."""

    @abc.abstractmethod
    async def store_share_partitions(self, writes: Sequence[SharePartitionWrite]) -> list[bool]:
        """Compare-and-set each state on its epoch (0: insert if absent); True per write
        applied. One transaction for all."""

    @abc.abstractmethod
    async def modify_share_partitions(
        self,
        group_id: str,
        keys: Sequence[tuple[str, int]],
        change: Callable[[SharePartitionRow], tuple[int, str] | None],
    ) -> list[SharePartitionRow | None]:
        """Replace stored states with `change(row)` (None keeps a row) under row locks, in
        one transaction: never refused, waits for a concurrent writer instead. Returns the
        rows as now stored, None where none is stored. `change` must not block and may run
        more than once per row (a retried transaction)."""

    @abc.abstractmethod
    async def delete_share_partitions(self, group_id: str, keys: Sequence[tuple[str, int]]) -> int:
        """Forget share-partition states (all of the group's when `keys` is empty)."""

    @abc.abstractmethod
    async def expire_offsets(self, committed_before_ms: int) -> int:
        """Delete offsets committed before the given time by groups that are Empty (or have
        no record, classic or consumer); Kafka's offsets.retention.minutes. Returns how
        many were deleted."""

    # -- __consumer_offsets (records written by the group operations above)
    @abc.abstractmethod
    async def read_offsets_topic(
        self, partitions: Sequence[tuple[int, int, int]]
    ) -> list[group_types.OffsetsTopicRead]:
        """For each (partition, fetch offset, max bytes) of `__consumer_offsets`: its high
        watermark and records from the fetch offset on (at least one, if any)."""

    @abc.abstractmethod
    async def offsets_topic_offset(self, partition: int, timestamp: int) -> tuple[int, int]:
        """ListOffsets on a `__consumer_offsets` partition: (offset, timestamp); -1, -2
        and -3 as in Kafka (latest, earliest, max timestamp)."""

    @abc.abstractmethod
    async def compact_offsets_topic(self, tombstones_before_ms: int) -> int:
        """One bounded compaction pass of `__consumer_offsets`: superseded records behind
        the tail, and tombstones older than the given time. Returns the rows deleted."""

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
    async def list_brokers(self, alive_since_ms: int) -> list[topic_types.BrokerInfo]:
        """Brokers whose last heartbeat is at or after the given time, by id. Fenced
        brokers have a negative heartbeat (see `fence_broker`): a negative bound lists them
        too."""

    @abc.abstractmethod
    async def fence_broker(
        self, broker_id: int, broker_epoch: int, silent_since_ms: int, *, left: bool = False
    ) -> bool:
        """Declare a silent broker dead: if `broker_epoch` is still its current epoch and its
        last heartbeat is older than `silent_since_ms`, replace the epoch with a new one
        nobody holds, so its later commits (STALE_BROKER_EPOCH for every batch) and
        heartbeats (STALE_BROKER_EPOCH) are refused: the zombie-broker fencing of KIP-1164.
        Its heartbeat becomes minus the wall time of the fence (-1 when `left`: a broker
        retiring its own epoch on a controlled shutdown), so it is left out of every
        `list_brokers(t >= 0)` answer until it registers again. True if this call fenced it."""

    # -- transactions (see txn_types for the commit barrier)
    @abc.abstractmethod
    async def init_transactional_producer(
        self, request: InitTxnProducerRequest, now_ms: int
    ) -> InitTxnProducerResult:
        """InitProducerId with a transactional id. New id: a new producer id, epoch 0.
        Known id: an ongoing transaction is aborted first (markers, aborted ranges, staged
        offsets dropped), then the epoch is bumped (a new producer id, epoch 0, once the
        epoch would pass MAX_PRODUCER_EPOCH); state Empty. With a KIP-360 producer id and
        epoch that are not the current ones (nor the current id with the epoch just below,
        a retry): PRODUCER_FENCED."""

    @abc.abstractmethod
    async def add_partitions_to_txn(
        self,
        txn: TxnRef,
        partitions: Sequence[log_types.PartitionKey],
        now_ms: int,
        verify_only: bool,
    ) -> list[ErrorCode]:
        """One error per partition. Unknown transactional id or another producer id:
        INVALID_PRODUCER_ID_MAPPING for all; older epoch: PRODUCER_FENCED for all; an
        unknown partition: UNKNOWN_TOPIC_OR_PARTITION for it and OPERATION_NOT_ATTEMPTED for
        the others. Otherwise the transaction becomes (or stays) Ongoing, its start time set
        when it begins. verify_only: change nothing, INVALID_TXN_STATE for partitions not
        in the ongoing transaction."""

    @abc.abstractmethod
    async def add_offsets_to_txn(self, txn: TxnRef, group_id: str, now_ms: int) -> ErrorCode:
        """Register the group in the transaction (same checks as add_partitions_to_txn)."""

    @abc.abstractmethod
    async def txn_offset_commit(
        self, request: TxnOffsetCommitRequest, now_ms: int
    ) -> list[ErrorCode]:
        """Stage offsets; they replace the group's committed offsets only when the
        transaction commits. Same producer checks; a group not added to the ongoing
        transaction: INVALID_TXN_STATE."""

    @abc.abstractmethod
    async def end_txn(self, txn: TxnRef, commit: bool, now_ms: int) -> ErrorCode:
        """Commit or abort in one database transaction: a marker row in every registered
        partition, aborted ranges recorded, staged offsets applied (commit) or dropped.
        A retry of the end that already happened (same epoch, same outcome): NONE. Empty
        or a finished transaction asked the other outcome: INVALID_TXN_STATE. Producer
        checks as in add_partitions_to_txn."""

    @abc.abstractmethod
    async def abort_expired_transactions(self, now_ms: int) -> list[str]:
        """Abort every Ongoing transaction started more than its timeout ago and bump its
        epoch (markers carry the new epoch), fencing the producer that abandoned it.
        Returns the transactional ids aborted."""

    @abc.abstractmethod
    async def describe_transactions(
        self, transactional_ids: Sequence[str]
    ) -> list[TransactionInfo | None]:
        """None for an unknown id."""

    @abc.abstractmethod
    async def list_transactions(self) -> list[TransactionInfo]:
        """Every transactional id (callers filter), without partitions and groups."""

    @abc.abstractmethod
    async def describe_producers(
        self, partitions: Sequence[log_types.PartitionKey]
    ) -> list[DescribeProducersResult]: ...

    @abc.abstractmethod
    async def pending_txn_offsets(self, group_id: str) -> set[tuple[str, int]]:
        """(topic, partition) pairs with offsets staged by an ongoing transaction: OffsetFetch
        with require_stable answers UNSTABLE_OFFSET_COMMIT for them."""

    # -- pipeline (see pipeline_types: gc, merge and compaction)
    @abc.abstractmethod
    async def list_file_infos(
        self, key_prefix: str = "", after_key: str = "", limit: int = 1000
    ) -> list[FileInfo]:
        """Files whose key starts with `key_prefix` and sorts after `after_key`, in key
        order, at most `limit` (a page; pass the last key to get the next one)."""

    @abc.abstractmethod
    async def file_batches(self, object_keys: Sequence[str]) -> list[FileBatch]:
        """The data batches that live in the given objects, by (topic id, partition, base
        offset). Unknown keys contribute nothing."""

    @abc.abstractmethod
    async def file_references(self, object_keys: Sequence[str]) -> list[FileReference]:
        """One answer per key: is it known, in which state, how many batches point into it."""

    @abc.abstractmethod
    async def commit_merge(
        self, commits: Sequence[MergeCommit], all_or_nothing: bool = False
    ) -> list[MergeCommitResult]:
        """Swap batches to rewritten objects, all commits in one database transaction.

        For each commit: a new object key the coordinator already knows: INVALID_REQUEST;
        a kept row placed outside the new object, a move with no sources, sources that are
        not adjacent (each base offset the previous last offset + 1) or new offsets outside
        their span: CORRUPT_MESSAGE; nothing of that commit changes. Otherwise a move
        applies only if each of its source rows (partition, base and last offset) still
        lives in its object at its byte offset; others are skipped. `all_or_nothing`
        (compaction: a partial swap could drop a tombstone while an older value of its key
        survives): one skipped move or failed commit skips every move of every commit of
        the call.
        An applied move replaces its source rows with one row in the new object (its
        offsets the sources' span or the new ones; the first source's timestamps and
        producer fields, the largest max timestamp) or, for a drop, deletes them; the
        partition's byte size follows the new sizes. Old files lose the moved rows' bytes
        and are marked for deletion when left with none. The new object is recorded
        (uploader -1) with the applied moves' bytes live; with none applied it is recorded
        already marked for deletion, so the cleaner removes it."""

    # -- change notification
    @abc.abstractmethod
    async def change_token(self) -> int:
        """A number that changes whenever any process commits; polled to wake fetches
        waiting on another process's produce. Any write transaction counts (not only
        commit_file), and a call made after a commit returned, in any process sharing the
        database, already sees the change."""

    @abc.abstractmethod
    async def claim_compaction(
        self, topic_id: UUID, partition: int, broker_id: int, now_ms: int, ttl_ms: int
    ) -> CompactionLease | None:
        """Take or renew the lease that lets one broker at a time compact the partition
        (free, expired, or already this broker's); while held, answers the partition's
        state (cleaned offset 0 until a pass recorded one). None: another broker holds a live
        lease, or the topic is unknown."""

    @abc.abstractmethod
    async def release_compaction(
        self, topic_id: UUID, partition: int, broker_id: int, state: CompactionLease
    ) -> bool:
        """End `broker_id`'s lease and record its pass's state (the cleaned offset is never
        lowered). False, changing nothing, when the broker no longer holds the lease."""

    # -- mirroring (KIP-1279; see mirror_types for the design)
    @abc.abstractmethod
    async def create_mirror(self, definition: MirrorDefinition, now_ms: int) -> MirrorResult:
        """INVALID_REQUEST if a mirror of that name exists."""

    @abc.abstractmethod
    async def delete_mirror(self, name: str) -> MirrorResult:
        """RESOURCE_NOT_FOUND for an unknown name; INVALID_REQUEST while one of its
        partitions is not STOPPED (remove its topics first). STOPPED rows stay: they record
        the failover offsets a failback checks."""

    @abc.abstractmethod
    async def list_mirrors(self, names: Sequence[str] | None = None) -> list[MirrorDefinition]:
        """The named mirrors that exist (all with None), by name."""

    @abc.abstractmethod
    async def alter_mirror(
        self,
        name: str,
        add_topics: Sequence[str] = (),
        add_patterns: Sequence[str] = (),
        remove_topics: Sequence[str] = (),
    ) -> MirrorResult:
        """Change the topic names and patterns the mirror follows (RESOURCE_NOT_FOUND for
        an unknown mirror)."""

    @abc.abstractmethod
    async def add_mirror_partitions(
        self, name: str, partitions: Sequence[log_types.PartitionKey], restart: bool, now_ms: int
    ) -> list[MirrorResult]:
        """A PREPARING row for each partition that has none; with `restart`, FAILED and
        STOPPED rows become PREPARING too (retry, failback). An active row of this mirror
        is left alone (NONE); one of another mirror: INVALID_REQUEST; an unknown
        partition: UNKNOWN_TOPIC_OR_PARTITION; an unknown mirror: RESOURCE_NOT_FOUND."""

    @abc.abstractmethod
    async def mirror_partitions(
        self, mirror: str | None = None, topic_ids: Sequence[UUID] | None = None
    ) -> list[MirrorPartition]:
        """Mirrored partitions (of one mirror, of some topics, or all), by topic name and
        partition, with their local log bounds."""

    @abc.abstractmethod
    async def acquire_mirror_leases(
        self, broker_id: int, broker_epoch: int, live_brokers: int, now_ms: int, ttl_ms: int
    ) -> list[MirrorPartition]:
        """Renew this broker's leases on active (PREPARING, MIRRORING) partitions, take
        free or expired ones up to a fair share (ceil(active / live_brokers)) and release
        those above it; return the partitions it holds. A stale broker epoch holds none."""

    @abc.abstractmethod
    async def update_mirror_partitions(
        self, updates: Sequence[MirrorPartitionUpdate], now_ms: int
    ) -> list[ErrorCode]:
        """Apply lease owners' reports; NOT_LEADER_OR_FOLLOWER where the broker does not
        hold the lease, UNKNOWN_TOPIC_OR_PARTITION where no mirror row exists. A
        `start_offset` applies only to an empty partition (else INVALID_REQUEST)."""

    @abc.abstractmethod
    async def commit_mirror(
        self,
        object_key: str,
        broker_id: int,
        broker_epoch: int,
        file_size: int,
        batches: Sequence[MirrorBatch],
    ) -> list[log_types.CommitBatchResult]:
        """Record mirrored batches at their explicit offsets (see mirror_rules): only for
        MIRRORING partitions leased to `broker_id` (else NOT_LEADER_OR_FOLLOWER); a batch
        below the log end is a duplicate; one straddling it INVALID_RECORD; the fencing and
        object-key rules of commit_file apply. Rebuilds the partition's transaction index
        (open ranges, aborted ranges) from the batches."""

    @abc.abstractmethod
    async def stop_mirror_topics(
        self, name: str, topics: Sequence[str], now_ms: int
    ) -> list[MirrorResult]:
        """Failover, first step, per topic: its partitions of this mirror become STOPPING
        (no lease, commits refused) and the name leaves the mirror's topic list.
        UNKNOWN_TOPIC_OR_PARTITION for a topic the mirror does not hold."""

    @abc.abstractmethod
    async def finish_mirror_failover(self, now_ms: int) -> list[MirrorPartition]:
        """Failover, second step, for every STOPPING partition: truncate to its last stable
        offset, drop its open mirrored transactions, lower group offsets above the new end,
        record the offset, and mark it STOPPED (writable). Returns what it stopped."""

    @abc.abstractmethod
    async def mirror_topic_ids(self) -> list[UUID]:
        """Topics that are read-only because a mirror holds them (a partition row in any
        state but STOPPED): a cheap set for the produce path's early refusal."""

    @abc.abstractmethod
    async def claim_mirror_task(self, name: str, broker_id: int, now_ms: int, ttl_ms: int) -> bool:
        """A lease on the mirror's singleton work (metadata refresh, group offset sync):
        True while `broker_id` holds it (renewed) or took it (free or expired)."""

    # -- SCRAM credentials (KIP-554)
    @abc.abstractmethod
    async def alter_scram_credentials(
        self,
        deletions: Sequence[tuple[str, str]],
        upsertions: Sequence[StoredScramCredential],
    ) -> list[tuple[str, str]]:
        """Delete the (user, mechanism) credentials and upsert the others, in one
        transaction; returns the deletions that found no credential."""

    @abc.abstractmethod
    async def describe_scram_credentials(
        self, users: Sequence[str] | None = None
    ) -> list[ScramCredentialInfo]:
        """Mechanism and iterations of the credentials of `users` (None: every user)."""

    @abc.abstractmethod
    async def scram_credential(self, user: str, mechanism: str) -> StoredScramCredential | None:
        """One user's credential for a mechanism, for a SCRAM login."""

    # -- ACLs

    @abc.abstractmethod
    async def acl_version(self) -> int:
        """A counter that moves with every ACL change: brokers poll it (one row) and reload
        the ACLs only when it moved."""

    @abc.abstractmethod
    async def load_acls(self, limit: int) -> tuple[int, list[AclBinding]]:
        """(version, at most `limit` stored ACLs), read together."""

    @abc.abstractmethod
    async def create_acls(self, bindings: Sequence[AclBinding], limit: int) -> list[bool]:
        """Store the ACLs (one already stored is a success); False for each refused because
        the set would hold more than `limit`."""

    @abc.abstractmethod
    async def delete_acls(self, filters: Sequence[AclFilter], limit: int) -> list[list[AclBinding]]:
        """Delete every stored ACL (of the first `limit`) some filter matches; answer i is
        what filter i matched."""

    # -- pipeline job runs
    @abc.abstractmethod
    async def record_pipeline_run(self, run: PipelineRun) -> None:
        """Keep a finished run (only the newest 1000 are kept)."""

    @abc.abstractmethod
    async def pipeline_runs(self, limit: int) -> list[PipelineRun]:
        """The newest runs, newest first."""

    # -- schema registry (see registry_types)
    @abc.abstractmethod
    async def registry_subjects(self, deleted: bool) -> list[str]:
        """Subjects with a live version (`deleted`: with any version), sorted."""

    @abc.abstractmethod
    async def registry_subject_versions(self, subject: str) -> list[SubjectVersion]:
        """Every version of the subject, live and soft-deleted, oldest first."""

    @abc.abstractmethod
    async def registry_schemas(self, ids: Sequence[int]) -> list[StoredSchema]:
        """The stored schemas of those ids that exist."""

    @abc.abstractmethod
    async def registry_schema_usages(self, schema_id: int) -> list[SubjectVersion]:
        """Every subject version (live and soft-deleted) naming the schema."""

    @abc.abstractmethod
    async def registry_find_schema(self, fingerprint: str) -> int | None:
        """The id of the schema with this fingerprint, if one was ever registered."""

    @abc.abstractmethod
    async def registry_referenced_by(self, subject: str, version: int) -> list[int]:
        """Ids of live schemas that refer to the subject's version."""

    @abc.abstractmethod
    async def registry_register(self, request: RegisterSchema) -> RegisterOutcome:
        """Add a version to a subject (see `RegisterSchema`)."""

    @abc.abstractmethod
    async def registry_delete_versions(
        self, subject: str, versions: Sequence[int], permanent: bool
    ) -> None:
        """Soft-delete (`permanent`: remove) the subject's versions."""

    @abc.abstractmethod
    async def registry_configs(self, subject: str) -> tuple[RegistryConfig, RegistryConfig]:
        """(the global settings, the subject's own; '' names none)."""

    @abc.abstractmethod
    async def registry_set_config(self, subject: str, field: str, value: str | None) -> None:
        """Set (None: unset) a subject's ('' global) "compatibility", "mode" or "normalize"."""
