"""The mirroring methods of `PostgresBatchCoordinator` (mixed in), each one pooled
transaction, retried whole on serialization failures and deadlocks."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any
from uuid import UUID

from lakelog.coordinator.interface import CommitBatchResult, PartitionKey
from lakelog.coordinator.mirror_types import (
    MirrorBatch,
    MirrorDefinition,
    MirrorPartition,
    MirrorPartitionUpdate,
    MirrorResult,
)
from lakelog.coordinator.postgres.mirror import (
    acquire_mirror_leases,
    add_mirror_partitions,
    alter_mirror,
    claim_mirror_task,
    create_mirror,
    delete_mirror,
    list_mirrors,
    mirror_partitions,
    mirror_topic_ids,
    update_mirror_partitions,
)
from lakelog.coordinator.postgres.mirror_commit import commit_mirror
from lakelog.coordinator.postgres.mirror_failover import finish_mirror_failover, stop_mirror_topics
from lakelog.coordinator.postgres.transaction import Transactions
from lakelog.errors import ErrorCode


class PostgresMirrorMethods:
    """The mirroring part of `PostgresBatchCoordinator` (mixed in): each method is one
    pooled transaction, retried whole on serialization failures and deadlocks."""

    def _run_tx(self) -> Transactions:
        raise NotImplementedError

    async def _run_conn(self, method: str, write: bool, body: Any, *args: Any) -> Any:
        return await self._run_tx().run(method, write, body, *args)

    async def create_mirror(self, definition: MirrorDefinition, now_ms: int) -> MirrorResult:
        return await self._run_conn("create_mirror", True, create_mirror, definition, now_ms)

    async def delete_mirror(self, name: str) -> MirrorResult:
        return await self._run_conn("delete_mirror", True, delete_mirror, name)

    async def list_mirrors(self, names: Sequence[str] | None = None) -> list[MirrorDefinition]:
        return await self._run_conn("list_mirrors", False, list_mirrors, names)

    async def alter_mirror(
        self,
        name: str,
        add_topics: Sequence[str] = (),
        add_patterns: Sequence[str] = (),
        remove_topics: Sequence[str] = (),
    ) -> MirrorResult:
        return await self._run_conn(
            "alter_mirror", True, alter_mirror, name, add_topics, add_patterns, remove_topics
        )

    async def add_mirror_partitions(
        self, name: str, partitions: Sequence[PartitionKey], restart: bool, now_ms: int
    ) -> list[MirrorResult]:
        return await self._run_conn(
            "add_mirror_partitions", True, add_mirror_partitions, name, partitions, restart, now_ms
        )

    async def mirror_partitions(
        self, mirror: str | None = None, topic_ids: Sequence[UUID] | None = None
    ) -> list[MirrorPartition]:
        return await self._run_conn(
            "mirror_partitions", False, mirror_partitions, mirror, topic_ids
        )

    async def acquire_mirror_leases(
        self, broker_id: int, broker_epoch: int, live_brokers: int, now_ms: int, ttl_ms: int
    ) -> list[MirrorPartition]:
        return await self._run_conn(
            "acquire_mirror_leases",
            True,
            acquire_mirror_leases,
            broker_id,
            broker_epoch,
            live_brokers,
            now_ms,
            ttl_ms,
        )

    async def update_mirror_partitions(
        self, updates: Sequence[MirrorPartitionUpdate], now_ms: int
    ) -> list[ErrorCode]:
        return await self._run_conn(
            "update_mirror_partitions", True, update_mirror_partitions, updates, now_ms
        )

    async def commit_mirror(
        self,
        object_key: str,
        broker_id: int,
        broker_epoch: int,
        file_size: int,
        batches: Sequence[MirrorBatch],
    ) -> list[CommitBatchResult]:
        return await self._run_conn(
            "commit_mirror",
            True,
            commit_mirror,
            object_key,
            broker_id,
            broker_epoch,
            file_size,
            batches,
        )

    async def stop_mirror_topics(
        self, name: str, topics: Sequence[str], now_ms: int
    ) -> list[MirrorResult]:
        return await self._run_conn(
            "stop_mirror_topics", True, stop_mirror_topics, name, topics, now_ms
        )

    async def finish_mirror_failover(self, now_ms: int) -> list[MirrorPartition]:
        return await self._run_conn("finish_mirror_failover", True, finish_mirror_failover, now_ms)

    async def mirror_topic_ids(self) -> list[UUID]:
        return await self._run_conn("mirror_topic_ids", False, mirror_topic_ids)

    async def claim_mirror_task(self, name: str, broker_id: int, now_ms: int, ttl_ms: int) -> bool:
        return await self._run_conn(
            "claim_mirror_task", True, claim_mirror_task, name, broker_id, now_ms, ttl_ms
        )
