"""`lakelog groups` against a real broker, with group state built by a real kafka-python
consumer and every answer checked against kafka-python's admin client."""

from __future__ import annotations

import asyncio
import datetime
import json
import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from e2e_harness import BrokerProcess, create_topic, kafka_admin, now_ms, wait_until
from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.structs import OffsetAndMetadata

from lakelog.admin import wire as admin_wire
from lakelog.admin.client import AdminClient
from lakelog.admin.wire import EARLIEST, LATEST
from lakelog.util.errors import ErrorCode

PARTITIONS = 3
OLD, NEW = 5, 5
"""Records per partition: OLD an hour old, then NEW stamped now."""
END = OLD + NEW
COMMITS = {0: 4, 1: END}
"""What the consumer commits; partition 2 is consumed but never committed."""
CLIENT_ID = "groups-e2e"
TIMEOUT = 30.0
LAKELOG = Path(sys.executable).with_name("lakelog")


def _groups_command() -> list[str]:
    """`lakelog groups` once cli.py mounts it; the module itself until then."""
    from lakelog.cli.main import app

    if any(g.name == "groups" for g in app.registered_groups):
        return [str(LAKELOG), "groups"]
    return [sys.executable, "-m", "lakelog.cli.groups"]


GROUPS = _groups_command()


def cli(bootstrap: str, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("LAKELOG_")}
    return subprocess.run(
        [*GROUPS, *args, "--bootstrap-server", bootstrap],
        capture_output=True,
        text=True,
        timeout=60,
        env={**env, "COLUMNS": "250", "NO_COLOR": "1"},
    )


def cli_json(bootstrap: str, *args: str) -> Any:
    done = cli(bootstrap, *args, "--json")
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


# ---------------------------------------------------------------- building group state


@pytest.fixture
def group_id() -> str:
    return f"groups-e2e-{uuid.uuid4().hex[:8]}"


def fill_topic(bootstrap: str, name: str) -> str:
    """A new topic with OLD old and NEW fresh records in each partition."""
    create_topic(bootstrap, name, PARTITIONS)
    producer = KafkaProducer(bootstrap_servers=bootstrap)
    try:
        hour_ago = now_ms() - 3_600_000
        for p in range(PARTITIONS):
            for i in range(END):
                stamp = hour_ago + i if i < OLD else now_ms()
                producer.send(name, value=f"{p}-{i}".encode(), partition=p, timestamp_ms=stamp)
        producer.flush(timeout=TIMEOUT)
    finally:
        producer.close()
    return name


@pytest.fixture
def topic(shared_broker: BrokerProcess, topic_name: str) -> str:
    return fill_topic(shared_broker.bootstrap, topic_name)


def consume_and_commit(bootstrap: str, topic: str, group_id: str) -> KafkaConsumer:
    """A group member that has read everything and committed COMMITS; left running."""
    consumer = KafkaConsumer(
        topic,
        bootstrap_servers=bootstrap,
        group_id=group_id,
        client_id=CLIENT_ID,
        auto_offset_reset="earliest",
        enable_auto_commit=False,
    )
    seen = 0

    def read_all() -> bool:
        nonlocal seen
        seen += sum(len(v) for v in consumer.poll(timeout_ms=500).values())
        return seen >= PARTITIONS * END

    try:
        wait_until(read_all, TIMEOUT, "the consumer to read every record")
        consumer.commit(
            {TopicPartition(topic, p): OffsetAndMetadata(o, "", -1) for p, o in COMMITS.items()}
        )
    except BaseException:
        consumer.close()
        raise
    return consumer


@pytest.fixture
def active(shared_broker: BrokerProcess, topic: str, group_id: str) -> Iterator[KafkaConsumer]:
    consumer = consume_and_commit(shared_broker.bootstrap, topic, group_id)
    try:
        yield consumer
    finally:
        consumer.close()


@pytest.fixture
def stopped(shared_broker: BrokerProcess, topic: str, group_id: str) -> None:
    """The group after its only consumer left: Empty, with COMMITS committed."""
    consume_and_commit(shared_broker.bootstrap, topic, group_id).close()
    wait_until(
        lambda: group_state(shared_broker.bootstrap, group_id) == "Empty",
        TIMEOUT,
        "the group to become Empty",
    )


def group_state(bootstrap: str, group_id: str) -> str:
    with kafka_admin(bootstrap) as admin:
        return str(admin.describe_groups([group_id])[group_id]["group_state"])  # type: ignore[attr-defined]


def committed(bootstrap: str, group_id: str) -> dict[tuple[str, int], int]:
    """The group's commits as kafka-python's admin client reports them."""
    with kafka_admin(bootstrap) as admin:
        found = admin.list_group_offsets({group_id: None})[group_id]  # type: ignore[attr-defined]
    return {(tp.topic, tp.partition): om.offset for tp, om in found.items() if om.offset >= 0}


# ---------------------------------------------------------------- list and describe


def test_list_and_describe_an_active_group(
    shared_broker: BrokerProcess, topic: str, group_id: str, active: KafkaConsumer
) -> None:
    bootstrap = shared_broker.bootstrap
    listed = {g["group"]: g for g in cli_json(bootstrap, "list")}
    assert listed[group_id] == {"group": group_id, "state": "Stable", "protocol_type": "consumer"}
    assert group_id in {g["group"] for g in cli_json(bootstrap, "list", "--state", "stable")}
    assert group_id not in {g["group"] for g in cli_json(bootstrap, "list", "--state", "Empty")}

    with kafka_admin(bootstrap) as admin:
        theirs = admin.describe_groups([group_id])[group_id]  # type: ignore[attr-defined]
    [member] = theirs["members"]
    [report] = cli_json(bootstrap, "describe", group_id)
    assert report["state"] == theirs["group_state"] == "Stable"
    expected_commits = committed(bootstrap, group_id)
    assert expected_commits == {(topic, p): o for p, o in COMMITS.items()}
    rows = {(r["topic"], r["partition"]): r for r in report["offsets"]}
    assert set(rows) == {(topic, p) for p in range(PARTITIONS)}
    for tp, row in rows.items():
        assert row["current_offset"] == expected_commits.get(tp)
        assert row["log_end_offset"] == END
        assert row["lag"] == (END - expected_commits[tp] if tp in expected_commits else None)
        assert row["consumer_id"] == member["member_id"]
        assert row["client_id"] == member["client_id"] == CLIENT_ID
        assert row["host"] == member["client_host"]

    [members] = cli_json(bootstrap, "describe", group_id, "--members")
    [ours] = members["members"]
    assert ours["consumer_id"] == member["member_id"]
    theirs_assigned = {
        (a["topic"], p)
        for a in member["member_assignment"]["assigned_partitions"]
        for p in a["partitions"]
    }
    assert {(a["topic"], a["partition"]) for a in ours["assignment"]} == theirs_assigned

    [state] = cli_json(bootstrap, "describe", group_id, "--state")
    assert state["state"] == "Stable"
    assert state["protocol"] == theirs["protocol_data"]
    assert state["member_count"] == 1
    assert state["coordinator"]["port"] == shared_broker.port

    table = cli(bootstrap, "describe", group_id)
    assert table.returncode == 0, table.stderr
    for header in ("CURRENT-OFFSET", "LOG-END-OFFSET", "LAG", "CONSUMER-ID", "CLIENT-ID"):
        assert header in table.stdout
    assert member["member_id"] in table.stdout


def test_an_active_group_cannot_be_reset_or_deleted(
    shared_broker: BrokerProcess, topic: str, group_id: str, active: KafkaConsumer
) -> None:
    bootstrap = shared_broker.bootstrap
    before = committed(bootstrap, group_id)
    for mode in ("--to-earliest", "--to-latest"):
        refused = cli(bootstrap, "reset-offsets", group_id, "--all-topics", mode, "--execute")
        assert refused.returncode == 1
        assert "can only be reset if the group" in refused.stderr
        assert "Stable" in refused.stderr
    deleted = cli(bootstrap, "delete", group_id)
    assert deleted.returncode == 1
    assert "NON_EMPTY_GROUP" in deleted.stderr

    async def standalone_commit() -> dict[tuple[str, int], ErrorCode]:
        async with await AdminClient.connect(bootstrap) as client:
            return await client.commit_offsets(group_id, {(topic, 0): 0})

    # What a reset racing a consumer's join meets after its state check passed.
    assert asyncio.run(standalone_commit()) == {(topic, 0): ErrorCode.unknown_member_id}
    assert committed(bootstrap, group_id) == before


def test_describe_shows_each_members_partitions(
    shared_broker: BrokerProcess, topic: str, group_id: str, active: KafkaConsumer
) -> None:
    bootstrap = shared_broker.bootstrap
    second = KafkaConsumer(
        topic,
        bootstrap_servers=bootstrap,
        group_id=group_id,
        client_id=f"{CLIENT_ID}-2",
        enable_auto_commit=False,
    )
    try:

        def balanced() -> bool:
            active.poll(timeout_ms=100)
            second.poll(timeout_ms=100)
            mine, theirs = active.assignment(), second.assignment()
            return (
                bool(mine)
                and bool(theirs)
                and len(mine) + len(theirs) == PARTITIONS
                and group_state(bootstrap, group_id) == "Stable"
            )

        # A classic rebalance of two kafka-python consumers, each rejoining from its own
        # poll loop: generous, since both test passes load the 2 cores at once.
        wait_until(balanced, 3 * TIMEOUT, "both consumers to own partitions")
        with kafka_admin(bootstrap) as admin:
            theirs = admin.describe_groups([group_id])[group_id]  # type: ignore[attr-defined]
        owner = {
            (a["topic"], p): m["member_id"]
            for m in theirs["members"]
            for a in m["member_assignment"]["assigned_partitions"]
            for p in a["partitions"]
        }
        [report] = cli_json(bootstrap, "describe", group_id)
        assert {(r["topic"], r["partition"]): r["consumer_id"] for r in report["offsets"]} == owner
        assert len(set(owner.values())) == 2
        [members] = cli_json(bootstrap, "describe", group_id, "--members")
        assert {m["client_id"] for m in members["members"]} == {CLIENT_ID, f"{CLIENT_ID}-2"}
        assert sum(len(m["assignment"]) for m in members["members"]) == PARTITIONS
    finally:
        second.close()


@pytest.mark.usefixtures("stopped")
def test_describe_a_stopped_group(shared_broker: BrokerProcess, topic: str, group_id: str) -> None:
    bootstrap = shared_broker.bootstrap
    assert group_id in {g["group"] for g in cli_json(bootstrap, "list", "--state", "empty")}
    [report] = cli_json(bootstrap, "describe", group_id)
    assert report["state"] == "Empty"
    assert [
        (r["partition"], r["current_offset"], r["log_end_offset"], r["lag"], r["consumer_id"])
        for r in report["offsets"]
    ] == [(p, o, END, END - o, None) for p, o in sorted(COMMITS.items())]
    table = cli(bootstrap, "describe", group_id)
    assert table.returncode == 0
    assert "has no active members" in table.stderr

    missing = cli(bootstrap, "describe", f"{group_id}-missing")
    assert missing.returncode == 1
    assert "does not exist" in missing.stderr


# ---------------------------------------------------------------- reset-offsets


def reset(bootstrap: str, group_id: str, *args: str) -> dict[tuple[str, int], int]:
    plan = cli_json(bootstrap, "reset-offsets", group_id, *args)
    return {(o["topic"], o["partition"]): o["new_offset"] for o in plan["offsets"]}


@pytest.mark.usefixtures("stopped")
def test_reset_offsets_dry_run_then_execute(
    shared_broker: BrokerProcess, topic: str, group_id: str
) -> None:
    bootstrap = shared_broker.bootstrap
    every = {(topic, p) for p in range(PARTITIONS)}
    start = committed(bootstrap, group_id)

    planned = reset(bootstrap, group_id, "--topic", topic, "--to-earliest")
    assert planned == dict.fromkeys(every, 0)
    assert committed(bootstrap, group_id) == start, "a dry run committed"
    dry = cli(bootstrap, "reset-offsets", group_id, "--topic", topic, "--to-earliest")
    assert "NEW-OFFSET" in dry.stdout and "Dry run" in dry.stderr

    assert reset(bootstrap, group_id, "--topic", f"{topic}:0", "--to-earliest", "--execute") == {
        (topic, 0): 0
    }
    assert committed(bootstrap, group_id) == {**start, (topic, 0): 0}

    shifted = cli(
        bootstrap,
        "reset-offsets",
        group_id,
        "--topic",
        f"{topic}:0,1",
        "--shift-by",
        "3",
        "--execute",
    )
    assert shifted.returncode == 0, shifted.stderr
    assert f"offset {END + 3} for {topic}-1 is past the log end; using {END}" in shifted.stderr
    assert committed(bootstrap, group_id) == {(topic, 0): 3, (topic, 1): END}

    no_commit = cli(bootstrap, "reset-offsets", group_id, "--topic", topic, "--shift-by", "1")
    assert no_commit.returncode == 1
    assert f"{topic}-2" in no_commit.stderr

    assert reset(
        bootstrap, group_id, "--topic", topic, "--to-offset", "7", "--execute"
    ) == dict.fromkeys(every, 7)
    assert committed(bootstrap, group_id) == dict.fromkeys(every, 7)

    half_hour_ago = datetime.datetime.now(datetime.UTC) - datetime.timedelta(minutes=30)
    assert reset(
        bootstrap, group_id, "--all-topics", "--to-datetime", half_hour_ago.isoformat(), "--execute"
    ) == dict.fromkeys(every, OLD)
    assert committed(bootstrap, group_id) == dict.fromkeys(every, OLD)

    assert reset(
        bootstrap, group_id, "--all-topics", "--to-datetime", "2999-01-01T00:00:00Z"
    ) == dict.fromkeys(every, END)
    assert reset(bootstrap, group_id, "--all-topics", "--to-latest", "--execute") == dict.fromkeys(
        every, END
    )
    assert committed(bootstrap, group_id) == dict.fromkeys(every, END)


@pytest.mark.usefixtures("stopped")
def test_a_consumer_resumes_from_reset_offsets(
    shared_broker: BrokerProcess, topic: str, group_id: str
) -> None:
    bootstrap = shared_broker.bootstrap
    reset(bootstrap, group_id, "--all-topics", "--to-offset", str(END - 2), "--execute")
    reset(bootstrap, group_id, "--topic", f"{topic}:2", "--to-offset", str(END - 2), "--execute")
    consumer = KafkaConsumer(
        topic,
        bootstrap_servers=bootstrap,
        group_id=group_id,
        auto_offset_reset="latest",
        enable_auto_commit=False,
    )
    got: list[tuple[int, int]] = []
    try:
        wait_until(
            lambda: (
                got.extend(
                    (r.partition, r.offset)
                    for rs in consumer.poll(timeout_ms=500).values()
                    for r in rs
                )
                or len(got) >= 2 * PARTITIONS
            ),
            TIMEOUT,
            "the consumer to read from the reset offsets",
        )
    finally:
        consumer.close()
    assert sorted(got) == [(p, o) for p in range(PARTITIONS) for o in (END - 2, END - 1)]


def test_reset_a_group_that_does_not_exist_creates_its_offsets(
    shared_broker: BrokerProcess, topic: str, group_id: str
) -> None:
    bootstrap = shared_broker.bootstrap
    assert reset(bootstrap, group_id, "--topic", f"{topic}:1", "--to-offset", "6", "--execute") == {
        (topic, 1): 6
    }
    assert committed(bootstrap, group_id) == {(topic, 1): 6}
    unknown = cli(bootstrap, "reset-offsets", group_id, "--topic", f"{topic}-nope", "--to-earliest")
    assert unknown.returncode == 1
    assert unknown.stderr.startswith("error: ")


# ---------------------------------------------------------------- delete


@pytest.mark.usefixtures("stopped")
def test_delete(shared_broker: BrokerProcess, topic: str, group_id: str) -> None:
    bootstrap = shared_broker.bootstrap
    missing = f"{group_id}-missing"
    done = cli(bootstrap, "delete", group_id, missing, "--json")
    assert done.returncode == 1
    assert json.loads(done.stdout) == [
        {"group": group_id, "error": None},
        {"group": missing, "error": "GROUP_ID_NOT_FOUND"},
    ]
    with kafka_admin(bootstrap) as admin:
        listed = admin.list_groups()  # type: ignore[attr-defined]
    assert group_id not in {g["group_id"] for g in listed}
    assert group_id not in {g["group"] for g in cli_json(bootstrap, "list")}
    assert committed(bootstrap, group_id) == {}
    assert cli(bootstrap, "describe", group_id).returncode == 1


# ---------------------------------------------------------------- older protocol versions


OLDEST = {
    admin_wire.FIND_COORDINATOR: (0, 3),
    admin_wire.LIST_GROUPS: (0, 3),
    admin_wire.DESCRIBE_GROUPS: (0, 0),
    admin_wire.OFFSET_FETCH: (2, 7),
    admin_wire.OFFSET_COMMIT: (2, 2),
    admin_wire.DELETE_GROUPS: (0, 0),
    admin_wire.LIST_OFFSETS: (1, 1),
}


@pytest.mark.parametrize("versions", ["newest", "oldest"])
async def test_admin_client_at_every_version_family(
    shared_broker: BrokerProcess,
    topic: str,
    group_id: str,
    versions: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The pre-flexible and pre-batched request forms (FindCoordinator < 4, ListGroups
    without a states filter, OffsetFetch < 8) give the same answers as the newest."""
    if versions == "oldest":
        for key, span in OLDEST.items():
            monkeypatch.setitem(admin_wire.CLIENT_VERSIONS, key, span)
    async with await AdminClient.connect(shared_broker.bootstrap) as client:
        node = await client.find_coordinator(group_id)
        assert node.port == shared_broker.port
        tps = [(topic, p) for p in range(PARTITIONS)]
        errors = await client.commit_offsets(group_id, {(topic, 0): 3, (topic, 2): 8})
        assert set(errors.values()) == {ErrorCode.none}
        assert await client.committed_offsets(group_id) == {(topic, 0): 3, (topic, 2): 8}
        assert await client.committed_offsets(group_id, [(topic, 2)]) == {(topic, 2): 8}
        ends = await client.list_offsets(dict.fromkeys(tps, LATEST))
        starts = await client.list_offsets(dict.fromkeys(tps, EARLIEST))
        assert {tp: r.offset for tp, r in ends.items()} == dict.fromkeys(tps, END)
        assert {tp: r.offset for tp, r in starts.items()} == dict.fromkeys(tps, 0)
        described = await client.describe_group(group_id)
        assert (described.state, described.members) == ("Empty", ())
        listed = await client.list_groups(["Empty"])
        assert any(g.group_id == group_id and g.state == "Empty" for g in listed)
        assert not any(g.group_id == group_id for g in await client.list_groups(["Stable"]))
        assert await client.delete_groups([group_id]) == {group_id: ErrorCode.none}
        assert await client.committed_offsets(group_id) == {}


# ---------------------------------------------------------------- two brokers


def test_group_requests_go_to_the_coordinator(broker_factory: Any, topic_name: str) -> None:
    """Two brokers sharing one store: a group coordinated by the second is listed, described,
    reset and deleted through the first."""
    first = broker_factory(env={"BROKER_ID": 0})
    second = broker_factory(env={"BROKER_ID": 1}, data_dir=first.data_dir)

    async def coordinated_by_second() -> str | None:
        async with await AdminClient.connect(first.bootstrap) as client:
            if len(await client.brokers()) < 2:
                return None
            for i in range(100):
                candidate = f"groups-e2e-{uuid.uuid4().hex[:8]}-{i}"
                if (await client.find_coordinator(candidate)).port == second.port:
                    return candidate
        return None

    group_id = wait_until(
        lambda: asyncio.run(coordinated_by_second()), TIMEOUT, "both brokers to be live"
    )
    bootstrap = first.bootstrap
    topic = fill_topic(bootstrap, topic_name)
    consume_and_commit(bootstrap, topic, group_id).close()
    wait_until(
        lambda: group_state(bootstrap, group_id) == "Empty", TIMEOUT, "the group to become Empty"
    )

    assert group_id in {g["group"] for g in cli_json(bootstrap, "list")}
    [state] = cli_json(bootstrap, "describe", group_id, "--state")
    assert (state["coordinator"]["id"], state["coordinator"]["port"]) == (1, second.port)
    [report] = cli_json(bootstrap, "describe", group_id)
    assert [(r["partition"], r["current_offset"], r["lag"]) for r in report["offsets"]] == [
        (p, o, END - o) for p, o in sorted(COMMITS.items())
    ]
    assert reset(bootstrap, group_id, "--all-topics", "--to-earliest", "--execute") == {
        (topic, p): 0 for p in COMMITS
    }
    assert committed(bootstrap, group_id) == {(topic, p): 0 for p in COMMITS}
    deleted = cli(bootstrap, "delete", group_id)
    assert deleted.returncode == 0, deleted.stderr
    assert group_id not in {g["group"] for g in cli_json(second.bootstrap, "list")}
