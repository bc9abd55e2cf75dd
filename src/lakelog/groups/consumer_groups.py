"""The KIP-848 consumer groups this broker coordinates: loading them from the batch
coordinator, running one request at a time per group, saving every change before the
member hears of it, and expiring sessions. The rules are `consumer_group.ConsumerGroup`."""

from __future__ import annotations

import dataclasses
import json
import logging
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Protocol, TypeVar

from lakelog.coordinator.group_types import ConsumerGroupRecord
from lakelog.groups import mixed
from lakelog.groups.consumer_group import (
    ConsumerGroup,
    ConsumerGroupConfig,
    HeartbeatRequest,
    HeartbeatResult,
    TopicMeta,
)
from lakelog.server.cluster.outage import log_failure
from lakelog.util import metrics
from lakelog.util.errors import ErrorCode
from lakelog.util.keyed_locks import KeyedLocks
from lakelog.util.pacing import paced

if TYPE_CHECKING:
    from lakelog.config import Settings
    from lakelog.coordinator.interface import BatchCoordinator
    from lakelog.groups.group import Group, GroupConfig
    from lakelog.groups.group_configs import GroupConfigs
    from lakelog.server.topics import TopicCache

log = logging.getLogger(__name__)
T = TypeVar("T")

ABSENT_TTL_S = 5.0
"""How long "no consumer group has this id" is believed without asking again. Only this
broker creates the groups it owns, so this matters only when ownership just moved here."""
ABSENT_MAX = 100_000


class ClassicGroups(Protocol):
    """What consumer groups use of the classic group coordinator (`GroupCoordinator` is
    one): upgrading a classic group, handing a downgraded one back, and who owns a group."""

    @property
    def config(self) -> GroupConfig: ...
    async def get(self, group_id: str, *, create: bool) -> Group | None: ...
    async def retire(self, group: Group) -> None: ...
    def adopt(self, group: Group) -> None: ...
    async def save(self, group: Group) -> None: ...
    async def owns(self, key: str) -> bool: ...


class ConsumerGroupsHost(Protocol):
    """What KIP-848 consumer groups use of the broker (the Broker is one)."""

    @property
    def settings(self) -> Settings: ...
    @property
    def coordinator(self) -> BatchCoordinator: ...
    @property
    def topics(self) -> TopicCache: ...
    @property
    def group_configs(self) -> GroupConfigs: ...


class ConsumerGroups:
    def __init__(self, broker: ConsumerGroupsHost, classic: ClassicGroups) -> None:
        self._broker = broker
        self._classic = classic
        settings = broker.settings
        assignors = tuple(a.strip() for a in settings.group_consumer_assignors.split(",") if a)
        self.config = ConsumerGroupConfig(
            session_timeout_ms=settings.group_consumer_session_timeout_ms,
            heartbeat_interval_ms=settings.group_consumer_heartbeat_interval_ms,
            assignors=assignors or ("uniform",),
            max_size=settings.group_consumer_max_size,
        )
        self._groups: dict[str, ConsumerGroup] = {}
        self._absent: dict[str, float] = {}
        """Ids found to have no consumer group, and when: every classic group's commits,
        fetches and heartbeats ask, and should not each cost a query."""
        self._locks = KeyedLocks()
        self._epochs: dict[str, int] = {}
        """Group epochs already counted as rebalances (each new epoch is one)."""

    async def config_for(self, group_id: str) -> ConsumerGroupConfig:
        """The broker's defaults under the group's own consumer.* configs (type 32)."""
        own = await self._broker.group_configs.effective(group_id)
        if (
            own.consumer_session_timeout_ms == self.config.session_timeout_ms
            and own.consumer_heartbeat_interval_ms == self.config.heartbeat_interval_ms
        ):
            return self.config
        return dataclasses.replace(
            self.config,
            session_timeout_ms=own.consumer_session_timeout_ms,
            heartbeat_interval_ms=own.consumer_heartbeat_interval_ms,
        )

    async def get(self, group_id: str) -> ConsumerGroup | None:
        """The group as this broker knows it, loaded from its record on first use."""
        group = self._groups.get(group_id)
        if group is not None:
            return group
        checked = self._absent.get(group_id)
        if checked is not None and time.monotonic() - checked < ABSENT_TTL_S:
            return None
        record = await self._broker.coordinator.load_consumer_group(group_id)
        if record is None:
            if len(self._absent) >= ABSENT_MAX:
                self._absent.clear()
            self._absent[group_id] = time.monotonic()
            return None
        self._absent.pop(group_id, None)
        group = self._groups.setdefault(group_id, self._restore(record))
        self._epochs.setdefault(group_id, group.group_epoch)
        return group

    def _restore(self, record: ConsumerGroupRecord) -> ConsumerGroup:
        return ConsumerGroup.restore(
            record.group_id,
            json.loads(record.document),
            record.revision,
            self.config,
            time.monotonic(),
        )

    async def topics(self) -> dict[str, TopicMeta]:
        return {
            t.name: TopicMeta(t.topic_id, t.num_partitions) for t in await self._broker.topics.all()
        }

    async def heartbeat(self, group_id: str, request: HeartbeatRequest) -> HeartbeatResult:
        config = await self.config_for(group_id)
        async with self._locks.hold(group_id):
            group = await self.get(group_id)
            if group is not None:
                group.config = config
            topics = await self.topics()
            now = time.monotonic()
            fresh = group is None
            classic = None
            if group is None or group.is_empty:
                classic = await self._classic.get(group_id, create=False)
                if classic is not None and classic.is_empty:
                    classic = None
            if classic is not None:
                if request.member_epoch != 0 or not mixed.can_upgrade(classic):
                    return HeartbeatResult(
                        ErrorCode.group_id_not_found
                        if classic.protocol_type != mixed.CONSUMER
                        else ErrorCode.coordinator_not_available,
                        message=f"classic group {group_id} cannot be upgraded now",
                    )
                upgraded = mixed.upgrade(classic, config, topics, now)
                if group is not None:  # an empty consumer record: replace it in place
                    upgraded.revision += group.revision
                    upgraded.saved_revision = group.saved_revision
                group, fresh = upgraded, True
            elif group is None:
                group = ConsumerGroup(group_id, config)
            result = group.heartbeat(request, topics, now)
            if not group.dirty or (classic is not None and result.error != ErrorCode.none):
                return result
            if fresh:
                self._groups[group_id] = group
                self._absent.pop(group_id, None)
            if not await self._save(group):
                return HeartbeatResult(ErrorCode.coordinator_not_available, request.member_id)
            if classic is not None:
                await self._classic.retire(classic)
                log.info("group %s upgraded to the consumer protocol", group_id)
            await self._maybe_downgrade(group, topics, now)
            return result

    async def _maybe_downgrade(
        self, group: ConsumerGroup, topics: dict[str, TopicMeta], now: float
    ) -> None:
        """The last consumer-protocol member is gone: the classic members go on in a
        classic group. Memory switches at once (the next classic request finds the
        classic group); then the classic record is written, then the empty consumer one."""
        if not mixed.should_downgrade(group):
            return
        names = {meta.topic_id: name for name, meta in topics.items()}
        classic = mixed.downgrade(group, self._classic.config, names, now)
        self._classic.adopt(classic)
        try:
            await self._classic.save(classic)
        except Exception:
            classic.dirty = True  # the group coordinator's ticks save it again
            log_failure(log, "saving downgraded group %s failed", group.group_id)
        await self._save(group)
        log.info("group %s downgraded to the classic protocol", group.group_id)

    async def classic_call(
        self, group_id: str, call: Callable[[ConsumerGroup, dict[str, TopicMeta], float], T]
    ) -> T | None:
        """Run a classic member's request (`mixed`) on the group, saving what it changed
        before answering; None when the group is gone or could not be saved."""
        async with self._locks.hold(group_id):
            group = await self.get(group_id)
            if group is None:
                return None
            topics = await self.topics()
            result = call(group, topics, time.monotonic())
            if group.dirty and not await self._save(group):
                return None
            await self._maybe_downgrade(group, topics, time.monotonic())
            return result

    async def _save(self, group: ConsumerGroup) -> bool:
        """Write the group's record; False (and the group forgotten, to be reloaded) when
        the write failed or a newer record exists, e.g. another broker took the group."""
        record = ConsumerGroupRecord(
            group.group_id,
            group.state,
            group.group_epoch,
            group.revision,
            json.dumps(group.document(), separators=(",", ":")),
            int(time.time() * 1000),
        )
        try:
            written = await self._broker.coordinator.save_consumer_group(
                record, group.saved_revision
            )
        except Exception:
            log_failure(log, "saving consumer group %s failed", group.group_id)
            written = False
        if written:
            group.dirty = False
            group.saved_revision = group.revision
            counted = self._epochs.get(group.group_id, group.group_epoch)
            if group.group_epoch > counted:
                metrics.group_rebalances_total.inc(group.group_epoch - counted)
            self._epochs[group.group_id] = group.group_epoch
        else:
            self._groups.pop(group.group_id, None)
            self._absent.pop(group.group_id, None)
        return written

    def has_members(self, group_id: str) -> bool:
        """Without waiting: this broker holds the group and it has members."""
        group = self._groups.get(group_id)
        return group is not None and not group.is_empty

    def known(self) -> list[ConsumerGroup]:
        return list(self._groups.values())

    async def records(self) -> list[ConsumerGroupRecord]:
        """Every consumer group: this broker's live view over the saved records."""
        saved = {r.group_id: r for r in await self._broker.coordinator.list_consumer_groups()}
        for g in self._groups.values():
            saved[g.group_id] = ConsumerGroupRecord(
                g.group_id, g.state, g.group_epoch, g.revision, ""
            )
        return [saved[k] for k in sorted(saved)]

    def forget(self, group_ids: Sequence[str]) -> None:
        for group_id in group_ids:
            self._groups.pop(group_id, None)
            self._epochs.pop(group_id, None)

    async def tick(self) -> None:
        """Expire sessions and rebalance timeouts of the groups this broker still owns; a
        group that moved elsewhere is dropped (its new coordinator has it)."""
        async for group_id in paced(list(self._groups)):
            if not await self._classic.owns(group_id):
                self._groups.pop(group_id, None)
                continue
            async with self._locks.hold(group_id):
                group = self._groups.get(group_id)
                changed = group is not None and (group.tick(time.monotonic()) or group.dirty)
                if group is not None and changed and await self._save(group):
                    await self._maybe_downgrade(group, await self.topics(), time.monotonic())
