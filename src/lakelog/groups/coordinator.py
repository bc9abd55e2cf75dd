"""The group coordinator: which broker owns a group, the in-memory groups this broker owns,
loading them from and saving them to the batch coordinator, session expiry, offsets."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import zlib
from collections.abc import Sequence
from typing import TYPE_CHECKING, Protocol

from lakelog.coordinator.group_types import CommittedOffset, GroupRecord
from lakelog.coordinator.topic_types import BrokerInfo
from lakelog.groups.consumer_groups import ConsumerGroups, ConsumerGroupsHost
from lakelog.groups.group import Group, GroupConfig, GroupState
from lakelog.groups.offset_commits import OffsetCommitQueue
from lakelog.server.cluster.outage import log_failure
from lakelog.util import metrics
from lakelog.util.errors import ErrorCode
from lakelog.util.keyed_locks import KeyedLocks
from lakelog.util.pacing import paced

if TYPE_CHECKING:
    from lakelog.groups.share.service import ShareService

log = logging.getLogger(__name__)

COMPACT_INTERVAL_S = 30.0
COMPACT_PASSES = 10
"""Bounded passes per round (each deletes at most ops/offsets_topic.COMPACTION_BATCH)."""
OFFSETS_TOPIC_DELETE_RETENTION_MS = 86_400_000
"""Kafka's default delete.retention.ms: how long a tombstone stays readable, so a lag
tool that reads the topic now and then still sees a group's or offset's deletion."""

TICK_S = 0.1
CONSUMER_GROUP_STATES = ("Empty", "Assigning", "Reconciling", "Stable")
"""KIP-848 groups' states, counted in the same gauge as classic groups'."""


def owner_of(key: str, brokers: Sequence[BrokerInfo]) -> BrokerInfo:
    """The broker that coordinates `key` (a group or transactional id): a stable hash over
    the live brokers sorted by id, so every broker computes the same owner."""
    ordered = sorted(brokers, key=lambda b: b.broker_id)
    return ordered[zlib.crc32(key.encode()) % len(ordered)]


class GroupHost(ConsumerGroupsHost, Protocol):
    """What the group coordinator uses of the broker (the Broker is one), with what it hands
    its consumer groups."""

    @property
    def broker_id(self) -> int: ...
    @property
    def share(self) -> ShareService: ...
    async def live_brokers(self) -> list[BrokerInfo]: ...


class GroupCoordinator:
    def __init__(self, broker: GroupHost) -> None:
        self._broker = broker
        settings = broker.settings
        self.config = GroupConfig(
            initial_rebalance_delay_s=settings.group_initial_rebalance_delay_ms / 1000,
            min_session_timeout_ms=settings.group_min_session_timeout_ms,
            max_session_timeout_ms=settings.group_max_session_timeout_ms,
            max_size=settings.group_max_size,
        )
        self._groups: dict[str, Group] = {}
        self._locks = KeyedLocks()
        self._saving: set[asyncio.Task[None]] = set()
        self._tasks: list[asyncio.Task[None]] = []
        self._rebalances_counted: dict[str, int] = {}
        self.consumer = ConsumerGroups(broker, self)
        """KIP-848 groups (group.protocol=consumer); a group id is one kind or the other."""
        self.offset_commits = OffsetCommitQueue(
            broker.coordinator, settings.offset_commit_batch_max_offsets
        )
        """OffsetCommit and TxnOffsetCommit, written together while a write is in flight."""

    # ------------------------------------------------------------------ placement
    async def owns(self, key: str) -> bool:
        brokers = await self._broker.live_brokers()
        return owner_of(key, brokers).broker_id == self._broker.broker_id

    async def coordinator_for(self, key: str) -> BrokerInfo:
        return owner_of(key, await self._broker.live_brokers())

    # ------------------------------------------------------------------ groups
    async def get(self, group_id: str, *, create: bool) -> Group | None:
        """The in-memory group, loaded from its saved record on first use."""
        group = self._groups.get(group_id)
        if group is not None:
            return group
        async with self._locks.hold(group_id):
            group = self._groups.get(group_id)
            if group is None:
                record = await self._broker.coordinator.load_group(group_id)
                if record is not None:
                    group = Group.restore(record, self.config, time.monotonic())
                elif create:
                    group = Group(group_id, self.config)
                if group is not None:
                    self._groups[group_id] = group
                    self._update_state_gauge()
        return group

    def adopt(self, group: Group) -> None:
        """A group downgraded from the consumer protocol (`groups.mixed`) is served here
        from now on (its record is saved by the caller)."""
        self._groups[group.group_id] = group
        self._update_state_gauge()

    async def retire(self, group: Group) -> None:
        """The classic group became a consumer group (`groups.mixed`): forget it here and
        leave an Empty record (generation kept), so only the consumer group has members."""
        self._groups.pop(group.group_id, None)
        await self._broker.coordinator.save_group(
            GroupRecord(
                group.group_id,
                str(GroupState.EMPTY),
                group.protocol_type,
                None,
                group.generation,
                None,
                (),
                int(time.time() * 1000),
            )
        )
        self._update_state_gauge()

    def known(self) -> list[Group]:
        return list(self._groups.values())

    async def save(self, group: Group) -> None:
        """Write the group's record now (the caller waits for durability)."""
        group.dirty = False
        await self._broker.coordinator.save_group(group.record(int(time.time() * 1000)))
        self._update_state_gauge()

    def save_later(self, group: Group) -> None:
        if not group.dirty:
            return
        task = asyncio.get_running_loop().create_task(self._save_logged(group))
        self._saving.add(task)
        task.add_done_callback(self._saving.discard)

    async def _save_logged(self, group: Group) -> None:
        try:
            await self.save(group)
        except Exception:
            log_failure(log, "saving group %s failed", group.group_id)
            group.dirty = True

    async def delete(self, group_ids: Sequence[str]) -> list[ErrorCode]:
        results: list[ErrorCode] = []
        to_delete: list[str] = []
        for group_id in group_ids:
            group = await self.get(group_id, create=False)
            consumer_group = await self.consumer.get(group_id)
            if (
                (group is not None and not group.is_empty)
                or (consumer_group is not None and not consumer_group.is_empty)
                or await self._broker.share.has_members(group_id)
            ):
                results.append(ErrorCode.non_empty_group)
                continue
            results.append(ErrorCode.none)
            to_delete.append(group_id)
        if to_delete:
            answers = iter(await self._broker.coordinator.delete_groups(to_delete))
            for i, error in enumerate(results):
                if error == ErrorCode.none:
                    results[i] = next(answers)
            self.consumer.forget(to_delete)
            self._broker.share.forget(to_delete)
            for group_id in to_delete:
                self._groups.pop(group_id, None)
                self._rebalances_counted.pop(group_id, None)
        self._update_state_gauge()
        return results

    async def list(self) -> list[GroupRecord]:
        """Every group: this broker's live view first, saved records for the rest."""
        live = {g.group_id: g.record(0) for g in self._groups.values()}
        saved = await self._broker.coordinator.list_groups()
        merged = {r.group_id: r for r in saved}
        merged.update(live)
        return [merged[k] for k in sorted(merged)]

    # ------------------------------------------------------------------ offsets
    async def fetch_offsets(
        self, group_id: str, partitions: Sequence[tuple[str, int]] | None
    ) -> list[CommittedOffset]:
        return await self._broker.coordinator.fetch_offsets(group_id, partitions)

    # ------------------------------------------------------------------ background
    def start(self) -> None:
        loop = asyncio.get_running_loop()
        self._tasks = [
            loop.create_task(self._tick_loop(), name="group-ticks"),
            loop.create_task(self._expire_loop(), name="offset-expiry"),
            loop.create_task(self._lag_loop(), name="group-lag"),
            loop.create_task(self._compact_loop(), name="offsets-topic-compaction"),
        ]

    async def stop(self) -> None:
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        await self.offset_commits.flush()
        for group in list(self._groups.values()):
            if group.dirty:
                with contextlib.suppress(Exception):
                    await self.save(group)
        if self._saving:
            await asyncio.gather(*self._saving, return_exceptions=True)

    async def _tick_loop(self) -> None:
        while True:
            await asyncio.sleep(TICK_S)
            # Paced: with many groups (clients may name any number) one pass would hold
            # the loop; a group deleted or handed over while we yield is skipped.
            async for group in paced(list(self._groups.values())):
                if self._groups.get(group.group_id) is not group:
                    continue
                try:
                    group.tick(time.monotonic())
                except Exception:
                    log.exception("group %s tick failed", group.group_id)
                counted = self._rebalances_counted.get(group.group_id, 0)
                if group.rebalances > counted:
                    metrics.group_rebalances_total.inc(group.rebalances - counted)
                    self._rebalances_counted[group.group_id] = group.rebalances
                self.save_later(group)
            self._update_state_gauge()
            try:
                await self.consumer.tick()
            except Exception:
                log_failure(log, "consumer group expiry failed")

    async def _expire_loop(self) -> None:
        settings = self._broker.settings
        while True:
            await asyncio.sleep(settings.offsets_retention_check_interval_ms / 1000)
            cutoff = int(time.time() * 1000) - settings.offsets_retention_minutes * 60_000
            try:
                expired = await self._broker.coordinator.expire_offsets(cutoff)
                if expired:
                    log.info("expired %d committed offsets of empty groups", expired)
            except Exception:
                log_failure(log, "offset expiry failed")

    async def _compact_loop(self) -> None:
        """Compaction of `__consumer_offsets` (Kafka's log cleaner on that topic): a few
        bounded passes every COMPACT_INTERVAL_S, so a group committing per message keeps
        the table at its live keys plus a tail."""
        while True:
            await asyncio.sleep(COMPACT_INTERVAL_S)
            cutoff = int(time.time() * 1000) - OFFSETS_TOPIC_DELETE_RETENTION_MS
            try:
                for _ in range(COMPACT_PASSES):
                    if not await self._broker.coordinator.compact_offsets_topic(cutoff):
                        break
            except Exception:
                log_failure(log, "__consumer_offsets compaction failed")

    async def _lag_loop(self) -> None:
        while True:
            await asyncio.sleep(self._broker.settings.group_lag_interval_ms / 1000)
            try:
                await self.update_lag()
            except Exception:
                log_failure(log, "lag update failed")

    async def update_lag(self) -> None:
        from lakelog.coordinator.log_types import PartitionKey

        topics = self._broker.topics
        group_ids = [g.group_id for g in self._groups.values()]
        group_ids += [g.group_id for g in self.consumer.known()]
        for group_id in group_ids:
            committed = await self.fetch_offsets(group_id, None)
            keys, rows = [], []
            for c in committed:
                topic = await topics.get(c.topic)
                if topic is not None and 0 <= c.partition < topic.num_partitions:
                    keys.append(PartitionKey(topic.topic_id, c.partition))
                    rows.append(c)
            if not keys:
                continue
            infos = await self._broker.coordinator.log_info(keys)
            for c, info in zip(rows, infos, strict=True):
                metrics.group_lag.labels(
                    group=group_id, topic=c.topic, partition=str(c.partition)
                ).set(max(info.high_watermark - c.offset, 0))

    def _update_state_gauge(self) -> None:
        counts = dict.fromkeys([*map(str, GroupState), *CONSUMER_GROUP_STATES], 0)
        for group in self._groups.values():
            counts[str(group.state)] += 1
        for consumer_group in self.consumer.known():
            counts[consumer_group.state] += 1
        for state, count in counts.items():
            metrics.groups.labels(state=state).set(count)
