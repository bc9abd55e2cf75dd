"""Classic members in a KIP-848 group: the online upgrade, member by member."""

from __future__ import annotations

import uuid

from hypothesis import given, settings
from hypothesis import strategies as st

from lakelog.coordinator.group_types import GroupMemberRecord, GroupRecord
from lakelog.groups import consumer_protocol, mixed
from lakelog.groups.consumer_group import (
    ConsumerGroup,
    ConsumerGroupConfig,
    HeartbeatRequest,
    TopicMeta,
)
from lakelog.groups.group import Group, GroupConfig, JoinRequest
from lakelog.util.errors import ErrorCode

CONFIG = ConsumerGroupConfig(session_timeout_ms=10_000, heartbeat_interval_ms=1000)
CLASSIC = GroupConfig(0.0, 1000, 60_000)
T = uuid.UUID(int=5)
TOPICS = {"t": TopicMeta(T, 6)}
NAMES = {T: "t"}
SUBSCRIPTION = consumer_protocol.subscription(["t"])


def classic_group(assignments: dict[str, list[int]], generation: int = 4) -> Group:
    members = tuple(
        GroupMemberRecord(
            member_id,
            None,
            member_id,
            "/h",
            30_000,
            10_000,
            (("range", SUBSCRIPTION),),
            consumer_protocol.assignment({(T, p) for p in parts}, NAMES),
        )
        for member_id, parts in assignments.items()
    )
    record = GroupRecord("g", "Stable", "consumer", "range", generation, "c0", members)
    return Group.restore(record, CLASSIC, 0.0)


class ClassicClient:
    """An eager classic consumer: gives everything up before each rejoin."""

    def __init__(self, member_id: str, owned: set[int]) -> None:
        self.member_id = member_id
        self.owned = frozenset((T, p) for p in owned)
        self.generation = 4
        self.must_rejoin = False

    def heartbeat(self, group: ConsumerGroup) -> None:
        error = mixed.heartbeat(group, self.member_id, self.generation, 0.0)
        assert error in (ErrorCode.none, ErrorCode.rebalance_in_progress), error
        self.must_rejoin = error == ErrorCode.rebalance_in_progress

    def rejoin(self, group: ConsumerGroup) -> None:
        self.owned = frozenset()
        join = JoinRequest(
            self.member_id,
            None,
            self.member_id,
            "/h",
            10_000,
            30_000,
            "consumer",
            [("range", SUBSCRIPTION)],
            require_known_member_id=True,
        )
        joined = mixed.join(group, join, TOPICS, 0.0)
        assert joined.error == ErrorCode.none, joined
        self.generation = joined.generation
        synced = mixed.sync(group, self.member_id, self.generation, NAMES)
        assert synced.error == ErrorCode.none, synced
        self.owned = frozenset(
            (T, p) for _, p in consumer_protocol.assigned_partitions(synced.assignment)
        )
        self.must_rejoin = False


class NewClient:
    def __init__(self, member_id: str) -> None:
        self.member_id = member_id
        self.epoch = 0
        self.owned: frozenset = frozenset()

    def beat(self, group: ConsumerGroup) -> None:
        if self.epoch == 0:
            req = HeartbeatRequest(
                self.member_id,
                0,
                rebalance_timeout_ms=30_000,
                subscribed_topic_names=("t",),
                owned=frozenset(),
            )
        else:
            req = HeartbeatRequest(self.member_id, self.epoch, owned=self.owned)
        result = group.heartbeat(req, TOPICS, 0.0)
        assert result.error == ErrorCode.none, result
        self.epoch = result.member_epoch
        if result.assignment is not None:
            self.owned = result.assignment


def test_upgrade_keeps_assignments_and_epochs() -> None:
    classic = classic_group({"c0": [0, 1, 2], "c1": [3, 4, 5]})
    assert mixed.can_upgrade(classic)
    group = mixed.upgrade(classic, CONFIG, TOPICS, 0.0)
    assert group.group_epoch == group.assignment_epoch == 4
    assert group.members["c0"].assigned == {(T, 0), (T, 1), (T, 2)}
    assert group.state == "Stable"
    assert mixed.heartbeat(group, "c0", 4, 0.0) == ErrorCode.none
    assert mixed.heartbeat(group, "c0", 3, 0.0) == ErrorCode.illegal_generation
    assert group.check_commit("c1", 4, {(T, 3)}) == ErrorCode.none


def test_members_are_replaced_one_by_one() -> None:
    classic = classic_group({"c0": [0, 1, 2], "c1": [3, 4, 5]})
    group = mixed.upgrade(classic, CONFIG, TOPICS, 0.0)
    c0, c1 = ClassicClient("c0", {0, 1, 2}), ClassicClient("c1", {3, 4, 5})
    n0 = NewClient("n0")
    clients = [c0, c1]
    n0.beat(group)
    assert n0.owned == frozenset()  # everything is still owned by classic members
    for _ in range(4):
        for c in clients:
            c.heartbeat(group)
            if c.must_rejoin:
                c.rejoin(group)
        n0.beat(group)
    assert len(n0.owned) == 2 and len(c0.owned) == 2 and len(c1.owned) == 2
    assert group.state == "Stable"
    assert mixed.leave(group, "c0", None) == ErrorCode.none
    n1 = NewClient("n1")
    for _ in range(4):
        c1.heartbeat(group)
        if c1.must_rejoin:
            c1.rejoin(group)
        n0.beat(group)
        n1.beat(group)
    owned = [tp for c in (c1, n0, n1) for tp in c.owned]
    assert sorted(owned) == sorted((T, p) for p in range(6))
    assert mixed.leave(group, "c1", None) == ErrorCode.none
    assert not any(m.is_classic for m in group.members.values())


def test_classic_member_errors() -> None:
    group = mixed.upgrade(classic_group({"c0": [0, 1]}), CONFIG, TOPICS, 0.0)
    other = JoinRequest("", None, "x", "/h", 10_000, 30_000, "connect", [("a", b"")], True)
    assert mixed.join(group, other, TOPICS, 0.0).error == ErrorCode.inconsistent_group_protocol
    new = JoinRequest(
        "", None, "x", "/h", 10_000, 30_000, "consumer", [("range", SUBSCRIPTION)], True
    )
    first = mixed.join(group, new, TOPICS, 0.0)
    assert first.error == ErrorCode.member_id_required and first.member_id
    assert mixed.sync(group, "nobody", 4, NAMES).error == ErrorCode.unknown_member_id
    assert mixed.heartbeat(group, "nobody", 4, 0.0) == ErrorCode.unknown_member_id
    assert mixed.leave(group, "nobody", None) == ErrorCode.unknown_member_id


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.tuples(st.sampled_from(["cbeat", "nbeat", "new", "cleave"]), st.integers(0, 2)),
        max_size=60,
    )
)
def test_mixed_groups_never_share_a_partition(ops: list[tuple[str, int]]) -> None:
    group = mixed.upgrade(
        classic_group({"c0": [0, 1], "c1": [2, 3], "c2": [4, 5]}), CONFIG, TOPICS, 0.0
    )
    classics = {f"c{i}": ClassicClient(f"c{i}", {2 * i, 2 * i + 1}) for i in range(3)}
    news: dict[str, NewClient] = {}
    for op, i in ops:
        if op == "cbeat" and f"c{i}" in classics:
            c = classics[f"c{i}"]
            c.heartbeat(group)
            if c.must_rejoin:
                c.rejoin(group)
        elif op == "cleave" and f"c{i}" in classics:
            mixed.leave(group, f"c{i}", None)
            del classics[f"c{i}"]
        elif op == "new" and f"n{i}" not in news:
            news[f"n{i}"] = NewClient(f"n{i}")
            news[f"n{i}"].beat(group)
        elif op == "nbeat" and f"n{i}" in news:
            news[f"n{i}"].beat(group)
        beliefs = [tp for c in [*classics.values(), *news.values()] for tp in c.owned]
        assert len(beliefs) == len(set(beliefs)), "two members own one partition"
    for _ in range(6):
        for c in classics.values():
            c.heartbeat(group)
            if c.must_rejoin:
                c.rejoin(group)
        for n in news.values():
            n.beat(group)
    if classics or news:
        owned = sorted(tp for c in [*classics.values(), *news.values()] for tp in c.owned)
        assert owned == sorted((T, p) for p in range(6))
        assert group.state == "Stable"


def test_downgrade_when_the_last_consumer_member_leaves() -> None:
    group = mixed.upgrade(classic_group({"c0": [0, 1, 2], "c1": [3, 4, 5]}), CONFIG, TOPICS, 0.0)
    c0, c1 = ClassicClient("c0", {0, 1, 2}), ClassicClient("c1", {3, 4, 5})
    n0 = NewClient("n0")
    for _ in range(4):
        n0.beat(group)
        for c in (c0, c1):
            c.heartbeat(group)
            if c.must_rejoin:
                c.rejoin(group)
    assert not mixed.should_downgrade(group)
    group.heartbeat(HeartbeatRequest("n0", -1), TOPICS, 0.0)
    assert not mixed.should_downgrade(group)  # the classic members have not caught up
    for c in (c0, c1):
        c.heartbeat(group)
        assert c.must_rejoin
        c.rejoin(group)
    assert mixed.should_downgrade(group)
    assert c0.generation == c1.generation == group.group_epoch
    classic = mixed.downgrade(group, CLASSIC, NAMES, 0.0)
    assert group.is_empty and group.state == "Empty"
    assert str(classic.state) == "PreparingRebalance" and set(classic.members) == {"c0", "c1"}
    assert classic.protocol_type == "consumer" and classic.generation == group.group_epoch
    kept = {
        member_id: {p for _, p in consumer_protocol.assigned_partitions(m.assignment)}
        for member_id, m in classic.members.items()
    }
    assert kept == {"c0": {p for _, p in c0.owned}, "c1": {p for _, p in c1.owned}}
    # a classic member's heartbeat now asks it to rejoin the classic way
    assert classic.heartbeat(c0.generation, "c0", None, 0.0) == ErrorCode.rebalance_in_progress
