"""Hostile input to the Kafka 4.x admin APIs (DescribeTopicPartitions, DescribeLogDirs,
ElectLeaders, Alter/ListPartitionReassignments, DescribeQuorum): malformed bodies get an
error answer or a closed connection, well-formed but hostile values get Kafka error codes,
and the broker stays up, logs no traceback and serves a real client afterwards."""

from __future__ import annotations

import datetime
import random
import struct
from typing import Any

import pytest
from e2e_harness import BrokerProcess, create_topic
from e2e_wire import WireClient, request_class
from kio.index import load_request_schema
from test_bad_input_lengths import HUGE, closed_or_answered, header, serves_a_real_client, sized

pytestmark = pytest.mark.timeout(240)

UNKNOWN_TOPIC_OR_PARTITION, INVALID_REQUEST, INVALID_REPLICA_ASSIGNMENT = 3, 42, 39
TOPIC = "admin-bad-input"

# (api key, versions) of the new APIs; flexible from the version given.
APIS = {75: (range(0, 1), 0), 35: (range(1, 6), 2), 43: (range(0, 3), 2)}
APIS |= {45: (range(0, 2), 0), 46: (range(0, 1), 0), 55: (range(0, 3), 0)}


def _frames() -> dict[str, bytes]:
    rng = random.Random(16)
    frames: dict[str, bytes] = {}
    for key, (versions, flexible_from) in APIS.items():
        for version in versions:
            head = header(key, version, version >= flexible_from)
            frames[f"{key}-v{version}-empty"] = sized(head)
            frames[f"{key}-v{version}-huge-length"] = sized(head + HUGE + b"\x00" * 8)
            frames[f"{key}-v{version}-int32-max"] = sized(head + struct.pack(">i", 0x7FFFFFFF))
            frames[f"{key}-v{version}-noise"] = sized(head + rng.randbytes(40))
    return frames


def _answer(client: WireClient, key: int, version: int, **fields: object) -> Any:
    return client.request(key, version, load_request_schema(key, version)(**fields))


@pytest.fixture
def admin_broker(broker: BrokerProcess) -> BrokerProcess:
    create_topic(broker.bootstrap, TOPIC, partitions=2)
    return broker


def test_malformed_admin_bodies_do_not_take_the_broker_down(admin_broker: BrokerProcess) -> None:
    outcomes = {}
    for name, frame in _frames().items():
        with WireClient(admin_broker.port) as client:
            client.send_raw(frame)
            outcomes[name] = closed_or_answered(client)
        assert admin_broker.alive(), f"broker died on {name}: {admin_broker.exit_codes}"
    assert set(outcomes.values()) <= {"closed", "answered"}, outcomes
    serves_a_real_client(admin_broker, TOPIC)
    assert admin_broker.tracebacks() == [], admin_broker.tracebacks()


def test_hostile_values_get_error_codes(admin_broker: BrokerProcess) -> None:
    dtp = request_class(75, 0)
    elect = request_class(43, 2)
    alter = request_class(45, 1)
    second = datetime.timedelta(seconds=1)
    with WireClient(admin_broker.port) as client:
        # A cursor outside the topics asked for, and a negative cursor partition.
        answer = _answer(
            client,
            75,
            0,
            topics=(dtp.TopicRequest(name=TOPIC),),
            response_partition_limit=-5,
            cursor=dtp.Cursor(topic_name="elsewhere", partition_index=0),
        )
        assert [int(t.error_code) for t in answer.topics] == [INVALID_REQUEST]
        answer = _answer(
            client,
            75,
            0,
            topics=(),
            response_partition_limit=2**31 - 1,
            cursor=dtp.Cursor(topic_name=TOPIC, partition_index=-1),
        )
        assert answer.next_cursor is None
        # A limit below 1 still makes progress: one partition a page.
        answer = _answer(
            client, 75, 0, topics=(dtp.TopicRequest(name=TOPIC),), response_partition_limit=0
        )
        assert [len(t.partitions) for t in answer.topics] == [1]
        assert (answer.next_cursor.topic_name, answer.next_cursor.partition_index) == (TOPIC, 1)
        # Negative, huge and repeated partitions; an unknown election type.
        answer = _answer(
            client,
            43,
            2,
            election_type=7,
            topic_partitions=(
                elect.TopicPartitions(topic=TOPIC, partitions=(0, 0, -1, 2**31 - 1)),
            ),
            timeout=second,
        )
        codes = [
            int(p.error_code) for r in answer.replica_election_results for p in r.partition_result
        ]
        assert codes == [INVALID_REQUEST] * 3
        # Reassignments: negative broker ids, duplicates, empty lists, unknown partitions.
        partitions = (
            alter.ReassignablePartition(partition_index=0, replicas=(-3,)),
            alter.ReassignablePartition(partition_index=1, replicas=(0, 0)),
            alter.ReassignablePartition(partition_index=0, replicas=()),
            alter.ReassignablePartition(partition_index=-1, replicas=(0,)),
        )
        answer = _answer(
            client,
            45,
            1,
            timeout=second,
            allow_replication_factor_change=False,
            topics=(alter.ReassignableTopic(name=TOPIC, partitions=partitions),),
        )
        codes = [int(p.error_code) for t in answer.responses for p in t.partitions]
        assert codes == [INVALID_REPLICA_ASSIGNMENT] * 3 + [UNKNOWN_TOPIC_OR_PARTITION]
        # DescribeLogDirs for partitions that do not exist: left out.
        logs = request_class(35, 4)
        answer = _answer(
            client,
            35,
            4,
            topics=(logs.DescribableLogDirTopic(topic=TOPIC, partitions=(-1, 99, 2**31 - 1)),),
        )
        assert [r.topics for r in answer.results] == [()]
    assert admin_broker.alive()
    assert admin_broker.tracebacks() == [], admin_broker.tracebacks()
