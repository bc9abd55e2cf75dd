"""Consumer groups (Kafka's classic protocol) with real clients.

- every client: three members share a 6-partition topic disjointly, consume each record
  exactly once with synchronous commits, and when one leaves mid-stream its partitions move
  to the others within the session timeout and consumption resumes from the committed
  offsets (nothing skipped, nothing read twice);
- librdkafka's cooperative-sticky assignor: a joining member takes partitions from the
  existing members without revoking their whole assignment;
- static membership: a member restarting within the session timeout gets its partitions
  back without a rebalance (same generation, nobody else's callbacks fire);
- the admin side: ListGroups, DescribeGroups, DeleteGroups (NON_EMPTY_GROUP while members
  are active), OffsetFetch for several groups at once, OffsetDelete.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from e2e_fixtures import running_broker
from e2e_harness import BrokerProcess, create_topic, kafka_admin, wait_until
from e2e_wire import WireClient, request_class
from group_clients import (
    CLIENTS,
    GroupMember,
    all_seen,
    exactly_once_problems,
    make_member,
    parse_assignment,
    probe_generation,
    produce,
    stop_all,
    unique,
    wait_assignment,
    wait_consumed,
)

PARTITIONS = 6
SESSION_TIMEOUT_MS = 6000
HEARTBEAT_MS = 500
JOIN_TIMEOUT_S = 30.0
CONSUME_TIMEOUT_S = 60.0
GROUP_ENV = {
    "GROUP_INITIAL_REBALANCE_DELAY_MS": 300,
    "GROUP_MIN_SESSION_TIMEOUT_MS": 1000,
}

NON_EMPTY_GROUP = 68
GROUP_ID_NOT_FOUND = 69
GROUP_SUBSCRIBED_TO_TOPIC = 86

pytestmark = pytest.mark.timeout(180)


@pytest.fixture(scope="module")
def group_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    """One broker for the module (every test uses its own topic and group ids)."""
    with running_broker(
        Path(tmp_path_factory.mktemp("groups")) / "data", GROUP_ENV, "groups"
    ) as proc:
        yield proc


@pytest.fixture(autouse=True)
def no_new_broker_tracebacks(group_broker: BrokerProcess) -> Iterator[None]:
    """A traceback in the broker log is a broker bug even when every client succeeded."""
    before = len(group_broker.tracebacks())
    yield
    new = group_broker.tracebacks()[before:]
    if new:
        pytest.fail("the broker logged tracebacks during the test:\n" + "\n\n".join(new))


@pytest.fixture
def broker(group_broker: BrokerProcess) -> BrokerProcess:
    if not group_broker.alive():
        pytest.fail(f"the group broker died earlier\n{group_broker.log_tail()}")
    return group_broker


@pytest.fixture
def members() -> Iterator[list[GroupMember]]:
    """Members a test starts; all stopped (closed, threads joined) at teardown."""
    started: list[GroupMember] = []
    yield started
    stop_all(m for m in started if m.thread.is_alive())


def start(
    members: list[GroupMember],
    client: str,
    broker: BrokerProcess,
    topic: str,
    group: str,
    name: str,
    **kwargs: Any,
) -> GroupMember:
    kwargs.setdefault("session_timeout_ms", SESSION_TIMEOUT_MS)
    kwargs.setdefault("heartbeat_interval_ms", HEARTBEAT_MS)
    member = make_member(client, broker.bootstrap, topic, group, name, **kwargs)
    members.append(member)
    return member.start()


def assert_exactly_once(
    produced: dict[tuple[int, int], bytes], group_members: list[GroupMember]
) -> None:
    problems = exactly_once_problems(produced, all_seen(group_members))
    assert not problems, "\n".join(problems + [m.describe() for m in group_members])


def settle(group_members: list[GroupMember], expected: int, quiet_s: float = 1.0) -> None:
    """Wait for `expected` records, then a little longer: a duplicate arriving late must
    still be caught."""
    wait_consumed(group_members, expected, CONSUME_TIMEOUT_S)
    time.sleep(quiet_s)


# ------------------------------------------------------------------- share, leave, resume


@pytest.mark.parametrize("client", CLIENTS)
def test_members_share_partitions_and_take_over_after_leave(
    client: str, broker: BrokerProcess, topic_name: str, members: list[GroupMember]
) -> None:
    create_topic(broker.bootstrap, topic_name, PARTITIONS)
    group = unique(f"share-{client}")
    a, b, c = (start(members, client, broker, topic_name, group, f"{client}-{n}") for n in "abc")

    shares = wait_assignment([a, b, c], PARTITIONS, JOIN_TIMEOUT_S, "3 members to share 6")
    assert all(len(s) == 2 for s in shares.values()), shares
    events_before = {m.name: m.event_count() for m in (a, b, c)}

    first = produce(broker.bootstrap, topic_name, PARTITIONS, 3000, "first")
    settle([a, b, c], len(first))
    assert_exactly_once(first, [a, b, c])
    for m in (a, b, c):
        assert {s.partition for s in m.seen} <= shares[m.name], m.describe()
        assert m.event_count() == events_before[m.name], f"unexpected rebalance: {m.describe()}"
    assert not any(m.commit_failures for m in (a, b, c)), [m.describe() for m in (a, b, c)]

    # c leaves in the middle of the next 3,000 records (about 1,000 are on its partitions).
    c.stop_after = c.seen_count() + 150
    second = produce(broker.bootstrap, topic_name, PARTITIONS, 3000, "second")
    assert c.closed.wait(JOIN_TIMEOUT_S), c.describe()
    c.stop()
    assert c.closed_at is not None
    c_partitions = shares[c.name]
    left_unread = sum(1 for (p, o) in second if p in c_partitions and o >= c.committed.get(p, 0))
    assert left_unread > 0, "c consumed everything before leaving: the test proves nothing"

    remaining = SESSION_TIMEOUT_MS / 1000 - (time.monotonic() - c.closed_at)
    wait_assignment([a, b], PARTITIONS, max(remaining, 0.5), "a and b to take over c's")
    moved_after = time.monotonic() - c.closed_at
    assert moved_after <= SESSION_TIMEOUT_MS / 1000, moved_after

    third = produce(broker.bootstrap, topic_name, PARTITIONS, 1500, "third")
    everything = {**first, **second, **third}
    settle([a, b, c], len(everything))
    assert_exactly_once(everything, [a, b, c])
    taken_over = {s.partition for s in a.seen + b.seen if s.value.startswith(b"third")}
    assert c_partitions <= taken_over, (c_partitions, taken_over)
    failures = [f for m in (a, b, c) for f in m.commit_failures]
    assert not failures, failures


# ------------------------------------------------------------------- cooperative-sticky


def test_cooperative_sticky_join_revokes_only_what_moves(
    broker: BrokerProcess, topic_name: str, members: list[GroupMember]
) -> None:
    create_topic(broker.bootstrap, topic_name, PARTITIONS)
    group = unique("coop")
    kw: dict[str, Any] = {"assignor": "cooperative-sticky"}
    a = start(members, "confluent-kafka", broker, topic_name, group, "coop-a", **kw)
    b = start(members, "confluent-kafka", broker, topic_name, group, "coop-b", **kw)
    before = wait_assignment([a, b], PARTITIONS, JOIN_TIMEOUT_S, "2 members to share 6")
    assert sorted(len(s) for s in before.values()) == [3, 3], before
    first = produce(broker.bootstrap, topic_name, PARTITIONS, 1500, "first")
    settle([a, b], len(first), quiet_s=0.2)
    marks = {m.name: m.event_count() for m in (a, b)}

    c = start(members, "confluent-kafka", broker, topic_name, group, "coop-c", **kw)
    after = wait_assignment([a, b, c], PARTITIONS, JOIN_TIMEOUT_S, "3 members to share 6")
    assert all(len(s) == 2 for s in after.values()), after
    second = produce(broker.bootstrap, topic_name, PARTITIONS, 1500, "second")
    settle([a, b, c], len(first) + len(second))

    for m in (a, b):
        assert after[m.name] <= before[m.name], f"{m.name} gained partitions: {m.describe()}"
        owned = set(before[m.name])
        for event in m.events[marks[m.name] :]:
            assert event.kind != "lost", m.describe()
            if event.kind == "revoke":
                assert event.partitions < owned, (
                    f"{m.name} had everything revoked (eager behaviour): {m.describe()}"
                )
                owned -= event.partitions
            else:
                owned |= event.partitions
        assert owned == after[m.name], m.describe()
    assert {e.kind for e in c.events} == {"assign"}, c.describe()
    assert_exactly_once({**first, **second}, [a, b, c])


# ------------------------------------------------------------------- static membership


def describe_members(bootstrap: str, group: str) -> dict[str, str]:
    """{group.instance.id: member id} through confluent's AdminClient."""
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": bootstrap})
    desc = admin.describe_consumer_groups([group], request_timeout=15)[group].result(timeout=20)
    return {m.group_instance_id: m.member_id for m in desc.members}


@pytest.mark.parametrize("client", ["confluent-kafka", "kafka-python"])
def test_static_member_restart_keeps_partitions_without_rebalance(
    client: str, broker: BrokerProcess, topic_name: str, members: list[GroupMember]
) -> None:
    """Each member restarts in turn, so the group leader is among them whoever it is."""
    create_topic(broker.bootstrap, topic_name, PARTITIONS)
    group = unique(f"static-{client}")
    session_ms = 10_000
    current = {
        n: start(
            members,
            client,
            broker,
            topic_name,
            group,
            f"static-{n}-0",
            instance_id=f"instance-{n}",
            session_timeout_ms=session_ms,
        )
        for n in "abc"
    }
    shares = wait_assignment(list(current.values()), PARTITIONS, JOIN_TIMEOUT_S, "3 static")
    owned = {n: shares[m.name] for n, m in current.items()}
    produced = produce(broker.bootstrap, topic_name, PARTITIONS, 900, "before")
    settle(members, len(produced), quiet_s=0.2)
    ids = describe_members(broker.bootstrap, group)
    assert set(ids) == {"instance-a", "instance-b", "instance-c"}, ids
    generation = probe_generation(broker.port, group, ids["instance-a"], "instance-a")

    for round_, n in enumerate("abc", start=1):
        others = [m for k, m in current.items() if k != n]
        marks = {m.name: m.event_count() for m in others}
        old = current[n]
        old.stop()  # a static member's close sends no LeaveGroup
        new = start(
            members,
            client,
            broker,
            topic_name,
            group,
            f"static-{n}-{round_}",
            instance_id=f"instance-{n}",
            session_timeout_ms=session_ms,
        )
        current[n] = new
        back = wait_assignment(
            list(current.values()), PARTITIONS, session_ms / 1000, f"instance-{n} to come back"
        )
        assert old.closed_at is not None and time.monotonic() - old.closed_at < session_ms / 1000
        assert back[new.name] == owned[n], (n, back, owned)
        more = produce(broker.bootstrap, topic_name, PARTITIONS, 300, f"round{round_}")
        produced.update(more)
        settle(members, len(produced), quiet_s=2 * HEARTBEAT_MS / 1000 + 0.5)
        for m in others:
            assert m.events[marks[m.name] :] == [], (
                f"restarting instance-{n} rebalanced the group: {m.describe()}"
            )
        ids_now = describe_members(broker.bootstrap, group)
        assert set(ids_now) == set(ids), ids_now
        for k in "abc":
            if k != n:
                assert ids_now[f"instance-{k}"] == ids[f"instance-{k}"], (k, ids, ids_now)
        ids = ids_now
        witness = next(k for k in "abc" if k != n)
        assert (
            probe_generation(broker.port, group, ids[f"instance-{witness}"], f"instance-{witness}")
            == generation
        ), f"restarting instance-{n} bumped the generation"
    assert_exactly_once(produced, members)


# ------------------------------------------------------------------- admin APIs


def kafka_python_partitions(member: dict[str, Any]) -> set[tuple[str, int]]:
    """A DescribeGroups member's assignment from kafka-python's admin (decoded or raw)."""
    value = member["member_assignment"]
    if isinstance(value, bytes | bytearray):
        return {(t, p) for t, ps in parse_assignment(bytes(value)).items() for p in ps}
    if hasattr(value, "partitions"):
        return {(tp.topic, tp.partition) for tp in value.partitions()}
    out: set[tuple[str, int]] = set()
    for entry in value["assigned_partitions"]:
        topic, parts = (entry["topic"], entry["partitions"]) if isinstance(entry, dict) else entry
        out |= {(topic, p) for p in parts}
    return out


def offset_fetch_v8(groups: dict[str, list[tuple[str, list[int]]] | None]) -> Any:
    m = request_class(9, 8)
    return m.OffsetFetchRequest(
        groups=tuple(
            m.OffsetFetchRequestGroup(
                group_id=m.GroupId(g),
                topics=None
                if topics is None
                else tuple(
                    m.OffsetFetchRequestTopics(
                        name=m.TopicName(t), partition_indexes=tuple(m.i32(p) for p in ps)
                    )
                    for t, ps in topics
                ),
            )
            for g, topics in groups.items()
        )
    )


def test_list_describe_delete_groups_and_multi_group_offsets(
    broker: BrokerProcess, topic_name: str, members: list[GroupMember]
) -> None:
    from confluent_kafka import ConsumerGroupTopicPartitions, KafkaException, TopicPartition
    from confluent_kafka.admin import AdminClient
    from kafka import TopicPartition as KTP
    from kafka.structs import OffsetAndMetadata

    create_topic(broker.bootstrap, topic_name, PARTITIONS)
    group = unique("admin-live")
    other = unique("admin-offsets-only")
    a = start(members, "confluent-kafka", broker, topic_name, group, "admin-a")
    b = start(members, "confluent-kafka", broker, topic_name, group, "admin-b")
    shares = wait_assignment([a, b], PARTITIONS, JOIN_TIMEOUT_S)
    produced = produce(broker.bootstrap, topic_name, PARTITIONS, 600, "admin")
    settle([a, b], len(produced), quiet_s=0.2)
    ends = {p: 1 + max(o for (q, o) in produced if q == p) for p in range(PARTITIONS)}

    cadmin = AdminClient({"bootstrap.servers": broker.bootstrap})
    with kafka_admin(broker.bootstrap) as kadmin:
        k: Any = kadmin
        k.alter_group_offsets(other, {KTP(topic_name, 0): OffsetAndMetadata(7, "meta", -1)})

        # ListGroups: both, whatever their state.
        listed = {g["group_id"]: g for g in k.list_groups()}
        assert group in listed and other in listed, listed
        assert listed[group]["protocol_type"] == "consumer", listed[group]
        c_listed = cadmin.list_consumer_groups(request_timeout=15).result(timeout=20)
        assert not c_listed.errors, c_listed.errors
        assert {group, other} <= {g.group_id for g in c_listed.valid}

        # DescribeGroups: members and their assignments, through both admins.
        desc = k.describe_groups([group])[group]
        assert desc["error"] is None, desc
        assert desc["group_state"] == "Stable", desc
        assert desc["protocol_type"] == "consumer" and desc["protocol_data"] == "range", desc
        by_client = {m["client_id"]: kafka_python_partitions(m) for m in desc["members"]}
        assert by_client == {n: {(topic_name, p) for p in s} for n, s in shares.items()}, (
            by_client,
            shares,
        )
        cdesc = cadmin.describe_consumer_groups([group], request_timeout=15)[group].result(
            timeout=20
        )
        assert cdesc.state.name == "STABLE" and cdesc.partition_assignor == "range", cdesc
        assert {
            m.client_id: {tp.partition for tp in m.assignment.topic_partitions}
            for m in cdesc.members
        } == shares

        # DeleteGroups while members are active: NON_EMPTY_GROUP from both.
        assert k.delete_groups([group]) == {group: "NonEmptyGroupError"}
        with pytest.raises(KafkaException) as excinfo:
            cadmin.delete_consumer_groups([group], request_timeout=15)[group].result(timeout=20)
        assert excinfo.value.args[0].code() == NON_EMPTY_GROUP, excinfo.value

        # OffsetDelete of a partition the live group consumes: refused.
        refused = k.delete_group_offsets(group, [KTP(topic_name, 0)])
        assert {tp.partition: e.errno for tp, e in refused.items()} == {
            0: GROUP_SUBSCRIBED_TO_TOPIC
        }, refused

        stop_all([a, b])
        wait_until(
            lambda: k.describe_groups([group])[group]["group_state"] == "Empty",
            SESSION_TIMEOUT_MS / 1000,
            "the group to become Empty after its members left",
        )

        # Committed offsets of several groups in one OffsetFetch (v8+), three ways.
        expected_live = {p: ends[p] for p in range(PARTITIONS)}
        both = k.list_group_offsets([group, other])
        assert {tp.partition: om.offset for tp, om in both[group].items()} == expected_live
        assert {(tp.partition, om.offset, om.metadata) for tp, om in both[other].items()} == {
            (0, 7, "meta")
        }
        missing_group = unique("never-existed")
        with WireClient(broker.port) as wire:
            resp = wire.request(
                9,
                8,
                offset_fetch_v8(
                    {
                        group: None,
                        other: [(topic_name, [0, 1])],
                        missing_group: [(topic_name, [0])],
                    }
                ),
            )
        got = {
            str(g.group_id): (
                int(g.error_code),
                {
                    (int(p.partition_index), int(p.committed_offset), int(p.error_code))
                    for t in g.topics
                    for p in t.partitions
                },
            )
            for g in resp.groups
        }
        assert got == {
            group: (0, {(p, o, 0) for p, o in expected_live.items()}),
            other: (0, {(0, 7, 0), (1, -1, 0)}),
            missing_group: (0, {(0, -1, 0)}),
        }, got
        # confluent-kafka 2.16's Python API takes one group per call.
        (c_off,) = cadmin.list_consumer_group_offsets(
            [ConsumerGroupTopicPartitions(other, [TopicPartition(topic_name, 0)])],
            request_timeout=15,
        ).values()
        assert [(tp.partition, tp.offset) for tp in c_off.result(timeout=20).topic_partitions] == [
            (0, 7)
        ]

        # OffsetDelete on the now-empty group works for one partition.
        deleted = k.delete_group_offsets(group, [KTP(topic_name, 0)])
        assert {tp.partition: e.errno for tp, e in deleted.items()} == {0: 0}, deleted
        left = k.list_group_offsets(group)[group]
        assert sorted(tp.partition for tp in left) == list(range(1, PARTITIONS)), left

        # DeleteGroups once empty: works in both admins, then the groups are gone.
        assert k.delete_groups([group]) == {group: "OK"}
        cadmin.delete_consumer_groups([other], request_timeout=15)[other].result(timeout=20)
        listed_after = {g["group_id"] for g in k.list_groups()}
        assert group not in listed_after and other not in listed_after, listed_after
        assert k.delete_groups([group]) == {group: "GroupIdNotFoundError"}
        assert k.list_group_offsets(group)[group] == {}
