"""The KIP-848 groups a broker coordinates, against a real SQLite coordinator: every
change is saved before the member hears of it, so another broker (or this one after a
restart) takes the group over where it was; a stale copy never overwrites a newer one."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from lakelog.config import Settings
from lakelog.coordinator import BatchCoordinator, open_coordinator
from lakelog.coordinator.topic_types import CreateTopicRequest
from lakelog.groups.consumer_group import HeartbeatRequest
from lakelog.groups.consumer_groups import ConsumerGroups
from lakelog.groups.group_configs import GroupConfigs
from lakelog.server.topics import TopicCache
from lakelog.util.errors import ErrorCode


@pytest.fixture
async def coordinator(tmp_path: Path) -> AsyncIterator[BatchCoordinator]:
    instance = open_coordinator(f"sqlite:///{tmp_path / 'c.sqlite3'}")
    await instance.start()
    await instance.create_topics([CreateTopicRequest("t", 4, 1)])
    yield instance
    await instance.close()


class NoClassic:
    """The classic side of the group coordinator: no classic groups, owns everything."""

    async def get(self, group_id: str, *, create: bool) -> Any:
        return None

    async def owns(self, group_id: str) -> bool:
        return True


def broker_groups(coordinator: BatchCoordinator) -> ConsumerGroups:
    broker = SimpleNamespace(
        settings=Settings(),
        coordinator=coordinator,
        topics=TopicCache(coordinator),
        group_configs=GroupConfigs(coordinator, Settings()),
    )
    return ConsumerGroups(broker, NoClassic())  # type: ignore[arg-type]


def join(member_id: str) -> HeartbeatRequest:
    return HeartbeatRequest(
        member_id,
        0,
        rebalance_timeout_ms=30_000,
        subscribed_topic_names=("t",),
        owned=frozenset(),
    )


async def test_another_broker_takes_the_group_over(coordinator: BatchCoordinator) -> None:
    first = broker_groups(coordinator)
    a = await first.heartbeat("g", join("a"))
    assert a.error == ErrorCode.none and len(a.assignment or ()) == 4
    b = await first.heartbeat("g", join("b"))
    assert b.error == ErrorCode.none and b.assignment == frozenset()  # a still owns all

    second = broker_groups(coordinator)  # e.g. the group's new owner after a restart
    again = await second.heartbeat("g", HeartbeatRequest("a", a.member_epoch, owned=a.assignment))
    assert again.error == ErrorCode.none and len(again.assignment or ()) == 2
    kept = again.assignment or frozenset()
    done = await second.heartbeat("g", HeartbeatRequest("a", a.member_epoch, owned=kept))
    assert done.member_epoch == b.member_epoch
    b2 = await second.heartbeat("g", HeartbeatRequest("b", b.member_epoch, owned=frozenset()))
    assert len(b2.assignment or ()) == 2 and not (b2.assignment or frozenset()) & kept

    # the first broker's copy is stale: its next change is refused and the copy dropped
    stale = await first.heartbeat("g", HeartbeatRequest("a", -1))
    assert stale.error == ErrorCode.coordinator_not_available
    reloaded = await first.heartbeat("g", HeartbeatRequest("a", -1))
    assert reloaded.error == ErrorCode.none and reloaded.member_epoch == -1
    record = await coordinator.load_consumer_group("g")
    assert record is not None and '"member_id":"a"' not in record.document


async def test_failed_heartbeats_leave_nothing_behind(coordinator: BatchCoordinator) -> None:
    groups = broker_groups(coordinator)
    bad = await groups.heartbeat("g", HeartbeatRequest("a", 3, owned=frozenset()))
    assert bad.error == ErrorCode.unknown_member_id
    assert await coordinator.load_consumer_group("g") is None
    assert groups.known() == []
    assert await groups.get("g") is None


class OneClassic(NoClassic):
    """A Stable classic group "g" of two members, until it is retired."""

    def __init__(self) -> None:
        from lakelog.coordinator.group_types import GroupMemberRecord, GroupRecord
        from lakelog.groups import consumer_protocol
        from lakelog.groups.group import Group, GroupConfig

        members = tuple(
            GroupMemberRecord(
                m,
                None,
                m,
                "/h",
                30_000,
                10_000,
                (("range", consumer_protocol.subscription(["t"])),),
                b"",
            )
            for m in ("c0", "c1")
        )
        record = GroupRecord("g", "Stable", "consumer", "range", 7, "c0", members)
        self.group: Any = Group.restore(record, GroupConfig(0.0, 1000, 60_000), 0.0)
        self.retired = False

    async def get(self, group_id: str, *, create: bool) -> Any:
        return None if self.retired else self.group

    async def retire(self, group: Any) -> None:
        self.retired = True


async def test_upgrade_replaces_an_empty_consumer_record(coordinator: BatchCoordinator) -> None:
    plain = broker_groups(coordinator)
    n = await plain.heartbeat("g", join("n"))
    await plain.heartbeat("g", HeartbeatRequest("n", -1))
    empty = await coordinator.load_consumer_group("g")
    assert empty is not None and empty.state == "Empty"

    classic = OneClassic()
    groups = ConsumerGroups(plain._broker, classic)  # type: ignore[arg-type]
    upgraded = await groups.heartbeat("g", join("n2"))
    assert upgraded.error == ErrorCode.none and classic.retired
    assert upgraded.member_epoch == 8 > n.member_epoch  # the classic generation, bumped
    record = await coordinator.load_consumer_group("g")
    assert record is not None and record.revision > empty.revision
    group = await groups.get("g")
    assert group is not None and {m.member_id for m in group.members.values()} == {
        "c0",
        "c1",
        "n2",
    }
