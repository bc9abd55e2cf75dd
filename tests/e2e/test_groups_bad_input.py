"""Group requests no well-behaved client sends, over raw sockets: each gets Kafka's error
code, and a real kafka-python group on the same broker keeps consuming afterwards.

Error codes: OFFSET_METADATA_TOO_LARGE=12, ILLEGAL_GENERATION=22,
INCONSISTENT_GROUP_PROTOCOL=23, INVALID_GROUP_ID=24, UNKNOWN_MEMBER_ID=25,
INVALID_SESSION_TIMEOUT=26, MEMBER_ID_REQUIRED=79.
"""

from __future__ import annotations

import datetime
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from e2e_fixtures import running_broker
from e2e_harness import BrokerProcess, create_topic
from e2e_wire import WireClient, request_class
from group_clients import (
    GroupMember,
    all_seen,
    assignment_bytes,
    exactly_once_problems,
    make_member,
    parse_assignment,
    produce,
    stop_all,
    subscription_bytes,
    unique,
    wait_assignment,
    wait_consumed,
)
from kio.schema.types import GroupId, TopicName
from kio.static.primitive import i32, i32Timedelta, i64

NONE = 0
OFFSET_METADATA_TOO_LARGE = 12
ILLEGAL_GENERATION = 22
INCONSISTENT_GROUP_PROTOCOL = 23
INVALID_GROUP_ID = 24
GROUP_ID_NOT_FOUND = 69
UNKNOWN_MEMBER_ID = 25
INVALID_SESSION_TIMEOUT = 26
MEMBER_ID_REQUIRED = 79

MIN_SESSION_MS = 1000
MAX_SESSION_MS = 60_000
LIVE_TOPIC = "groups-bad-input-live"
RAW_TOPIC = "groups-bad-input-raw"
LIVE_GROUP = "groups-bad-input-live-group"
JOIN, SYNC, HEARTBEAT, LEAVE, COMMIT, FETCH = 11, 14, 12, 13, 8, 9

pytestmark = pytest.mark.timeout(120)


# ------------------------------------------------------------------- raw requests


def ms(value: int) -> i32Timedelta:
    return i32Timedelta.parse(datetime.timedelta(milliseconds=value))


def join_request(
    group: str,
    member_id: str = "",
    *,
    version: int = 5,
    protocol_type: str = "consumer",
    protocols: Sequence[tuple[str, bytes]] | None = None,
    session_ms: int = 10_000,
    instance_id: str | None = None,
) -> Any:
    m = request_class(JOIN, version)
    protocols = protocols or [("range", subscription_bytes([RAW_TOPIC]))]
    kwargs: dict[str, Any] = {}
    if version >= 1:
        kwargs["rebalance_timeout"] = ms(10_000)
    if version >= 5:
        kwargs["group_instance_id"] = instance_id
    return m.JoinGroupRequest(
        group_id=GroupId(group),
        session_timeout=ms(session_ms),
        member_id=member_id,
        protocol_type=protocol_type,
        protocols=tuple(m.JoinGroupRequestProtocol(name=n, metadata=md) for n, md in protocols),
        **kwargs,
    )


def sync_request(
    group: str, generation: int, member_id: str, assignments: dict[str, bytes] | None = None
) -> Any:
    m = request_class(SYNC, 3)
    return m.SyncGroupRequest(
        group_id=GroupId(group),
        generation_id=i32(generation),
        member_id=member_id,
        group_instance_id=None,
        assignments=tuple(
            m.SyncGroupRequestAssignment(member_id=mid, assignment=data)
            for mid, data in (assignments or {}).items()
        ),
    )


def heartbeat_request(group: str, generation: int, member_id: str) -> Any:
    m = request_class(HEARTBEAT, 3)
    return m.HeartbeatRequest(
        group_id=GroupId(group),
        generation_id=i32(generation),
        member_id=member_id,
        group_instance_id=None,
    )


def leave_request(group: str, member_id: str, version: int = 3) -> Any:
    m = request_class(LEAVE, version)
    if version < 3:
        return m.LeaveGroupRequest(group_id=GroupId(group), member_id=member_id)
    return m.LeaveGroupRequest(
        group_id=GroupId(group),
        members=(m.MemberIdentity(member_id=member_id, group_instance_id=None),),
    )


def commit_request(
    group: str,
    generation: int,
    member_id: str,
    offset: int,
    metadata: str | None = "",
    topic: str = RAW_TOPIC,
    partition: int = 0,
) -> Any:
    m = request_class(COMMIT, 7)
    return m.OffsetCommitRequest(
        group_id=GroupId(group),
        generation_id_or_member_epoch=i32(generation),
        member_id=member_id,
        group_instance_id=None,
        topics=(
            m.OffsetCommitRequestTopic(
                name=TopicName(topic),
                partitions=(
                    m.OffsetCommitRequestPartition(
                        partition_index=i32(partition),
                        committed_offset=i64(offset),
                        committed_metadata=metadata,
                    ),
                ),
            ),
        ),
    )


def fetch_request(group: str, topic: str = RAW_TOPIC, partition: int = 0) -> Any:
    m = request_class(FETCH, 8)
    return m.OffsetFetchRequest(
        groups=(
            m.OffsetFetchRequestGroup(
                group_id=GroupId(group),
                topics=(
                    m.OffsetFetchRequestTopics(
                        name=TopicName(topic), partition_indexes=(i32(partition),)
                    ),
                ),
            ),
        )
    )


def commit_errors(response: Any) -> list[int]:
    return [int(p.error_code) for t in response.topics for p in t.partitions]


def fetched(response: Any) -> tuple[int, int, str | None, int]:
    """(group error, committed offset, metadata, partition error) of a one-partition fetch."""
    (g,) = response.groups
    (t,) = g.topics
    (p,) = t.partitions
    return int(g.error_code), int(p.committed_offset), p.metadata, int(p.error_code)


@dataclass
class RawMember:
    """A one-member group formed over raw requests (JoinGroup v5 with KIP-394's dance)."""

    group: str
    member_id: str = ""
    generation: int = -1
    responses: list[Any] = field(default_factory=list)

    def join(self, wire: WireClient, **kwargs: Any) -> Any:
        response = wire.request(JOIN, 5, join_request(self.group, self.member_id, **kwargs))
        self.responses.append(response)
        if int(response.error_code) == MEMBER_ID_REQUIRED and not self.member_id:
            self.member_id = response.member_id
            response = wire.request(JOIN, 5, join_request(self.group, self.member_id, **kwargs))
            self.responses.append(response)
        assert int(response.error_code) == NONE, response
        assert response.member_id == self.member_id and response.leader == self.member_id
        self.generation = int(response.generation_id)
        return response

    def sync(self, wire: WireClient) -> None:
        response = wire.request(
            SYNC,
            3,
            sync_request(
                self.group,
                self.generation,
                self.member_id,
                {self.member_id: assignment_bytes({RAW_TOPIC: [0, 1]})},
            ),
        )
        assert int(response.error_code) == NONE, response
        assert parse_assignment(response.assignment) == {RAW_TOPIC: [0, 1]}, response

    def form(self, wire: WireClient) -> RawMember:
        self.join(wire)
        self.sync(wire)
        return self


# ------------------------------------------------------------------- fixtures


@pytest.fixture(scope="module")
def bad_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    with running_broker(
        Path(tmp_path_factory.mktemp("groups-bad")) / "data",
        {
            "GROUP_INITIAL_REBALANCE_DELAY_MS": 300,
            "GROUP_MIN_SESSION_TIMEOUT_MS": MIN_SESSION_MS,
            "GROUP_MAX_SESSION_TIMEOUT_MS": MAX_SESSION_MS,
        },
        "groups-bad",
    ) as proc:
        create_topic(proc.bootstrap, LIVE_TOPIC, partitions=2)
        create_topic(proc.bootstrap, RAW_TOPIC, partitions=2)
        yield proc


class LiveGroup:
    """Two kafka-python members consuming for the whole module: the witness that no bad
    request disturbs a real group."""

    def __init__(self, broker: BrokerProcess) -> None:
        self.broker = broker
        self.members: list[GroupMember] = [
            make_member(
                "kafka-python",
                broker.bootstrap,
                LIVE_TOPIC,
                LIVE_GROUP,
                f"live-{n}",
                session_timeout_ms=6000,
                heartbeat_interval_ms=500,
            )
            for n in "ab"
        ]
        self.produced: dict[tuple[int, int], bytes] = {}
        self.rounds = 0

    def start(self) -> None:
        for m in self.members:
            m.start()
        wait_assignment(self.members, 2, 30, "the live group to form")

    def check(self) -> None:
        """Both members still own a partition, and 20 new records are each consumed once."""
        self.rounds += 1
        wait_assignment(self.members, 2, 15, "the live group to be balanced")
        self.produced.update(
            produce(self.broker.bootstrap, LIVE_TOPIC, 2, 20, f"live{self.rounds}")
        )
        wait_consumed(self.members, len(self.produced), 30)
        problems = exactly_once_problems(self.produced, all_seen(self.members))
        assert not problems, problems + [m.describe() for m in self.members]


@pytest.fixture(scope="module")
def live(bad_broker: BrokerProcess) -> Iterator[LiveGroup]:
    group = LiveGroup(bad_broker)
    try:
        group.start()
        yield group
    finally:
        stop_all(m for m in group.members if m.thread.is_alive())


@pytest.fixture
def wire(bad_broker: BrokerProcess, live: LiveGroup) -> Iterator[WireClient]:
    """A raw connection; after the test the live group must still work and the broker
    must have logged no traceback."""
    if not bad_broker.alive():
        pytest.fail(f"the broker died earlier\n{bad_broker.log_tail()}")
    before = len(bad_broker.tracebacks())
    client = WireClient(bad_broker.port)
    try:
        yield client
    finally:
        client.close()
    live.check()
    new = bad_broker.tracebacks()[before:]
    if new:
        pytest.fail("the broker logged tracebacks during the test:\n" + "\n\n".join(new))


# ------------------------------------------------------------------- cases


@pytest.mark.parametrize("version", [4, 5])
def test_join_without_member_id_gets_member_id_required(wire: WireClient, version: int) -> None:
    group = unique("member-id-required")
    first = wire.request(JOIN, version, join_request(group, version=version))
    assert int(first.error_code) == MEMBER_ID_REQUIRED, first
    assert first.member_id, "MEMBER_ID_REQUIRED must carry the member id to use"
    assert int(first.generation_id) == -1, first
    second = wire.request(JOIN, version, join_request(group, first.member_id, version=version))
    assert int(second.error_code) == NONE, second
    assert second.member_id == first.member_id and second.leader == first.member_id
    assert int(second.generation_id) >= 1, second
    assert [mm.member_id for mm in second.members] == [first.member_id]


def test_join_v3_without_member_id_joins_at_once(wire: WireClient) -> None:
    """Before v4 the coordinator picks the id and answers the join directly."""
    response = wire.request(JOIN, 3, join_request(unique("join-v3"), version=3))
    assert int(response.error_code) == NONE, response
    assert response.member_id and response.leader == response.member_id


def test_unknown_member_id(wire: WireClient, live: LiveGroup) -> None:
    raw = RawMember(unique("unknown-member")).form(wire)
    g, stranger = raw.generation, "no-such-member"
    hb = wire.request(HEARTBEAT, 3, heartbeat_request(raw.group, g, stranger))
    assert int(hb.error_code) == UNKNOWN_MEMBER_ID, hb
    sync = wire.request(SYNC, 3, sync_request(raw.group, g, stranger))
    assert int(sync.error_code) == UNKNOWN_MEMBER_ID, sync
    commit = wire.request(COMMIT, 7, commit_request(raw.group, g, stranger, 5))
    assert commit_errors(commit) == [UNKNOWN_MEMBER_ID], commit
    join = wire.request(JOIN, 5, join_request(raw.group, stranger))
    assert int(join.error_code) == UNKNOWN_MEMBER_ID, join
    leave = wire.request(LEAVE, 3, leave_request(raw.group, stranger))
    assert [int(m.error_code) for m in leave.members] == [UNKNOWN_MEMBER_ID], leave
    # A group that does not exist knows no member either.
    nowhere = unique("no-such-group")
    assert int(wire.request(HEARTBEAT, 3, heartbeat_request(nowhere, 1, stranger)).error_code) == (
        UNKNOWN_MEMBER_ID
    )
    assert int(wire.request(SYNC, 3, sync_request(nowhere, 1, stranger)).error_code) == (
        UNKNOWN_MEMBER_ID
    )
    # A standalone commit (no member, generation -1) into a group with members: refused.
    standalone = wire.request(COMMIT, 7, commit_request(raw.group, -1, "", 5))
    assert commit_errors(standalone) == [UNKNOWN_MEMBER_ID], standalone
    # The same against the live client group, which must not notice.
    hb_live = wire.request(HEARTBEAT, 3, heartbeat_request(LIVE_GROUP, 1, stranger))
    assert int(hb_live.error_code) == UNKNOWN_MEMBER_ID, hb_live
    live_commit = wire.request(COMMIT, 7, commit_request(LIVE_GROUP, -1, "", 0, topic=LIVE_TOPIC))
    assert commit_errors(live_commit) == [UNKNOWN_MEMBER_ID], live_commit
    # The real member is untouched by all this.
    assert (
        int(wire.request(HEARTBEAT, 3, heartbeat_request(raw.group, g, raw.member_id)).error_code)
        == NONE
    )


def test_illegal_generation(wire: WireClient) -> None:
    raw = RawMember(unique("illegal-generation")).form(wire)
    old = raw.generation
    raw.join(wire)  # the leader rejoining starts a new generation
    assert raw.generation > old, raw.responses[-1]
    raw.sync(wire)
    for stale in (old, raw.generation + 1):
        hb = wire.request(HEARTBEAT, 3, heartbeat_request(raw.group, stale, raw.member_id))
        assert int(hb.error_code) == ILLEGAL_GENERATION, (stale, hb)
        sync = wire.request(SYNC, 3, sync_request(raw.group, stale, raw.member_id))
        assert int(sync.error_code) == ILLEGAL_GENERATION, (stale, sync)
        commit = wire.request(COMMIT, 7, commit_request(raw.group, stale, raw.member_id, 9))
        assert commit_errors(commit) == [ILLEGAL_GENERATION], (stale, commit)
    assert fetched(wire.request(FETCH, 8, fetch_request(raw.group)))[1] == -1
    ok = wire.request(COMMIT, 7, commit_request(raw.group, raw.generation, raw.member_id, 9))
    assert commit_errors(ok) == [NONE], ok
    assert fetched(wire.request(FETCH, 8, fetch_request(raw.group)))[:2] == (0, 9)


def test_inconsistent_group_protocol(wire: WireClient) -> None:
    raw = RawMember(unique("inconsistent")).form(wire)
    other_type = join_request(
        raw.group, protocol_type="connect", protocols=[("default", b"\x00\x01")]
    )
    response = wire.request(JOIN, 5, other_type)
    if int(response.error_code) == MEMBER_ID_REQUIRED:
        # Kafka checks the protocol before handing out a member id; accept either order.
        response = wire.request(
            JOIN,
            5,
            join_request(
                raw.group,
                response.member_id,
                protocol_type="connect",
                protocols=[("default", b"\x00\x01")],
            ),
        )
    assert int(response.error_code) == INCONSISTENT_GROUP_PROTOCOL, response
    no_common = join_request(raw.group, protocols=[("no-such-assignor", b"")])
    response = wire.request(JOIN, 5, no_common)
    if int(response.error_code) == MEMBER_ID_REQUIRED:
        response = wire.request(
            JOIN,
            5,
            join_request(raw.group, response.member_id, protocols=[("no-such-assignor", b"")]),
        )
    assert int(response.error_code) == INCONSISTENT_GROUP_PROTOCOL, response
    # The group itself did not move.
    hb = wire.request(HEARTBEAT, 3, heartbeat_request(raw.group, raw.generation, raw.member_id))
    assert int(hb.error_code) == NONE, hb


def test_offset_metadata_too_large(wire: WireClient) -> None:
    group = unique("metadata-size")
    at_limit = wire.request(COMMIT, 7, commit_request(group, -1, "", 3, metadata="m" * 4096))
    assert commit_errors(at_limit) == [NONE], at_limit
    too_big = wire.request(COMMIT, 7, commit_request(group, -1, "", 4, metadata="m" * 4097))
    assert commit_errors(too_big) == [OFFSET_METADATA_TOO_LARGE], too_big
    error, offset, metadata, part_error = fetched(wire.request(FETCH, 8, fetch_request(group)))
    assert (error, offset, metadata, part_error) == (0, 3, "m" * 4096, 0), (error, offset)
    # Same through a member of a live raw group.
    raw = RawMember(unique("metadata-size-member")).form(wire)
    big = wire.request(
        COMMIT, 7, commit_request(raw.group, raw.generation, raw.member_id, 4, metadata="x" * 5000)
    )
    assert commit_errors(big) == [OFFSET_METADATA_TOO_LARGE], big


@pytest.mark.parametrize("session_ms", [MIN_SESSION_MS - 1, 100, MAX_SESSION_MS + 1])
def test_session_timeout_out_of_bounds(wire: WireClient, session_ms: int) -> None:
    group = unique("session-timeout")
    for member_id in ("", "made-up-member"):
        response = wire.request(JOIN, 5, join_request(group, member_id, session_ms=session_ms))
        assert int(response.error_code) == INVALID_SESSION_TIMEOUT, (member_id, response)
    # At the bounds a join is fine.
    for bound in (MIN_SESSION_MS, MAX_SESSION_MS):
        RawMember(unique("session-bound")).join(wire, session_ms=bound)


def test_empty_group_id(wire: WireClient) -> None:
    join = wire.request(JOIN, 5, join_request(""))
    assert int(join.error_code) == INVALID_GROUP_ID, join
    sync = wire.request(SYNC, 3, sync_request("", 1, "someone"))
    assert int(sync.error_code) == INVALID_GROUP_ID, sync
    hb = wire.request(HEARTBEAT, 3, heartbeat_request("", 1, "someone"))
    assert int(hb.error_code) == INVALID_GROUP_ID, hb
    leave = wire.request(LEAVE, 3, leave_request("", "someone"))
    assert int(leave.error_code) == INVALID_GROUP_ID, leave
    # Kafka's classic coordinator accepts offset commits for "" (pre-0.9 compatibility);
    # its newer coordinator refuses them with INVALID_GROUP_ID. Either is fine, a crash not.
    commit = wire.request(COMMIT, 7, commit_request("", -1, "", 1))
    assert commit_errors(commit) in ([NONE], [INVALID_GROUP_ID]), commit


@pytest.mark.parametrize("version", [0, 1, 2, 3, 4, 5])
def test_leave_group_every_version(wire: WireClient, version: int) -> None:
    """Not bad input: LeaveGroup as each client generation sends it (librdkafka uses v1,
    aiokafka v0/v1). Before v3 the response has a top-level error and no member list."""
    raw = RawMember(unique(f"leave-v{version}")).form(wire)
    response = wire.request(LEAVE, version, leave_request(raw.group, raw.member_id, version))
    assert int(response.error_code) == NONE, response
    if version >= 3:
        assert [(mm.member_id, int(mm.error_code)) for mm in response.members] == [
            (raw.member_id, NONE)
        ], response
    gone = wire.request(HEARTBEAT, 3, heartbeat_request(raw.group, raw.generation, raw.member_id))
    assert int(gone.error_code) == UNKNOWN_MEMBER_ID, gone


def test_a_group_named_thousands_of_times_is_looked_up_once(wire: WireClient) -> None:
    """The fuzzer's DescribeGroups/DeleteGroups with one id 32,767 times took 3-6 s (a
    coordinator query each) and held other clients up; each distinct id is looked up once,
    and the answer still has one entry per name asked."""
    import time

    names = tuple(GroupId("fuzzed") for _ in range(32_767))
    started = time.monotonic()
    described = wire.request(
        15,
        5,
        request_class(15, 5).DescribeGroupsRequest(
            groups=names, include_authorized_operations=False
        ),
    )
    deleted = wire.request(42, 2, request_class(42, 2).DeleteGroupsRequest(groups_names=names))
    print(f"DescribeGroups + DeleteGroups of 32,767 names: {time.monotonic() - started:.2f}s")
    assert [g.group_state for g in described.groups] == ["Dead"] * len(names)
    assert {int(r.error_code) for r in deleted.results} == {GROUP_ID_NOT_FOUND}
    assert len(deleted.results) == len(names)
