"""Null arrays and other requests no client sends, on one broker: every request that
decodes gets a proper answer, one that does not gets INVALID_REQUEST where its API has a
top-level error code (else the connection is closed, as Kafka closes on a body it cannot
parse), the broker logs no traceback, and a normal client is served afterwards.

kio reads a null array (length -1) anywhere, nullable or not; before the dispatcher
checked for them, ListOffsets, JoinGroup, SyncGroup, LeaveGroup, OffsetCommit,
OffsetFetch, ListGroups, FindCoordinator, DeleteTopics, AddPartitionsToTxn and a dozen more
raised TypeError in their handlers (a traceback and a dropped connection each).

Error codes: INVALID_REQUEST=42.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from e2e_fixtures import running_broker
from e2e_harness import BrokerProcess, create_topic
from e2e_sweep import (
    INVALID_REQUEST,
    SHAPES,
    Outcome,
    Shape,
    body,
    decodes,
    has_top_level_error,
    problem,
    sasl_plain,
    send,
    sweep,
)
from e2e_wire import WireClient, api_versions_v0, request_class
from security_support import USERS, listener_env, write_users

NONE = 0
LIVE_TOPIC = "null-fields-live"
SWEEP_NAME = "sweep"
"""Every string of the sweep's requests: topic, group and transactional id alike."""

NULL_ARRAYS = Shape("null-arrays", ("null",), "name", "one")

pytestmark = pytest.mark.timeout(180)


@pytest.fixture(scope="module")
def null_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    """One broker for the module: a case that takes it down fails every case after it."""
    with running_broker(
        Path(tmp_path_factory.mktemp("null-fields")) / "data",
        {"AUTO_CREATE_TOPICS_ENABLE": False},
        "null-fields",
    ) as proc:
        create_topic(proc.bootstrap, LIVE_TOPIC, partitions=1)
        create_topic(proc.bootstrap, SWEEP_NAME, partitions=2)
        yield proc


@pytest.fixture(scope="module")
def versions(null_broker: BrokerProcess) -> dict[int, tuple[int, int]]:
    """The broker's advertised API table (ApiVersions), the sweep's list of work."""
    with WireClient(null_broker.port) as client:
        response = client.request(18, 0, api_versions_v0())
    return {int(k.api_key): (int(k.min_version), int(k.max_version)) for k in response.api_keys}


def serves_a_client(broker: BrokerProcess, **config: str) -> None:
    """The broker is alive and a normal client (librdkafka, with `config`) produces a
    record and reads it back."""
    from confluent_kafka import Consumer, Producer, TopicPartition

    assert broker.alive(), f"broker died: exit codes {broker.exit_codes}"
    value = f"alive-{uuid.uuid4().hex}".encode()
    delivered: list[Any] = []
    producer = Producer(
        {"bootstrap.servers": broker.bootstrap, "acks": "all", "linger.ms": 0, **config}
    )
    producer.produce(LIVE_TOPIC, value, partition=0, on_delivery=lambda e, m: delivered.append(m))
    assert producer.flush(20) == 0, "a record still undelivered after 20 s"
    (msg,) = delivered
    assert msg.error() is None, msg.error()
    consumer = Consumer(
        {"bootstrap.servers": broker.bootstrap, "group.id": "null-fields-reader", **config}
    )
    try:
        consumer.assign([TopicPartition(LIVE_TOPIC, 0, msg.offset())])
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            got = consumer.poll(1.0)
            if got is not None and got.error() is None:
                assert got.value() == value
                return
        raise AssertionError("the record just produced was not read back within 20 s")
    finally:
        consumer.close()


def no_tracebacks(broker: BrokerProcess) -> None:
    log = broker.log_text()
    assert "Traceback" not in log and "request failed" not in log, broker.tracebacks()[:3]


# ------------------------------------------------------------------- reproducers

REPRODUCERS = {
    "ListOffsets": 2,
    "JoinGroup": 11,
    "SyncGroup": 14,
    "LeaveGroup": 13,
    "OffsetCommit": 8,
    "OffsetFetch": 9,
    "ListGroups": 16,
    "FindCoordinator": 10,
    "DeleteTopics": 20,
    "AddPartitionsToTxn": 24,
    "DescribeGroups": 15,
    "CreateTopics": 19,
    "DeleteRecords": 21,
    "OffsetForLeaderEpoch": 23,
    "TxnOffsetCommit": 28,
    "DescribeConfigs": 32,
    "AlterConfigs": 33,
    "CreatePartitions": 37,
    "DeleteGroups": 42,
    "IncrementalAlterConfigs": 44,
    "OffsetDelete": 47,
    "DescribeProducers": 61,
    "DescribeTransactions": 65,
    "ListTransactions": 66,
    "Produce": 0,
    "Fetch": 1,
    "Metadata": 3,
}
"""The APIs whose handlers raised on a null array (the first ten from the fuzz run), and
the others with arrays, each sent at its lowest and highest version with every array null."""


@pytest.mark.parametrize("api_key", list(REPRODUCERS.values()), ids=list(REPRODUCERS))
def test_null_arrays(
    null_broker: BrokerProcess, versions: dict[int, tuple[int, int]], api_key: int
) -> None:
    low, high = versions[api_key]
    for version in sorted({low, high}):
        payload = body(api_key, version, NULL_ARRAYS)
        result, code = send(null_broker.port, api_key, version, payload)
        outcome = Outcome(
            api_key, version, NULL_ARRAYS.id, decodes(api_key, version, payload), result, code
        )
        assert problem(outcome) is None, problem(outcome)
        if not outcome.decodes and has_top_level_error(api_key, version):
            assert code == INVALID_REQUEST
    no_tracebacks(null_broker)
    serves_a_client(null_broker)


def test_null_topics_in_offset_fetch_mean_all(null_broker: BrokerProcess) -> None:
    """OffsetFetch v2+ (one group): topics null asks for every committed offset of the group;
    a commit's null metadata is kept as "" (Kafka's NO_METADATA)."""
    group = f"null-fields-{uuid.uuid4().hex[:8]}"
    commit = request_class(8, 2)
    with WireClient(null_broker.port) as client:
        response = client.request(
            8,
            2,
            commit.OffsetCommitRequest(
                group_id=commit.GroupId(group),
                member_id="",
                topics=(
                    commit.OffsetCommitRequestTopic(
                        name=commit.TopicName(LIVE_TOPIC),
                        partitions=(
                            commit.OffsetCommitRequestPartition(
                                partition_index=commit.i32(0),
                                committed_offset=commit.i64(7),
                                committed_metadata=None,
                            ),
                        ),
                    ),
                ),
            ),
        )
        assert [int(p.error_code) for t in response.topics for p in t.partitions] == [NONE]
        fetch = request_class(9, 2)
        answer = client.request(
            9, 2, fetch.OffsetFetchRequest(group_id=fetch.GroupId(group), topics=None)
        )
    assert int(answer.error_code) == NONE
    got = {
        (str(t.name), int(p.partition_index)): (int(p.committed_offset), p.metadata)
        for t in answer.topics
        for p in t.partitions
    }
    assert got == {(LIVE_TOPIC, 0): (7, "")}


def test_null_topics_in_metadata_mean_all(null_broker: BrokerProcess) -> None:
    """Metadata v1+: topics null lists every topic."""
    m = request_class(3, 1)
    with WireClient(null_broker.port) as client:
        answer = client.request(3, 1, m.MetadataRequest(topics=None))
    assert LIVE_TOPIC in {str(t.name) for t in answer.topics}


def test_null_keys_in_describe_configs_mean_all(null_broker: BrokerProcess) -> None:
    """DescribeConfigs: configuration_keys null describes every config of the resource."""
    m = request_class(32, 1)
    with WireClient(null_broker.port) as client:
        answer = client.request(
            32,
            1,
            m.DescribeConfigsRequest(
                resources=(
                    m.DescribeConfigsResource(
                        resource_type=m.i8(2), resource_name=LIVE_TOPIC, configuration_keys=None
                    ),
                ),
                include_synonyms=False,
            ),
        )
    (result,) = answer.results
    assert int(result.error_code) == NONE
    names = {c.name for c in result.configs}
    assert {"retention.ms", "cleanup.policy"} <= names, names


# ------------------------------------------------------------------- the sweep


def test_sweep_every_api_and_version(
    null_broker: BrokerProcess, versions: dict[int, tuple[int, int]]
) -> None:
    """Every advertised API and version, each with every shape of `e2e_sweep.SHAPES` (null,
    empty and one-entry arrays, null and empty strings, -1, 0, 1 and the integer extremes),
    one connection per request."""
    log_before = len(null_broker.log_text())
    started = time.monotonic()
    outcomes = sweep(null_broker.port, versions, SHAPES)
    took = time.monotonic() - started
    assert len(outcomes) >= 10 * len(versions), len(outcomes)
    problems = [p for o in outcomes if (p := problem(o)) is not None]
    assert not problems, problems[:20]
    no_tracebacks(null_broker)
    closed = sum(o.result == "closed" for o in outcomes)
    closings = null_broker.log_text()[log_before:].count("closing ")
    assert closings <= closed, f"{closings} log lines for {closed} closed connections"
    assert took < 60, f"sweep took {took:.0f} s"
    serves_a_client(null_broker)


# ------------------------------------------------------------------- SASL listener

SASL_USER = "alice"
SASL_CLIENT = {
    "security.protocol": "SASL_PLAINTEXT",
    "sasl.mechanism": "PLAIN",
    "sasl.username": SASL_USER,
    "sasl.password": USERS[SASL_USER],
}
SASL_KEYS = frozenset({17, 36})  # SaslHandshake, SaslAuthenticate


@pytest.fixture(scope="module")
def sasl_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    base = Path(tmp_path_factory.mktemp("null-fields-sasl"))
    users = write_users(base / "users.txt")
    with running_broker(
        base / "data",
        {**listener_env("SASL_PLAINTEXT", None, users), "AUTO_CREATE_TOPICS_ENABLE": False},
        "null-fields-sasl",
    ) as proc:
        with WireClient(proc.port) as client:
            login = sasl_plain(SASL_USER, USERS[SASL_USER])
            login(client.sock)
            topics = request_class(19, 2)
            client.request(
                19,
                2,
                topics.CreateTopicsRequest(
                    topics=tuple(
                        topics.CreatableTopic(
                            name=topics.TopicName(name),
                            num_partitions=topics.i32(1),
                            replication_factor=topics.i16(1),
                            assignments=(),
                            configs=(),
                        )
                        for name in (LIVE_TOPIC, SWEEP_NAME)
                    ),
                    timeout=topics.CreateTopicsRequest.__dataclass_fields__["timeout"].default,
                    validate_only=False,
                ),
            )
        yield proc


def before_login_problem(outcome: Outcome) -> str | None:
    """Before SASL login: ApiVersions is served as anywhere; SaslHandshake and
    SaslAuthenticate are answered (a failure closes the connection after its answer), or
    closed when they do not decode; every other API closes the connection."""
    if outcome.api_key == 18:
        return problem(outcome)
    if outcome.api_key in SASL_KEYS:
        if outcome.decodes and outcome.result.startswith("answered"):
            return None
        if not outcome.decodes and outcome.result == "closed":
            return None
        return f"{outcome.case}: {outcome.result} before login"
    if outcome.result == "closed":
        return None
    return f"{outcome.case}: {outcome.result} before login (expected a close)"


def test_sweep_on_a_sasl_listener(sasl_broker: BrokerProcess) -> None:
    """The sweep before login (every advertised API and version) and after a PLAIN login
    (all but the SASL APIs themselves) on one SASL_PLAINTEXT broker."""
    with WireClient(sasl_broker.port) as client:
        response = client.request(18, 0, api_versions_v0())
    versions = {int(k.api_key): (int(k.min_version), int(k.max_version)) for k in response.api_keys}
    assert set(versions) >= SASL_KEYS
    started = time.monotonic()
    before = sweep(sasl_broker.port, versions, SHAPES)
    problems = [p for o in before if (p := before_login_problem(o)) is not None]
    assert not problems, problems[:20]
    after_apis = {k: v for k, v in versions.items() if k not in SASL_KEYS}
    login = sasl_plain(SASL_USER, USERS[SASL_USER])
    after = sweep(sasl_broker.port, after_apis, SHAPES, login=login)
    problems = [p for o in after if (p := problem(o)) is not None]
    assert not problems, problems[:20]
    took = time.monotonic() - started
    no_tracebacks(sasl_broker)
    assert took < 60, f"sweeps took {took:.0f} s"
    serves_a_client(sasl_broker, **SASL_CLIENT)
