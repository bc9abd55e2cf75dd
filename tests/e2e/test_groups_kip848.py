"""KIP-848 consumer groups (`group.protocol=consumer`) with confluent-kafka consumers.

- a group grows from one member to three and shrinks back to one while a producer keeps
  writing, and every record is consumed exactly once across the members;
- a static member that closes and comes back within the session timeout gets its own
  partitions again, with no new group epoch and no callbacks on the others;
- a regex subscription picks up a topic created after the member joined;
- committed offsets and the group itself survive a broker restart;
- a member that goes silent loses its partitions once its session times out;
- a classic group (librdkafka, eager range assignor) is upgraded member by member under
  load: each classic member is replaced by a consumer-protocol one, the mixed group keeps
  one owner per partition, and every record is consumed exactly once;
- and back: when the last consumer-protocol member leaves, the classic members go on as a
  classic group;
- a consumer that assign()s partitions itself commits as Kafka allows (only while the
  group has no members);
- ListGroups tells classic and consumer groups apart, ConsumerGroupDescribe and
  DescribeGroups describe consumer groups, and the protocol's errors on the wire.
"""

from __future__ import annotations

import datetime
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from e2e_fixtures import BrokerFactory, running_broker
from e2e_harness import BrokerProcess, create_topic, wait_until
from e2e_wire import WireClient, request_class
from group_clients import (
    all_seen,
    exactly_once_problems,
    produce,
    stop_all,
    unique,
    wait_assignment,
    wait_consumed,
)
from kip848_clients import Kip848Member

PARTITIONS = 6
TIMEOUT_S = 60.0
ENV = {
    "GROUP_INITIAL_REBALANCE_DELAY_MS": 300,
    "GROUP_MIN_SESSION_TIMEOUT_MS": 1000,
    "GROUP_CONSUMER_HEARTBEAT_INTERVAL_MS": 500,
    "GROUP_CONSUMER_SESSION_TIMEOUT_MS": 15_000,
}
HEARTBEAT, DESCRIBE = 68, 69
NONE, UNKNOWN_MEMBER_ID, FENCED_MEMBER_EPOCH, UNSUPPORTED_ASSIGNOR = 0, 25, 110, 112
GROUP_SUBSCRIBED_TO_TOPIC, GROUP_ID_NOT_FOUND, STALE_MEMBER_EPOCH = 86, 69, 113

pytestmark = pytest.mark.timeout(240)


@pytest.fixture(scope="module")
def kip848_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    with running_broker(Path(tmp_path_factory.mktemp("kip848")) / "data", ENV, "kip848") as b:
        yield b


@pytest.fixture
def broker(kip848_broker: BrokerProcess) -> Iterator[BrokerProcess]:
    """The module's broker; a traceback in its log during the test fails the test."""
    if not kip848_broker.alive():
        pytest.fail(f"the broker died earlier\n{kip848_broker.log_tail()}")
    before = len(kip848_broker.tracebacks())
    yield kip848_broker
    new = kip848_broker.tracebacks()[before:]
    if new:
        pytest.fail("the broker logged tracebacks during the test:\n" + "\n\n".join(new))


class Load:
    """Produces small batches round-robin until stopped; remembers where each landed."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        self.bootstrap, self.topic = bootstrap, topic
        self.produced: dict[tuple[int, int], bytes] = {}
        self.batches = 0
        self._stop = threading.Event()
        self.error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        try:
            while not self._stop.is_set():
                tag = f"load-{self.batches}"
                self.produced.update(produce(self.bootstrap, self.topic, PARTITIONS, 60, tag))
                self.batches += 1
                self._stop.wait(0.2)
        except BaseException as exc:
            self.error = exc

    def __enter__(self) -> Load:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def stop(self) -> dict[tuple[int, int], bytes]:
        self._stop.set()
        self._thread.join(TIMEOUT_S)
        assert self.error is None, self.error
        return self.produced


def member(broker: BrokerProcess, topic: str, group: str, name: str, **kw: Any) -> Kip848Member:
    return Kip848Member(broker.bootstrap, topic, group, name, **kw)


def more_load(load: Any) -> None:
    """Wait until the background producer has sent two more batches."""
    batches = load.batches
    wait_until(lambda: load.batches >= batches + 2, TIMEOUT_S, "more load")


def assert_exactly_once(produced: Any, members: list[Any]) -> None:
    """Every record produced was consumed once across the members, none twice."""
    wait_consumed(members, len(produced), TIMEOUT_S)
    time.sleep(1.0)  # anything consumed twice would show up now
    problems = exactly_once_problems(produced, all_seen(members))
    assert problems == [], "\n".join(problems + [m.describe() for m in members])


def describe(broker: BrokerProcess, group: str) -> Any:
    """The group as ConsumerGroupDescribe v1 reports it."""
    m = request_class(DESCRIBE, 1)
    with WireClient(broker.port) as wire:
        resp = wire.request(
            DESCRIBE,
            1,
            m.ConsumerGroupDescribeRequest(group_ids=(group,), include_authorized_operations=False),
        )
    [described] = resp.groups
    return described


def test_group_grows_and_shrinks_under_load_exactly_once(broker: BrokerProcess) -> None:
    topic, group = unique("grow"), unique("g848")
    create_topic(broker.bootstrap, topic, PARTITIONS)
    members: list[Kip848Member] = []
    try:
        with Load(broker.bootstrap, topic) as load:
            a = member(broker, topic, group, "a").start()
            members.append(a)
            wait_consumed(members, 120, TIMEOUT_S)
            b = member(broker, topic, group, "b", remote_assignor="uniform").start()
            members.append(b)
            wait_assignment([a, b], PARTITIONS, TIMEOUT_S, "a and b share the partitions")
            c = member(broker, topic, group, "c").start()
            members.append(c)
            wait_assignment([a, b, c], PARTITIONS, TIMEOUT_S, "three members")
            # Covering every partition is not the end of the rebalance: a partition moving
            # from a to c is a's until a releases it (a 3, b 2, c 1), so wait for the
            # settled, even spread, which a busy machine may take a few heartbeats to reach.
            wait_until(
                lambda: all(len(m.assignment) == 2 for m in (a, b, c)),
                TIMEOUT_S,
                "two partitions each",
            )
            wait_consumed(members, sum(m.seen_count() for m in members) + 120, TIMEOUT_S)
            b.stop()
            wait_assignment([a, c], PARTITIONS, TIMEOUT_S, "b left: a and c")
            c.stop()
            wait_assignment([a], PARTITIONS, TIMEOUT_S, "c left: a alone")
            more_load(load)
        assert_exactly_once(load.produced, members)
        assert not a.commit_failures, a.commit_failures
    finally:
        stop_all(m for m in members if not m.closed.is_set())


def test_static_member_rejoins_without_reassignment(broker: BrokerProcess) -> None:
    topic, group = unique("static"), unique("g848")
    create_topic(broker.bootstrap, topic, PARTITIONS)
    members = [
        member(
            broker, topic, group, name, instance_id=f"instance-{name}", remote_assignor="range"
        ).start()
        for name in ("a", "b", "c")
    ]
    a, b, c = members
    try:
        wait_until(
            lambda: [m.assignment for m in members] == [{0, 1}, {2, 3}, {4, 5}],
            TIMEOUT_S,
            "range: contiguous partitions in instance id order",
        )
        before = wait_assignment(members, PARTITIONS, TIMEOUT_S)
        wait_until(lambda: describe(broker, group).group_state == "Stable", TIMEOUT_S, "Stable")
        assert describe(broker, group).assignor_name == "range"
        epoch = describe(broker, group).group_epoch
        events = {m.name: m.event_count() for m in (b, c)}
        a.stop()
        again = member(
            broker, topic, group, "a-again", instance_id="instance-a", remote_assignor="range"
        ).start()
        members.append(again)
        wait_until(lambda: again.assignment == before["a"], TIMEOUT_S, "a's partitions back")
        described = describe(broker, group)
        assert described.group_epoch == epoch
        assert {m.instance_id for m in described.members} == {
            "instance-a",
            "instance-b",
            "instance-c",
        }
        assert {m.name: m.event_count() for m in (b, c)} == events
        assert b.assignment == before["b"] and c.assignment == before["c"]
    finally:
        stop_all(m for m in members if not m.closed.is_set())


def test_regex_subscription_picks_up_a_new_topic(broker: BrokerProcess) -> None:
    prefix, group = unique("rx"), unique("g848")
    first, second = f"{prefix}-first", f"{prefix}-second"
    create_topic(broker.bootstrap, first, 2)
    create_topic(broker.bootstrap, f"other-{prefix}", 1)
    produce(broker.bootstrap, f"other-{prefix}", 1, 10, "other")
    produce(broker.bootstrap, first, 2, 40, "first")
    m = member(broker, f"^{prefix}-.*", group, "rx").start()
    try:
        wait_consumed([m], 40, TIMEOUT_S)
        create_topic(broker.bootstrap, second, 3)
        produce(broker.bootstrap, second, 3, 30, "second")

        def picked_up() -> bool:
            with m.lock:
                return len(m.by_topic.get(second, [])) >= 30

        wait_until(picked_up, TIMEOUT_S, "records of the topic created later")
        with m.lock:
            assert set(m.by_topic) == {first, second}
            assert len(m.by_topic[first]) == 40 and len(m.by_topic[second]) == 30
        [described] = describe(broker, group).members
        # librdkafka sends the regex itself: the broker resolved it (server-side regex)
        assert f"^{prefix}-.*" in (described.subscribed_topic_regex or "")
        assert described.subscribed_topic_names == ()
    finally:
        stop_all([m])


def test_offsets_and_group_survive_a_broker_restart(broker_factory: BrokerFactory) -> None:
    broker = broker_factory(env=ENV)
    topic, group = unique("restart"), unique("g848")
    create_topic(broker.bootstrap, topic, PARTITIONS)
    produced = produce(broker.bootstrap, topic, PARTITIONS, 300, "before")
    a = member(broker, topic, group, "a").start()
    members = [a]
    try:
        wait_consumed(members, 300, TIMEOUT_S)
        wait_until(lambda: describe(broker, group).group_state == "Stable", TIMEOUT_S, "Stable")
        before = describe(broker, group)
        broker.restart()
        produced.update(produce(broker.bootstrap, topic, PARTITIONS, 300, "after"))
        wait_consumed(members, 600, TIMEOUT_S)
        after = describe(broker, group)
        # the restarted broker resumed the group from the batch coordinator
        assert after.group_epoch == before.group_epoch
        assert [m.member_id for m in after.members] == [m.member_id for m in before.members]
        a.stop()
        produced.update(produce(broker.bootstrap, topic, PARTITIONS, 120, "later"))
        b = member(broker, topic, group, "b").start()
        members.append(b)
        wait_consumed([b], 120, TIMEOUT_S)
        time.sleep(1.0)
        problems = exactly_once_problems(produced, all_seen(members))
        assert problems == [], "\n".join(problems + [m.describe() for m in members])
    finally:
        stop_all(m for m in members if not m.closed.is_set())


def test_list_and_describe_show_both_kinds(broker: BrokerProcess) -> None:
    from confluent_kafka import ConsumerGroupType
    from confluent_kafka.admin import AdminClient

    topic, group, classic = unique("kinds"), unique("g848"), unique("classic")
    create_topic(broker.bootstrap, topic, 2)
    m = member(broker, topic, group, "k").start()
    try:
        wait_assignment([m], 2, TIMEOUT_S)
        from group_clients import ConfluentMember

        old = ConfluentMember(broker.bootstrap, topic, classic, "old").start()
        try:
            wait_assignment([old], 2, TIMEOUT_S)
            admin = AdminClient({"bootstrap.servers": broker.bootstrap})

            def listed(types: set[Any]) -> set[str]:
                result = admin.list_consumer_groups(types=types).result(TIMEOUT_S)
                return {g.group_id for g in result.valid}

            assert group in listed({ConsumerGroupType.CONSUMER})
            assert classic not in listed({ConsumerGroupType.CONSUMER})
            assert classic in listed({ConsumerGroupType.CLASSIC})
            assert group not in listed({ConsumerGroupType.CLASSIC})
        finally:
            stop_all([old])
        described = describe(broker, group)
        assert described.error_code == NONE and described.assignor_name == "uniform"
        [one] = described.members
        assert one.client_id == "k" and one.member_epoch == described.assignment_epoch
        assert sorted(one.assignment.topic_partitions[0].partitions) == [0, 1]
        assert one.assignment.topic_partitions[0].topic_name == topic
        d = request_class(15, 5)
        with WireClient(broker.port) as wire:
            resp = wire.request(
                15,
                5,
                d.DescribeGroupsRequest(
                    groups=(group, classic), include_authorized_operations=False
                ),
            )
        kinds = {g.group_id: g.protocol_type for g in resp.groups}
        assert kinds == {group: "consumer", classic: "consumer"}
        [cg] = [g for g in resp.groups if g.group_id == group]
        assert cg.group_state == "Stable" and cg.protocol_data == "uniform"
        assert len(cg.members) == 1 and cg.members[0].member_assignment
        od = request_class(47, 0)
        body = od.OffsetDeleteRequest(
            group_id=group,
            topics=(
                od.OffsetDeleteRequestTopic(
                    name=topic, partitions=(od.OffsetDeleteRequestPartition(partition_index=0),)
                ),
            ),
        )
        with WireClient(broker.port) as wire:
            deleted = wire.request(47, 0, body)
        assert deleted.topics[0].partitions[0].error_code == GROUP_SUBSCRIBED_TO_TOPIC
    finally:
        stop_all([m])


def test_protocol_errors_on_the_wire(broker: BrokerProcess) -> None:
    """Raw requests: join, fencing, unknown members, assignors, OffsetCommit v9 and
    OffsetFetch v9 by member epoch, server-side regex, leave."""
    prefix, group = unique("wire"), unique("g848")
    create_topic(broker.bootstrap, f"{prefix}-a", 2)
    m = request_class(HEARTBEAT, 1)
    member_id = uuid.uuid4().hex

    def beat(wire: WireClient, epoch: int, **kw: Any) -> Any:
        fields: dict[str, Any] = {"topic_partitions": None, "member_id": member_id}
        fields.update(kw)
        body = m.ConsumerGroupHeartbeatRequest(group_id=group, member_epoch=epoch, **fields)
        return wire.request(HEARTBEAT, 1, body)

    join = {"rebalance_timeout": datetime.timedelta(seconds=30), "topic_partitions": ()}
    with WireClient(broker.port) as wire:
        bad = beat(wire, 0, server_assignor="sticky-nope", subscribed_topic_names=("x",), **join)
        assert bad.error_code == UNSUPPORTED_ASSIGNOR
        joined = beat(wire, 0, subscribed_topic_regex=f"{prefix}-.*", **join)
        assert joined.error_code == NONE and joined.member_epoch >= 1
        assert joined.heartbeat_interval.total_seconds() == 0.5
        [tps] = joined.assignment.topic_partitions
        assert sorted(tps.partitions) == [0, 1]
        epoch = joined.member_epoch
        assert beat(wire, epoch + 5).error_code == FENCED_MEMBER_EPOCH
        other = beat(wire, epoch, member_id=uuid.uuid4().hex)
        assert other.error_code == UNKNOWN_MEMBER_ID

        # offsets by member epoch
        def commit(member: str, member_epoch: int) -> int:
            c = request_class(8, 9)
            body = c.OffsetCommitRequest(
                group_id=group,
                generation_id_or_member_epoch=member_epoch,
                member_id=member,
                group_instance_id=None,
                topics=(
                    c.OffsetCommitRequestTopic(
                        name=f"{prefix}-a",
                        partitions=(
                            c.OffsetCommitRequestPartition(
                                partition_index=0,
                                committed_offset=1,
                                committed_leader_epoch=-1,
                                committed_metadata=None,
                            ),
                        ),
                    ),
                ),
            )
            return int(wire.request(8, 9, body).topics[0].partitions[0].error_code)

        assert commit(member_id, epoch) == NONE
        assert commit(member_id, epoch + 1) == STALE_MEMBER_EPOCH
        assert commit(uuid.uuid4().hex, epoch) == UNKNOWN_MEMBER_ID
        assert commit("", -1) == UNKNOWN_MEMBER_ID  # an admin commit to a live group
        of = request_class(9, 9)

        def fetch_error(member: str | None, member_epoch: int) -> int:
            body = of.OffsetFetchRequest(
                groups=(
                    of.OffsetFetchRequestGroup(
                        group_id=group, member_id=member, member_epoch=member_epoch, topics=None
                    ),
                ),
                require_stable=False,
            )
            return int(wire.request(9, 9, body).groups[0].error_code)

        assert fetch_error(member_id, epoch) == NONE
        assert fetch_error(None, -1) == NONE
        assert fetch_error(member_id, epoch + 3) == STALE_MEMBER_EPOCH
        create_topic(broker.bootstrap, f"{prefix}-b", 1)

        current = [epoch]

        def sees_new_topic() -> Any:
            resp = beat(wire, current[0])
            assert resp.error_code == NONE, resp
            current[0] = resp.member_epoch
            if resp.assignment is None:
                return None
            return resp if len(resp.assignment.topic_partitions) == 2 else None

        grown = wait_until(sees_new_topic, TIMEOUT_S, "the regex to match the new topic")
        assert grown.member_epoch > epoch
        left = beat(wire, -1)
        assert left.error_code == NONE and left.member_epoch == -1
    assert describe(broker, group).group_state == "Empty"


@pytest.mark.parametrize("assignor", ["range", "cooperative-sticky"])
def test_classic_group_is_upgraded_member_by_member(broker: BrokerProcess, assignor: str) -> None:
    from group_clients import ConfluentMember

    topic, group = unique("upgrade"), unique("g848")
    create_topic(broker.bootstrap, topic, PARTITIONS)
    classic = [
        ConfluentMember(broker.bootstrap, topic, group, f"c{i}", assignor=assignor)
        for i in range(3)
    ]
    members: list[Any] = []
    try:
        with Load(broker.bootstrap, topic) as load:
            for c in classic:
                members.append(c.start())
            wait_assignment(classic, PARTITIONS, TIMEOUT_S, "the classic group")
            current: list[Any] = list(classic)
            for i, old in enumerate(classic):
                new = member(broker, topic, group, f"n{i}").start()
                members.append(new)
                current.append(new)
                wait_assignment(current, PARTITIONS, TIMEOUT_S, f"n{i} joined")
                described = describe(broker, group)
                assert described.error_code == NONE
                types = sorted(m.member_type for m in described.members)
                assert types == sorted([0] * (3 - i) + [1] * (i + 1))
                old.stop()
                current.remove(old)
                wait_assignment(current, PARTITIONS, TIMEOUT_S, f"c{i} left")
            more_load(load)
        assert_exactly_once(load.produced, members)
        assert all(m.member_type == 1 for m in describe(broker, group).members)
    finally:
        stop_all(m for m in members if not m.closed.is_set())


def test_group_is_downgraded_when_the_last_consumer_member_leaves(broker: BrokerProcess) -> None:
    from confluent_kafka import ConsumerGroupType
    from confluent_kafka.admin import AdminClient
    from group_clients import ConfluentMember

    topic, group = unique("downgrade"), unique("g848")
    create_topic(broker.bootstrap, topic, PARTITIONS)
    classic = [ConfluentMember(broker.bootstrap, topic, group, f"c{i}") for i in range(2)]
    members: list[Any] = []
    try:
        with Load(broker.bootstrap, topic) as load:
            members += [c.start() for c in classic]
            wait_assignment(classic, PARTITIONS, TIMEOUT_S, "the classic group")
            new = member(broker, topic, group, "n").start()
            members.append(new)
            wait_assignment([*classic, new], PARTITIONS, TIMEOUT_S, "the mixed group")
            new.stop()
            wait_assignment(classic, PARTITIONS, TIMEOUT_S, "the classic group again")
            admin = AdminClient({"bootstrap.servers": broker.bootstrap})
            listed = admin.list_consumer_groups(types={ConsumerGroupType.CLASSIC}).result(30)
            assert group in {g.group_id for g in listed.valid}
            assert describe(broker, group).error_code == GROUP_ID_NOT_FOUND
            more_load(load)
        assert_exactly_once(load.produced, members)
    finally:
        stop_all(m for m in members if not m.closed.is_set())


def test_a_silent_member_loses_its_partitions_after_the_session_timeout(
    broker_factory: BrokerFactory,
) -> None:
    """A member that joins, takes every partition and then goes silent (a crashed
    process: no leave) keeps them only until its session times out."""
    broker = broker_factory(env={**ENV, "GROUP_CONSUMER_SESSION_TIMEOUT_MS": 3000})
    topic, group = unique("silent"), unique("g848")
    create_topic(broker.bootstrap, topic, PARTITIONS)
    produced = produce(broker.bootstrap, topic, PARTITIONS, 120, "x")
    m = request_class(HEARTBEAT, 1)
    with WireClient(broker.port) as wire:
        joined = wire.request(
            HEARTBEAT,
            1,
            m.ConsumerGroupHeartbeatRequest(
                group_id=group,
                member_id=uuid.uuid4().hex,
                member_epoch=0,
                rebalance_timeout=datetime.timedelta(minutes=5),
                subscribed_topic_names=(topic,),
                topic_partitions=(),
            ),
        )
    assert joined.error_code == NONE
    assert len(joined.assignment.topic_partitions[0].partitions) == PARTITIONS
    live = member(broker, topic, group, "live").start()
    try:
        wait_assignment([live], PARTITIONS, TIMEOUT_S, "the silent member's partitions")
        wait_consumed([live], len(produced), TIMEOUT_S)
        assert [d.client_id for d in describe(broker, group).members] == ["live"]
        problems = exactly_once_problems(produced, all_seen([live]))
        assert problems == [], problems
    finally:
        stop_all([live])


def _assign_and_commit(broker: BrokerProcess, topic: str, group: str, offset: int) -> Any:
    """A `group.protocol=consumer` consumer that assign()s partition 0 itself (never
    subscribes) and commits `offset` for it: librdkafka sends its own member id (KIP-1082)
    with epoch -1. Returns the commit's error (None if it was accepted)."""
    from confluent_kafka import Consumer, KafkaException, TopicPartition

    consumer = Consumer(
        {
            "bootstrap.servers": broker.bootstrap,
            "group.id": group,
            "group.protocol": "consumer",
            "enable.auto.commit": False,
        }
    )
    try:
        consumer.assign([TopicPartition(topic, 0)])
        try:
            result = consumer.commit(offsets=[TopicPartition(topic, 0, offset)], asynchronous=False)
        except KafkaException as exc:
            return exc.args[0].code()
        [tp] = result
        return tp.error.code() if tp.error else None
    finally:
        consumer.close()


def _committed(broker: BrokerProcess, topic: str, group: str) -> int:
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group})
    try:
        [tp] = consumer.committed([TopicPartition(topic, 0)], timeout=30)
        return int(tp.offset)
    finally:
        consumer.close()


def test_assign_only_consumer_commits_as_kafka_allows(broker: BrokerProcess) -> None:
    """Kafka's rule for a commit with member epoch -1: accepted while nobody is in the
    group (or the group does not exist yet: a "simple group"), whatever member id it names;
    refused with UNKNOWN_MEMBER_ID while the group has members."""
    from confluent_kafka import KafkaError

    topic, group = unique("assign-commit"), unique("g848")
    create_topic(broker.bootstrap, topic, 2)
    produce(broker.bootstrap, topic, 2, 40, "assign")
    assert _assign_and_commit(broker, topic, group, 3) is None
    assert _committed(broker, topic, group) == 3

    a = member(broker, topic, group, "a").start()
    try:
        wait_assignment([a], 2, TIMEOUT_S)
        assert _assign_and_commit(broker, topic, group, 7) == KafkaError.UNKNOWN_MEMBER_ID
    finally:
        stop_all([a])
    wait_until(lambda: describe(broker, group).group_state == "Empty", TIMEOUT_S, "Empty")
    assert _assign_and_commit(broker, topic, group, 9) is None
    assert _committed(broker, topic, group) == 9
