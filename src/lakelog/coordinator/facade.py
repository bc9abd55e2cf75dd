"""The batch coordinator written once: every `BatchCoordinator` method is one operation
(`coordinator/ops/`) run by `_run` in one transaction of the engine underneath, and timed
under its own name (`coordinator_latency_seconds{method=...}`). An engine subclass
(`sqlite/coordinator.py`, `postgres/coordinator.py`) supplies `_run`, its lifecycle and
change notifications, and overrides a method only where the engines truly differ."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, TypeVar
from uuid import UUID

from lakelog.coordinator.engine import Op
from lakelog.coordinator.interface import (
    AlterTopicConfigsRequest,
    BatchCoordinator,
    BrokerInfo,
    CommittedOffset,
    CreatePartitionsRequest,
    CreateTopicRequest,
    CreateTopicResult,
    DeleteRecordsRequest,
    DeleteRecordsResult,
    DeleteTopicResult,
    FileToDelete,
    GroupRecord,
    OffsetCommit,
    RetentionPolicy,
    RetentionResult,
    TopicInfo,
    TopicResult,
)
from lakelog.coordinator.ops import cleanup, cluster, groups, topics
from lakelog.errors import ErrorCode

T = TypeVar("T")


class SqlBatchCoordinator(BatchCoordinator):
    async def _run(self, method: str, write: bool, op: Op[T], *args: Any) -> T:
        """Run `op(session, *args)` in one transaction (a write one if `write`), retried
        as the engine sees fit, and observe its latency under `method`."""
        raise NotImplementedError

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

    async def list_files(self) -> list[str]:
        return await self._run("list_files", False, cleanup.list_files)

    # -- consumer groups

    async def commit_offsets(
        self, group_id: str, offsets: Sequence[OffsetCommit], now_ms: int
    ) -> None:
        await self._run("commit_offsets", True, groups.commit_offsets, group_id, offsets, now_ms)

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

    async def delete_groups(self, group_ids: Sequence[str]) -> list[ErrorCode]:
        return await self._run("delete_groups", True, groups.delete_groups, group_ids)

    async def expire_offsets(self, committed_before_ms: int) -> int:
        return await self._run("expire_offsets", True, groups.expire_offsets, committed_before_ms)

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
