"""The KIP-848 consumer group state machine, driven directly with fake clocks."""

from __future__ import annotations

import dataclasses
import json
import uuid
from collections.abc import Callable

from hypothesis import given, settings
from hypothesis import strategies as st

from lakelog.groups.consumer_group import (
    ConsumerGroup,
    ConsumerGroupConfig,
    HeartbeatRequest,
    HeartbeatResult,
    TopicMeta,
)
from lakelog.util.errors import ErrorCode

CONFIG = ConsumerGroupConfig(session_timeout_ms=10_000, heartbeat_interval_ms=1000)
T = uuid.UUID(int=7)
TOPICS = {"t": TopicMeta(T, 6)}


def _join(group: ConsumerGroup, member_id: str, now: float = 0.0, **kw) -> HeartbeatResult:
    fields = {"subscribed_topic_names": ("t",), "rebalance_timeout_ms": 30_000}
    fields.update(kw)
    req = HeartbeatRequest(member_id, 0, owned=frozenset(), **fields)
    return group.heartbeat(req, TOPICS, now)


class Client:
    """A well-behaved consumer: owns what it was last given, reports it, acts at once."""

    def __init__(self, member_id: str) -> None:
        self.member_id = member_id
        self.epoch = 0
        self.owned: frozenset[tuple[uuid.UUID, int]] = frozenset()
        self.full = False
        """After a lost answer a client sends its next heartbeat in full (as clients do)."""
        self.may_describe: Callable[[str], bool] | None = None
        """Its principal's DESCRIBE rights, as the broker passes them (None: no authorizer)."""

    def apply(self, result: HeartbeatResult) -> HeartbeatResult:
        assert result.error == ErrorCode.none, result
        self.epoch = result.member_epoch
        self.full = False
        if result.assignment is not None:
            self.owned = result.assignment
        return result

    def join(self, group: ConsumerGroup, topics=TOPICS, now: float = 0.0, **kw) -> HeartbeatResult:
        fields = {"subscribed_topic_names": ("t",), "rebalance_timeout_ms": 30_000}
        fields.update(kw)
        req = HeartbeatRequest(
            self.member_id, 0, owned=frozenset(), may_describe=self.may_describe, **fields
        )
        return self.apply(group.heartbeat(req, topics, now))

    def beat(self, group: ConsumerGroup, topics=TOPICS, now: float = 0.0) -> HeartbeatResult:
        result = group.heartbeat(self.request(), topics, now)
        if result.error == ErrorCode.fenced_member_epoch:
            self.owned, self.epoch = frozenset(), 0  # lost its partitions: rejoin
            return self.join(group, topics, now)
        return self.apply(result)

    def request(self) -> HeartbeatRequest:
        if not self.full:
            return HeartbeatRequest(
                self.member_id, self.epoch, owned=self.owned, may_describe=self.may_describe
            )
        return HeartbeatRequest(
            self.member_id,
            self.epoch,
            rebalance_timeout_ms=30_000,
            subscribed_topic_names=("t",),
            owned=self.owned,
        )


def _settle(group: ConsumerGroup, clients: list[Client], topics=TOPICS, rounds: int = 6) -> None:
    for _ in range(rounds):
        for c in clients:
            c.beat(group, topics)


def test_first_member_gets_everything_and_the_group_epoch() -> None:
    group = ConsumerGroup("g", CONFIG)
    a = Client("a")
    result = a.join(group)
    assert result.member_epoch == group.group_epoch == 1
    assert a.owned == {(T, p) for p in range(6)}
    assert group.state == "Stable"


def test_a_joining_member_waits_for_revocation() -> None:
    group = ConsumerGroup("g", CONFIG)
    a, b = Client("a"), Client("b")
    a.join(group)
    b.join(group)
    # b is at the new epoch but gets nothing a still owns
    assert b.epoch == 2 and b.owned == frozenset()
    assert group.state == "Reconciling"
    a.beat(group)  # told to give up three partitions, epoch unchanged
    assert a.epoch == 1 and len(a.owned) == 3
    a.beat(group)  # reports them gone: now at epoch 2
    assert a.epoch == 2
    b.beat(group)
    assert len(b.owned) == 3 and not (a.owned & b.owned)
    assert group.state == "Stable"


def test_epoch_fencing_and_the_lost_answer() -> None:
    group = ConsumerGroup("g", CONFIG)
    a, b = Client("a"), Client("b")
    a.join(group)
    b.join(group)
    _settle(group, [a, b])
    stale = HeartbeatRequest("a", a.epoch + 1, owned=a.owned)
    assert group.heartbeat(stale, TOPICS, 0).error == ErrorCode.fenced_member_epoch
    c = Client("c")
    c.join(group)
    _settle(group, [a, b, c])
    # a lost our last answer: the previous epoch is accepted while it owns no more
    previous = group.members["a"].previous_epoch
    lost = HeartbeatRequest("a", previous, owned=a.owned)
    assert group.heartbeat(lost, TOPICS, 0).error == ErrorCode.none
    unknown = HeartbeatRequest("zz", 3, owned=frozenset())
    assert group.heartbeat(unknown, TOPICS, 0).error == ErrorCode.unknown_member_id


def test_leave_and_session_expiry_free_partitions() -> None:
    group = ConsumerGroup("g", CONFIG)
    a, b = Client("a"), Client("b")
    a.join(group)
    b.join(group)
    _settle(group, [a, b])
    left = group.heartbeat(HeartbeatRequest("b", -1), TOPICS, 0)
    assert left.member_epoch == -1
    a.beat(group)
    assert len(a.owned) == 6
    b = Client("b")
    b.join(group, now=1.0)
    _settle(group, [a, b])
    assert len(b.owned) == 3
    assert group.tick(5.0) is False
    a.beat(group, now=9.0)
    assert group.tick(12.0) is True  # b's session (10 s from t=1) ran out
    assert set(group.members) == {"a"}
    a.beat(group, now=12.0)
    assert len(a.owned) == 6


def test_a_member_that_does_not_revoke_is_removed_after_its_rebalance_timeout() -> None:
    group = ConsumerGroup("g", CONFIG)
    a, b = Client("a"), Client("b")
    a.join(group, rebalance_timeout_ms=2000)
    b.join(group)
    group.heartbeat(HeartbeatRequest("a", a.epoch, owned=a.owned), TOPICS, 0.0)  # never revokes
    group.heartbeat(HeartbeatRequest("a", a.epoch, owned=a.owned), TOPICS, 1.0)
    b.beat(group, now=1.0)
    assert group.tick(2.5) is True and "a" not in group.members
    b.beat(group, now=2.5)
    assert len(b.owned) == 6


def test_static_member_returns_to_its_partitions_without_a_new_epoch() -> None:
    group = ConsumerGroup("g", CONFIG)
    a, b = Client("a"), Client("b")
    a.join(group, instance_id="ia")
    b.join(group, instance_id="ib")
    _settle(group, [a, b])
    epoch, a_owned = group.group_epoch, a.owned
    left = group.heartbeat(HeartbeatRequest("a", -2, instance_id="ia"), TOPICS, 1.0)
    assert left.member_epoch == -2
    taken = _join(group, "a2", instance_id="ib")
    assert taken.error == ErrorCode.unreleased_instance_id
    a2 = Client("a2")
    a2.join(group, instance_id="ia", now=2.0)
    assert a2.owned == a_owned and group.group_epoch == epoch
    assert "a" not in group.members and group.state == "Stable"


def test_static_member_gone_past_its_session_is_replaced() -> None:
    group = ConsumerGroup("g", CONFIG)
    a, b = Client("a"), Client("b")
    a.join(group, instance_id="ia")
    b.join(group)
    _settle(group, [a, b])
    group.heartbeat(HeartbeatRequest("a", -2, instance_id="ia"), TOPICS, 1.0)
    b.beat(group, now=9.0)
    assert group.tick(10.5) is True
    b.beat(group, now=10.5)
    assert len(b.owned) == 6


def test_regex_subscription_follows_new_topics() -> None:
    group = ConsumerGroup("g", CONFIG)
    a = Client("a")
    t2 = uuid.UUID(int=8)
    a.join(group, subscribed_topic_names=None, subscribed_topic_regex="t.*")
    assert len(a.owned) == 6
    topics = {**TOPICS, "t2": TopicMeta(t2, 2), "other": TopicMeta(uuid.UUID(int=9), 1)}
    a.beat(group, topics)
    assert {tp for tp in a.owned if tp[0] == t2} == {(t2, 0), (t2, 1)}
    assert len(a.owned) == 8


def test_regex_matches_only_what_the_principal_may_describe() -> None:
    """Kafka filters a regex subscription's topics by DESCRIBE: a member whose principal
    may not describe a matching topic never gets (or sees) its partitions, another member
    with the same regex and the right does; a later grant takes effect at its next
    heartbeat, and the filter survives the group's record."""
    t2 = uuid.UUID(int=8)
    topics = {**TOPICS, "t2": TopicMeta(t2, 2)}
    group = ConsumerGroup("g", CONFIG)
    a, b = Client("a"), Client("b")
    a.may_describe = lambda name: name == "t"
    b.may_describe = lambda name: True
    a.join(group, topics, subscribed_topic_names=None, subscribed_topic_regex="t.*")
    b.join(group, topics, subscribed_topic_names=None, subscribed_topic_regex="t.*")
    for now in range(1, 6):
        a.beat(group, topics, float(now))
        b.beat(group, topics, float(now))
    assert a.owned and all(topic == T for topic, _ in a.owned)
    assert {(t2, 0), (t2, 1)} <= b.owned
    assert len(a.owned | b.owned) == 8 and not a.owned & b.owned
    assert group.subscribed_topics(group.members["a"]) == {"t"}

    again = ConsumerGroup.restore("g", json.loads(json.dumps(group.document())), 1, CONFIG, 6.0)
    assert again.subscribed_topics(again.members["a"]) == {"t"}

    a.may_describe = None  # granted (here: the authorizer switched off)
    for now in range(6, 12):
        a.beat(group, topics, float(now))
        b.beat(group, topics, float(now))
    assert group.subscribed_topics(group.members["a"]) == {"t", "t2"}
    assert len(a.owned | b.owned) == 8 and not a.owned & b.owned


def test_errors_for_bad_requests() -> None:
    group = ConsumerGroup("g", CONFIG)
    assert _join(group, "a", server_assignor="nope").error == ErrorCode.unsupported_assignor
    bad_regex = _join(group, "a", subscribed_topic_regex="(")
    assert bad_regex.error == ErrorCode.invalid_regular_expression
    no_sub = HeartbeatRequest("a", 0, rebalance_timeout_ms=1000, owned=frozenset())
    assert group.heartbeat(no_sub, TOPICS, 0).error == ErrorCode.invalid_request


def test_offset_commit_by_member_epoch() -> None:
    group = ConsumerGroup("g", CONFIG)
    assert group.check_commit("", -1, []) == ErrorCode.none
    # A KIP-1082 client names its own member id even when it only assign()ed partitions.
    assert group.check_commit("own-id", -1, []) == ErrorCode.none
    a, b = Client("a"), Client("b")
    a.join(group)
    assert group.check_commit("", -1, []) == ErrorCode.unknown_member_id
    assert group.check_commit("own-id", -1, []) == ErrorCode.unknown_member_id
    assert group.check_commit("a", a.epoch, a.owned) == ErrorCode.none
    assert group.check_commit("a", a.epoch + 1, a.owned) == ErrorCode.stale_member_epoch
    b.join(group)
    _settle(group, [a, b])
    old = group.members["a"].previous_epoch
    assert group.check_commit("a", old, a.owned) == ErrorCode.none
    assert group.check_commit("a", old, b.owned) == ErrorCode.stale_member_epoch
    assert group.check_fetch(None, -1) == ErrorCode.none
    assert group.check_fetch("zz", 1) == ErrorCode.unknown_member_id


def test_the_document_round_trips() -> None:
    group = ConsumerGroup("g", CONFIG)
    a, b = Client("a"), Client("b")
    a.join(group, instance_id="ia", subscribed_topic_regex="t")
    b.join(group)
    a.beat(group)
    doc = json.loads(json.dumps(group.document()))
    copy = ConsumerGroup.restore("g", doc, group.revision, CONFIG, 100.0)
    assert copy.document() == group.document()
    assert copy.state == group.state == "Reconciling"
    # the restored group carries on where the first left off
    a.beat(copy, now=100.0)
    _settle(copy, [a, b])
    assert copy.state == "Stable" and not (a.owned & b.owned)


OPS = st.lists(
    st.tuples(
        st.sampled_from(["join", "beat", "beat", "beat", "leave", "expire", "grow", "lose"]),
        st.integers(0, 4),
    ),
    max_size=80,
)


@settings(max_examples=1000, deadline=None)
@given(OPS, st.sampled_from(["uniform", "range"]))
def test_no_partition_is_ever_owned_twice(ops: list[tuple[str, int]], assignor: str) -> None:
    """Random joins, heartbeats, leaves, expiries, lost answers and topic growth: no two
    clients ever believe they own one partition, nor does the coordinator think so; with
    quiet heartbeats the group settles on its target covering every partition."""
    group = ConsumerGroup("g", CONFIG)
    topics = dict(TOPICS)
    clients: dict[str, Client] = {}
    for op, i in ops:
        name = f"m{i}"
        client = clients.get(name)
        if op == "join" and client is None:
            clients[name] = Client(name)
            clients[name].join(group, topics, server_assignor=assignor)
        elif op in ("beat", "lose") and client is not None:
            if op == "beat":
                client.beat(group, topics)
            else:
                result = group.heartbeat(client.request(), topics, 0.0)
                assert result.error in (ErrorCode.none, ErrorCode.fenced_member_epoch), result
                client.full = True  # the answer was lost
        elif op == "leave" and client is not None:
            group.heartbeat(HeartbeatRequest(name, -1), topics, 0.0)
            del clients[name]
        elif op == "expire" and client is not None:
            group.members[name].session_deadline = -1.0
            group.tick(0.0)
            del clients[name]
        elif op == "grow":
            topics = {"t": TopicMeta(T, topics["t"].partitions + 1)}
        beliefs = [tp for c in clients.values() for tp in c.owned]
        assert len(beliefs) == len(set(beliefs)), "two clients own one partition"
        held = [tp for m in group.members.values() for tp in m.owns]
        assert len(held) == len(set(held)), "the coordinator gave a partition twice"
        for c in clients.values():
            assert c.owned <= group.members[c.member_id].owns
    _settle(group, list(clients.values()), topics, rounds=4)
    if clients:
        assert group.state == "Stable"
        covered = {tp for c in clients.values() for tp in c.owned}
        assert covered == {(T, p) for p in range(topics["t"].partitions)}


def test_transactional_commit_by_member_epoch() -> None:
    group = ConsumerGroup("g", CONFIG)
    a = Client("a")
    a.join(group)
    assert group.check_txn_commit("", -1) == ErrorCode.none
    assert group.check_txn_commit("a", a.epoch) == ErrorCode.none
    assert group.check_txn_commit("zz", a.epoch) == ErrorCode.unknown_member_id
    assert group.check_txn_commit("a", a.epoch + 1) == ErrorCode.illegal_generation


def test_group_consumer_max_size() -> None:
    group = ConsumerGroup("g", dataclasses.replace(CONFIG, max_size=2))
    assert _join(group, "a").error == ErrorCode.none
    assert _join(group, "b", instance_id="i-b").error == ErrorCode.none
    refused = _join(group, "c")
    assert refused.error == ErrorCode.group_max_size_reached
    assert "maximum size of 2" in (refused.message or "")
    assert "c" not in group.members
    # a member already in the group rejoins; a static member that left comes back
    assert _join(group, "a").error == ErrorCode.none
    leave = HeartbeatRequest("b", -2, instance_id="i-b")
    assert group.heartbeat(leave, TOPICS, 1.0).error == ErrorCode.none
    assert _join(group, "b2", instance_id="i-b").error == ErrorCode.none
