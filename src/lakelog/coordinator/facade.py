"""The batch coordinator written once: every `BatchCoordinator` method is one operation
(`coordinator/ops/`) run by `_run` in one transaction of the engine underneath, and timed
under its own name (`coordinator_latency_seconds{method=...}`). An engine subclass
(`sqlite/coordinator.py`, `postgres/coordinator.py`) supplies `_run`, its lifecycle and
change notifications, and overrides a method only where the engines truly differ.

Kept whole past 600 lines: it is one line of forwarding per interface method (about 90 of
them, each a call into its op module with its timer name), so it reads as a table of
contents of `coordinator/ops/`; splitting it would scatter that table, not shorten a job."""

from __future__ import annotations

import abc
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar
from uuid import UUID

from lakelog.coordinator.commit_outcome import CommitOutcome
from lakelog.coordinator.engine import Op
from lakelog.coordinator.group_types import (
    CommittedOffset,
    ConsumerGroupRecord,
    GroupOffsetCommit,
    GroupRecord,
    OffsetCommit,
    OffsetsTopicRead,
)
from lakelog.coordinator.interface import BatchCoordinator
from lakelog.coordinator.log_types import (
    CommitBatch,
    CommitBatchResult,
    DeleteRecordsRequest,
    DeleteRecordsResult,
    FileToDelete,
    FindBatchesRequest,
    FindBatchesResult,
    InlineFile,
    InlineUsage,
    ListOffsetsRequest,
    ListOffsetsResult,
    LogInfo,
    PartitionKey,
    PlainOwnerKey,
    RetentionPolicy,
    RetentionResult,
)
from lakelog.coordinator.mirror_types import (
    MirrorBatch,
    MirrorDefinition,
    MirrorPartition,
    MirrorPartitionUpdate,
    MirrorResult,
)
from lakelog.coordinator.ops import (
    acls,
    broker_configs,
    cleanup,
    cluster,
    compaction,
    consumer_groups,
    group_configs,
    groups,
    inline,
    merge,
    mirror,
    mirror_commit,
    mirror_failover,
    mirror_partitions,
    offset_commits,
    offsets_topic,
    pipeline_runs,
    plain_owners,
    produce,
    read,
    schema_registry,
    scram,
    share_groups,
    topics,
    txn,
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
from lakelog.coordinator.share_types import SharePartitionRow, SharePartitionWrite
from lakelog.coordinator.topic_types import (
    AlterTopicConfigsRequest,
    BrokerInfo,
    CreatePartitionsRequest,
    CreateTopicRequest,
    CreateTopicResult,
    DeleteTopicResult,
    TopicInfo,
    TopicResult,
)
from lakelog.coordinator.txn_types import (
    DescribeProducersResult,
    InitTxnProducerRequest,
    InitTxnProducerResult,
    TransactionInfo,
    TxnOffsetCommitRequest,
    TxnRef,
)
from lakelog.security.acl import AclBinding, AclFilter
from lakelog.util.errors import ErrorCode

T = TypeVar("T")


class SqlBatchCoordinator(BatchCoordinator):
    @abc.abstractmethod
    async def _run(self, method: str, write: bool, op: Op[T], *args: Any) -> T:
        """Run `op(session, *args)` in one transaction (a write one if `write`), retried
        as the engine sees fit, and observe its latency under `method`."""

    # -- topics

    async def create_topics(
        self, requests: Sequence[CreateTopicRequest], validate_only: bool = False
    ) -> list[CreateTopicResult]:
        return await self._run(
            "create_topics", not validate_only, topics.create_topics, requests, validate_only
        )

    async def delete_topics(self, names: Sequence[str]) -> list[DeleteTopicResult]:
        return await self._run("delete_topics", True, topics.delete_topics, names)

    async def create_partitions(
        self, requests: Sequence[CreatePartitionsRequest], validate_only: bool = False
    ) -> list[TopicResult]:
        return await self._run(
            "create_partitions",
            not validate_only,
            topics.create_partitions,
            requests,
            validate_only,
        )

    async def get_topics(self, names: Sequence[str] | None = None) -> list[TopicInfo]:
        return await self._run("get_topics", False, topics.get_topics, names)

    async def get_topics_by_id(self, topic_ids: Sequence[UUID]) -> list[TopicInfo]:
        return await self._run("get_topics_by_id", False, topics.get_topics_by_id, topic_ids)

    async def alter_topic_configs(
        self, requests: Sequence[AlterTopicConfigsRequest], validate_only: bool = False
    ) -> list[TopicResult]:
        return await self._run(
            "alter_topic_configs",
            not validate_only,
            topics.alter_topic_configs,
            requests,
            validate_only,
        )

    # -- deletion and retention

    async def delete_records(
        self, requests: Sequence[DeleteRecordsRequest]
    ) -> list[DeleteRecordsResult]:
        return await self._run("delete_records", True, cleanup.delete_records, requests)

    async def enforce_retention(
        self, policies: Sequence[RetentionPolicy], now_ms: int
    ) -> list[RetentionResult]:
        return await self._run(
            "enforce_retention", True, cleanup.enforce_retention, policies, now_ms
        )

    async def files_to_delete(self, marked_before_ms: int) -> list[FileToDelete]:
        return await self._run("files_to_delete", False, cleanup.files_to_delete, marked_before_ms)

    async def delete_files(self, object_keys: Sequence[str]) -> None:
        await self._run("delete_files", True, cleanup.delete_files, object_keys)

    async def inline_file(self, object_key: str) -> bytes | None:
        return await self._run("inline_file", False, inline.read, object_key)

    async def inline_files_data(self, object_keys: Sequence[str]) -> dict[str, bytes]:
        return await self._run("inline_files_data", False, inline.read_many, list(object_keys))

    async def inline_usage(self, broker_id: int) -> InlineUsage:
        return await self._run("inline_usage", False, inline.usage, broker_id)

    async def inline_files(self, limit: int = 1000) -> list[InlineFile]:
        return await self._run("inline_files", False, inline.list_committed, limit)

    async def list_files(self) -> list[str]:
        return await self._run("list_files", False, cleanup.list_files)

    # -- consumer groups

    async def commit_offsets(
        self, group_id: str, offsets: Sequence[OffsetCommit], now_ms: int
    ) -> None:
        await self._run("commit_offsets", True, groups.commit_offsets, group_id, offsets, now_ms)

    async def commit_offset_batch(
        self, items: Sequence[GroupOffsetCommit | TxnOffsetCommitRequest], now_ms: int
    ) -> list[list[ErrorCode]]:
        return await self._run(
            "commit_offset_batch", True, offset_commits.commit_offset_batch, items, now_ms
        )

    async def fetch_offsets(
        self, group_id: str, partitions: Sequence[tuple[str, int]] | None
    ) -> list[CommittedOffset]:
        return await self._run("fetch_offsets", False, groups.fetch_offsets, group_id, partitions)

    async def delete_offsets(self, group_id: str, partitions: Sequence[tuple[str, int]]) -> None:
        await self._run("delete_offsets", True, groups.delete_offsets, group_id, partitions)

    async def save_group(self, group: GroupRecord) -> None:
        await self._run("save_group", True, groups.save_group, group)

    async def load_group(self, group_id: str) -> GroupRecord | None:
        return await self._run("load_group", False, groups.load_group, group_id)

    async def list_groups(self) -> list[GroupRecord]:
        return await self._run("list_groups", False, groups.list_groups)

    async def save_consumer_group(self, group: ConsumerGroupRecord, expected: int) -> bool:
        return await self._run("save_consumer_group", True, consumer_groups.save, group, expected)

    async def load_consumer_group(self, group_id: str) -> ConsumerGroupRecord | None:
        return await self._run("load_consumer_group", False, consumer_groups.load, group_id)

    async def list_consumer_groups(self) -> list[ConsumerGroupRecord]:
        return await self._run("list_consumer_groups", False, consumer_groups.list_all)

    async def load_broker_configs(self) -> dict[str, dict[str, str]]:
        return await self._run("load_broker_configs", False, broker_configs.load_all)

    async def alter_broker_configs(
        self,
        scope: str,
        set_configs: Mapping[str, str],
        delete: Sequence[str],
        replace: bool = False,
    ) -> dict[str, str]:
        return await self._run(
            "alter_broker_configs", True, broker_configs.alter, scope, set_configs, delete, replace
        )

    async def load_group_configs(self, group_ids: Sequence[str]) -> dict[str, dict[str, str]]:
        return await self._run("load_group_configs", False, group_configs.load, group_ids)

    async def alter_group_configs(
        self, group_id: str, set_configs: Mapping[str, str], delete: Sequence[str]
    ) -> dict[str, str]:
        return await self._run(
            "alter_group_configs", True, group_configs.alter, group_id, set_configs, delete
        )

    async def delete_groups(self, group_ids: Sequence[str]) -> list[ErrorCode]:
        return await self._run("delete_groups", True, groups.delete_groups, group_ids)

    async def save_share_group(self, group_id: str, now_ms: int) -> None:
        await self._run("save_share_group", True, share_groups.save_group, group_id, now_ms)

    async def list_share_groups(self) -> list[str]:
        return await self._run("list_share_groups", False, share_groups.list_groups)

    async def load_share_partitions(
        self, group_id: str, keys: Sequence[tuple[str, int]]
    ) -> list[SharePartitionRow | None]:
        return await self._run(
            "load_share_partitions", False, share_groups.load_partitions, group_id, keys
        )

    async def store_share_partitions(self, writes: Sequence[SharePartitionWrite]) -> list[bool]:
        return await self._run(
            "store_share_partitions", True, share_groups.store_partitions, writes
        )

    async def modify_share_partitions(
        self,
        group_id: str,
        keys: Sequence[tuple[str, int]],
        change: Callable[[SharePartitionRow], tuple[int, str] | None],
    ) -> list[SharePartitionRow | None]:
        return await self._run(
            "modify_share_partitions", True, share_groups.modify_partitions, group_id, keys, change
        )

    async def delete_share_partitions(self, group_id: str, keys: Sequence[tuple[str, int]]) -> int:
        return await self._run(
            "delete_share_partitions", True, share_groups.delete_partitions, group_id, keys
        )

    async def expire_offsets(self, committed_before_ms: int) -> int:
        return await self._run("expire_offsets", True, groups.expire_offsets, committed_before_ms)

    async def read_offsets_topic(
        self, partitions: Sequence[tuple[int, int, int]]
    ) -> list[OffsetsTopicRead]:
        return await self._run("read_offsets_topic", False, offsets_topic.read, partitions)

    async def offsets_topic_offset(self, partition: int, timestamp: int) -> tuple[int, int]:
        return await self._run(
            "offsets_topic_offset", False, offsets_topic.offset_for_time, partition, timestamp
        )

    async def compact_offsets_topic(self, tombstones_before_ms: int) -> int:
        return await self._run(
            "compact_offsets_topic", True, offsets_topic.compact, tombstones_before_ms
        )

    # -- producers and brokers

    async def allocate_producer_id(self) -> int:
        return await self._run("allocate_producer_id", True, cluster.allocate_producer_id)

    async def register_broker(self, broker_id: int, rack: str | None, host: str, port: int) -> int:
        return await self._run(
            "register_broker", True, cluster.register_broker, broker_id, rack, host, port
        )

    async def heartbeat_broker(self, broker_id: int, broker_epoch: int) -> ErrorCode:
        return await self._run(
            "heartbeat_broker", True, cluster.heartbeat_broker, broker_id, broker_epoch
        )

    async def list_brokers(self, alive_since_ms: int) -> list[BrokerInfo]:
        return await self._run("list_brokers", False, cluster.list_brokers, alive_since_ms)

    async def fence_broker(
        self, broker_id: int, broker_epoch: int, silent_since_ms: int, *, left: bool = False
    ) -> bool:
        return await self._run(
            "fence_broker",
            True,
            cluster.fence_broker,
            broker_id,
            broker_epoch,
            silent_since_ms,
            left,
        )

    # -- produce

    async def commit_file(
        self,
        object_key: str,
        uploader_broker_id: int,
        broker_epoch: int,
        file_size: int,
        batches: Sequence[CommitBatch],
        inline: bytes | None = None,
    ) -> list[CommitBatchResult]:
        return await self._run(
            "commit_file",
            True,
            produce.commit_file,
            object_key,
            uploader_broker_id,
            broker_epoch,
            file_size,
            batches,
            inline,
        )

    async def claim_plain_partitions(
        self, broker_id: int, broker_epoch: int, keys: Sequence[PlainOwnerKey]
    ) -> list[int | None]:
        return await self._run(
            "claim_plain_partitions", True, plain_owners.claim, broker_id, broker_epoch, keys
        )

    async def commit_outcome(self, object_key: str) -> CommitOutcome | None:
        return await self._run("commit_outcome", False, produce.committed_batches, object_key)

    # -- fetch

    async def find_batches(self, requests: Sequence[FindBatchesRequest]) -> list[FindBatchesResult]:
        return await self._run("find_batches", False, read.find_batches, requests)

    async def log_info(self, partitions: Sequence[PartitionKey]) -> list[LogInfo]:
        return await self._run("log_info", False, read.log_info, partitions)

    async def list_offsets(self, requests: Sequence[ListOffsetsRequest]) -> list[ListOffsetsResult]:
        return await self._run("list_offsets", False, read.list_offsets, requests)

    # -- transactions

    async def init_transactional_producer(
        self, request: InitTxnProducerRequest, now_ms: int
    ) -> InitTxnProducerResult:
        return await self._run(
            "init_transactional_producer", True, txn.init_transactional_producer, request, now_ms
        )

    async def add_partitions_to_txn(
        self, txn_ref: TxnRef, partitions: Sequence[PartitionKey], now_ms: int, verify_only: bool
    ) -> list[ErrorCode]:
        return await self._run(
            "add_partitions_to_txn",
            not verify_only,
            txn.add_partitions_to_txn,
            txn_ref,
            partitions,
            now_ms,
            verify_only,
        )

    async def add_offsets_to_txn(self, txn_ref: TxnRef, group_id: str, now_ms: int) -> ErrorCode:
        return await self._run(
            "add_offsets_to_txn", True, txn.add_offsets_to_txn, txn_ref, group_id, now_ms
        )

    async def txn_offset_commit(
        self, request: TxnOffsetCommitRequest, now_ms: int
    ) -> list[ErrorCode]:
        return await self._run("txn_offset_commit", True, txn.txn_offset_commit, request, now_ms)

    async def end_txn(self, txn_ref: TxnRef, commit: bool, now_ms: int) -> ErrorCode:
        return await self._run("end_txn", True, txn.end_txn, txn_ref, commit, now_ms)

    async def abort_expired_transactions(self, now_ms: int) -> list[str]:
        # One read finds the candidates, then one write transaction per abort: aborts on
        # several brokers never hold each other's partition locks.
        candidates = await self._run(
            "expired_transactions", False, txn.expired_transactions, now_ms
        )
        aborted: list[str] = []
        for tid in candidates:
            if await self._run(
                "abort_expired_transaction", True, txn.abort_if_expired, tid, now_ms
            ):
                aborted.append(tid)
        return aborted

    async def describe_transactions(
        self, transactional_ids: Sequence[str]
    ) -> list[TransactionInfo | None]:
        return await self._run(
            "describe_transactions", False, txn.describe_transactions, transactional_ids
        )

    async def list_transactions(self) -> list[TransactionInfo]:
        return await self._run("list_transactions", False, txn.list_transactions)

    async def describe_producers(
        self, partitions: Sequence[PartitionKey]
    ) -> list[DescribeProducersResult]:
        return await self._run("describe_producers", False, txn.describe_producers, partitions)

    async def pending_txn_offsets(self, group_id: str) -> set[tuple[str, int]]:
        return await self._run("pending_txn_offsets", False, txn.pending_txn_offsets, group_id)

    # -- pipeline

    async def list_file_infos(
        self, key_prefix: str = "", after_key: str = "", limit: int = 1000
    ) -> list[FileInfo]:
        return await self._run(
            "list_file_infos", False, merge.list_file_infos, key_prefix, after_key, limit
        )

    async def file_batches(self, object_keys: Sequence[str]) -> list[FileBatch]:
        return await self._run("file_batches", False, merge.file_batches, object_keys)

    async def file_references(self, object_keys: Sequence[str]) -> list[FileReference]:
        return await self._run("file_references", False, merge.file_references, object_keys)

    async def commit_merge(
        self, commits: Sequence[MergeCommit], all_or_nothing: bool = False
    ) -> list[MergeCommitResult]:
        return await self._run("commit_merge", True, merge.commit_merge, commits, all_or_nothing)

    async def claim_compaction(
        self, topic_id: UUID, partition: int, broker_id: int, now_ms: int, ttl_ms: int
    ) -> CompactionLease | None:
        return await self._run(
            "claim_compaction",
            True,
            compaction.claim_compaction,
            topic_id,
            partition,
            broker_id,
            now_ms,
            ttl_ms,
        )

    async def release_compaction(
        self, topic_id: UUID, partition: int, broker_id: int, state: CompactionLease
    ) -> bool:
        return await self._run(
            "release_compaction",
            True,
            compaction.release_compaction,
            topic_id,
            partition,
            broker_id,
            state,
        )

    # -- mirroring

    async def create_mirror(self, definition: MirrorDefinition, now_ms: int) -> MirrorResult:
        return await self._run("create_mirror", True, mirror.create_mirror, definition, now_ms)

    async def delete_mirror(self, name: str) -> MirrorResult:
        return await self._run("delete_mirror", True, mirror.delete_mirror, name)

    async def list_mirrors(self, names: Sequence[str] | None = None) -> list[MirrorDefinition]:
        return await self._run("list_mirrors", False, mirror.list_mirrors, names)

    async def alter_mirror(
        self,
        name: str,
        add_topics: Sequence[str] = (),
        add_patterns: Sequence[str] = (),
        remove_topics: Sequence[str] = (),
    ) -> MirrorResult:
        return await self._run(
            "alter_mirror", True, mirror.alter_mirror, name, add_topics, add_patterns, remove_topics
        )

    async def add_mirror_partitions(
        self, name: str, partitions: Sequence[PartitionKey], restart: bool, now_ms: int
    ) -> list[MirrorResult]:
        return await self._run(
            "add_mirror_partitions",
            True,
            mirror_partitions.add_mirror_partitions,
            name,
            partitions,
            restart,
            now_ms,
        )

    async def mirror_partitions(
        self, mirror: str | None = None, topic_ids: Sequence[UUID] | None = None
    ) -> list[MirrorPartition]:
        return await self._run(
            "mirror_partitions", False, mirror_partitions.mirror_partitions, mirror, topic_ids
        )

    async def acquire_mirror_leases(
        self, broker_id: int, broker_epoch: int, live_brokers: int, now_ms: int, ttl_ms: int
    ) -> list[MirrorPartition]:
        return await self._run(
            "acquire_mirror_leases",
            True,
            mirror_partitions.acquire_mirror_leases,
            broker_id,
            broker_epoch,
            live_brokers,
            now_ms,
            ttl_ms,
        )

    async def update_mirror_partitions(
        self, updates: Sequence[MirrorPartitionUpdate], now_ms: int
    ) -> list[ErrorCode]:
        return await self._run(
            "update_mirror_partitions",
            True,
            mirror_partitions.update_mirror_partitions,
            updates,
            now_ms,
        )

    async def commit_mirror(
        self,
        object_key: str,
        broker_id: int,
        broker_epoch: int,
        file_size: int,
        batches: Sequence[MirrorBatch],
    ) -> list[CommitBatchResult]:
        return await self._run(
            "commit_mirror",
            True,
            mirror_commit.commit_mirror,
            object_key,
            broker_id,
            broker_epoch,
            file_size,
            batches,
        )

    async def stop_mirror_topics(
        self, name: str, topics: Sequence[str], now_ms: int
    ) -> list[MirrorResult]:
        return await self._run(
            "stop_mirror_topics", True, mirror_failover.stop_mirror_topics, name, topics, now_ms
        )

    async def finish_mirror_failover(self, now_ms: int) -> list[MirrorPartition]:
        return await self._run(
            "finish_mirror_failover", True, mirror_failover.finish_mirror_failover, now_ms
        )

    async def mirror_topic_ids(self) -> list[UUID]:
        return await self._run("mirror_topic_ids", False, mirror_partitions.mirror_topic_ids)

    async def claim_mirror_task(self, name: str, broker_id: int, now_ms: int, ttl_ms: int) -> bool:
        return await self._run(
            "claim_mirror_task", True, mirror.claim_mirror_task, name, broker_id, now_ms, ttl_ms
        )

    # -- SCRAM credentials
    async def alter_scram_credentials(
        self,
        deletions: Sequence[tuple[str, str]],
        upsertions: Sequence[StoredScramCredential],
    ) -> list[tuple[str, str]]:
        return await self._run(
            "alter_scram_credentials", True, scram.alter_scram_credentials, deletions, upsertions
        )

    async def describe_scram_credentials(
        self, users: Sequence[str] | None = None
    ) -> list[ScramCredentialInfo]:
        return await self._run(
            "describe_scram_credentials", False, scram.describe_scram_credentials, users
        )

    async def scram_credential(self, user: str, mechanism: str) -> StoredScramCredential | None:
        return await self._run("scram_credential", False, scram.scram_credential, user, mechanism)

    # -- ACLs

    async def acl_version(self) -> int:
        return await self._run("acl_version", False, acls.acl_version)

    async def load_acls(self, limit: int) -> tuple[int, list[AclBinding]]:
        return await self._run("load_acls", False, acls.load_acls, limit)

    async def create_acls(self, bindings: Sequence[AclBinding], limit: int) -> list[bool]:
        return await self._run("create_acls", True, acls.create_acls, bindings, limit)

    async def delete_acls(self, filters: Sequence[AclFilter], limit: int) -> list[list[AclBinding]]:
        return await self._run("delete_acls", True, acls.delete_acls, filters, limit)

    # -- pipeline job runs
    async def record_pipeline_run(self, run: PipelineRun) -> None:
        await self._run("record_pipeline_run", True, pipeline_runs.record, run)

    async def pipeline_runs(self, limit: int) -> list[PipelineRun]:
        return await self._run("pipeline_runs", False, pipeline_runs.recent, limit)

    # -- schema registry
    async def registry_subjects(self, deleted: bool) -> list[str]:
        return await self._run("registry_subjects", False, schema_registry.subjects, deleted)

    async def registry_subject_versions(self, subject: str) -> list[SubjectVersion]:
        return await self._run(
            "registry_subject_versions", False, schema_registry.subject_versions, subject
        )

    async def registry_schemas(self, ids: Sequence[int]) -> list[StoredSchema]:
        return await self._run("registry_schemas", False, schema_registry.schemas_by_id, ids)

    async def registry_schema_usages(self, schema_id: int) -> list[SubjectVersion]:
        return await self._run(
            "registry_schema_usages", False, schema_registry.schema_usages, schema_id
        )

    async def registry_find_schema(self, fingerprint: str) -> int | None:
        return await self._run(
            "registry_find_schema", False, schema_registry.find_schema, fingerprint
        )

    async def registry_referenced_by(self, subject: str, version: int) -> list[int]:
        return await self._run(
            "registry_referenced_by", False, schema_registry.referenced_by, subject, version
        )

    async def registry_register(self, request: RegisterSchema) -> RegisterOutcome:
        return await self._run("registry_register", True, schema_registry.register, request)

    async def registry_delete_versions(
        self, subject: str, versions: Sequence[int], permanent: bool
    ) -> None:
        await self._run(
            "registry_delete_versions",
            True,
            schema_registry.delete_versions,
            subject,
            versions,
            permanent,
        )

    async def registry_configs(self, subject: str) -> tuple[RegistryConfig, RegistryConfig]:
        return await self._run("registry_configs", False, schema_registry.configs, subject)

    async def registry_set_config(self, subject: str, field: str, value: str | None) -> None:
        await self._run(
            "registry_set_config", True, schema_registry.set_config, subject, field, value
        )
