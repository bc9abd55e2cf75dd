"""A broker's share-group parts: membership (on the group's coordinator broker), share
sessions (on the broker a member fetches from) and share-partition state (any broker,
stored in the batch coordinator)."""

from __future__ import annotations

import asyncio
import logging
import uuid
from typing import TYPE_CHECKING, Protocol

from lakelog.groups.share.groups import Heartbeat, HeartbeatAnswer, ShareGroups, ShareMember
from lakelog.groups.share.partitions import (
    ShareKey,
    SharePartitions,
    SharePartitionsHost,
    now_ms,
    release_and_ack,
)
from lakelog.groups.share.sessions import ShareSessions
from lakelog.server.cluster.outage import log_failure

if TYPE_CHECKING:
    from lakelog.groups.group_configs import GroupConfigs
    from lakelog.server.topics import TopicCache

log = logging.getLogger(__name__)
MAX_RELEASING = 100
"""Background releases of departed members' records at once (more wait for lock expiry)."""
MAX_RECORDED = 10_000
"""Group ids this broker knows are recorded in the coordinator (a bounded cache)."""


class ShareHost(SharePartitionsHost, Protocol):
    """What the share-group service uses of the broker (the Broker is one), with what it
    hands its share partitions."""

    @property
    def topics(self) -> TopicCache: ...
    @property
    def group_configs(self) -> GroupConfigs: ...


class ShareService:
    def __init__(self, broker: ShareHost) -> None:
        self._broker = broker
        self.groups = ShareGroups()
        self.sessions = ShareSessions()
        self.partitions = SharePartitions(broker)
        self._recorded: set[str] = set()
        self._releasing: set[asyncio.Task[None]] = set()

    async def heartbeat(self, group_id: str, beat: Heartbeat) -> HeartbeatAnswer:
        config = await self._broker.group_configs.effective(group_id)
        partitions_of: dict[str, tuple[uuid.UUID, int]] = {}
        if beat.subscribed:
            for name in beat.subscribed:
                topic = await self._broker.topics.get(name)
                if topic is not None:
                    partitions_of[name] = (topic.topic_id, topic.num_partitions)
        group = self.groups.get(group_id)
        if group is not None:
            # A snapshot: other heartbeats of the group join and leave while we await.
            others = {n for m in list(group.members.values()) for n in m.subscribed}
            for name in sorted(others - partitions_of.keys()):
                topic = await self._broker.topics.get(name)
                if topic is not None:
                    partitions_of[name] = (topic.topic_id, topic.num_partitions)
        answer, _ = self.groups.heartbeat(
            group_id, beat, config.share_session_timeout_ms, partitions_of
        )
        self._release_departed()
        if group_id not in self._recorded and answer.member_epoch > 0:
            await self._broker.coordinator.save_share_group(group_id, now_ms())
            if len(self._recorded) >= MAX_RECORDED:
                self._recorded.clear()  # only a cache of what is already stored
            self._recorded.add(group_id)
        return answer

    async def has_members(self, group_id: str) -> bool:
        """Whether the share group has live members (silent ones are expired first)."""
        group = self.groups.get(group_id)
        if group is None:
            return False
        config = await self._broker.group_configs.effective(group_id)
        self.groups.expire(group, config.share_session_timeout_ms)
        self._release_departed()
        return bool(group.members)

    def _release_departed(self) -> None:
        """Members gone from the group lose their locks at once (Kafka releases them too),
        in the background: the heartbeat that noticed does not wait for the writes."""
        gone = self.groups.take_departed()
        if not gone or len(self._releasing) >= MAX_RELEASING:
            return
        task = asyncio.get_running_loop().create_task(self._release(gone))
        self._releasing.add(task)
        task.add_done_callback(self._releasing.discard)

    async def _release(self, members: list[tuple[str, ShareMember]]) -> None:
        for group_id, member in members:
            keys = [ShareKey(str(t), p) for t, p in member.assignment]
            if not keys:
                continue
            try:
                config = await self._broker.group_configs.effective(group_id)
                await release_and_ack(self.partitions, group_id, member.member_id, config, {}, keys)
            except Exception:
                log_failure(log, "releasing the records of a member gone from %s failed", group_id)

    async def is_share_group(self, group_id: str) -> bool:
        if self.groups.get(group_id) is not None or group_id in self._recorded:
            return True
        return group_id in await self._broker.coordinator.list_share_groups()

    def forget(self, group_ids: list[str]) -> None:
        self.groups.forget(group_ids)
        for group_id in group_ids:
            self._recorded.discard(group_id)
            self.partitions.forget(group_id)
