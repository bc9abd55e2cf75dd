"""The admin APIs Kafka 3.7+/4.x clients call, through confluent-kafka's AdminClient and
kafka-python's KafkaAdminClient, with the answers a diskless, leaderless cluster gives
(see the README's "Admin APIs on a diskless cluster").

confluent-kafka 2.16 has no method for DescribeLogDirs, List/AlterPartitionReassignments
or DescribeQuorum: those are called through kafka-python only."""

from __future__ import annotations

import datetime
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import (
    ElectionType,
    KafkaError,
    KafkaException,
    TopicCollection,
    TopicPartition,
)
from confluent_kafka.admin import (
    AclOperation,
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    NewTopic,
)
from confluent_kafka.admin import ResourceType as CResourceType
from e2e_harness import BrokerProcess, kafka_admin
from e2e_wire import WireClient
from kafka import TopicPartition as KTopicPartition
from kafka.admin import ConfigResource as KConfigResource
from kafka.admin import ConfigResourceType
from kafka.structs import OffsetAndMetadata
from kio.index import load_request_schema

TIMEOUT = 15.0
ELECTION_NOT_NEEDED = 84
TOPIC_OPERATIONS = {
    "READ",
    "WRITE",
    "CREATE",
    "DELETE",
    "ALTER",
    "DESCRIBE",
    "DESCRIBE_CONFIGS",
    "ALTER_CONFIGS",
}
TOPIC_BITS = sum(1 << op for op in (3, 4, 5, 6, 7, 8, 10, 11))


@pytest.fixture
def admin(shared_broker: BrokerProcess) -> Iterator[AdminClient]:
    yield AdminClient({"bootstrap.servers": shared_broker.bootstrap})


def _result(future: Any) -> Any:
    return future.result(timeout=TIMEOUT)


def _create(admin: AdminClient, name: str, partitions: int = 1) -> None:
    _result(admin.create_topics([NewTopic(name, partitions, 1)], operation_timeout=TIMEOUT)[name])


def _produce(bootstrap: str, topic: str, count: int) -> None:
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for i in range(count):
        producer.produce(topic, value=b"x" * 100, key=str(i).encode(), partition=0)
    assert producer.flush(TIMEOUT) == 0


# ---------------------------------------------------------------- DescribeTopicPartitions


def test_describe_topics_confluent(admin: AdminClient, topic_name: str) -> None:
    _create(admin, topic_name, 3)
    futures = admin.describe_topics(
        TopicCollection([topic_name]), include_authorized_operations=True
    )
    description = _result(futures[topic_name])
    assert description.name == topic_name
    assert not description.is_internal
    assert [p.id for p in description.partitions] == [0, 1, 2]
    for p in description.partitions:
        assert p.leader is not None
        assert [n.id for n in p.replicas] == [n.id for n in p.isr]
    ops = {op.name for op in description.authorized_operations}
    assert ops == TOPIC_OPERATIONS
    assert AclOperation.READ in description.authorized_operations


def test_describe_topics_confluent_unknown(admin: AdminClient, topic_name: str) -> None:
    futures = admin.describe_topics(TopicCollection([topic_name]))
    with pytest.raises(KafkaException) as info:
        _result(futures[topic_name])
    assert "UNKNOWN_TOPIC" in info.value.args[0].name()


def test_describe_topic_partitions_kafka_python_pages(
    shared_broker: BrokerProcess, admin: AdminClient, topic_name: str
) -> None:
    first, second = topic_name + "-a", topic_name + "-b"
    _create(admin, first, 3)
    _create(admin, second, 2)
    seen: list[tuple[str, int]] = []
    with kafka_admin(shared_broker.bootstrap) as client:
        cursor = None
        pages = 0
        while True:
            page = client.describe_topic_partitions(  # type: ignore[attr-defined]
                [second, first, topic_name + "-missing"], response_partition_limit=2, cursor=cursor
            )
            pages += 1
            for topic in page["topics"]:
                if topic["name"].endswith("-missing"):
                    assert topic["error_code"] == 3  # UNKNOWN_TOPIC_OR_PARTITION
                    continue
                assert topic["error_code"] == 0
                assert topic["topic_authorized_operations"] == TOPIC_BITS
                seen += [(topic["name"], p["partition_index"]) for p in topic["partitions"]]
            cursor = page["next_cursor"]
            if cursor is None:
                break
            assert pages < 10
    assert seen == [(first, 0), (first, 1), (first, 2), (second, 0), (second, 1)]
    assert pages == 3


def test_metadata_and_describe_groups_fill_authorized_operations(
    shared_broker: BrokerProcess, admin: AdminClient, topic_name: str
) -> None:
    _create(admin, topic_name)
    group = topic_name + "-group"
    with kafka_admin(shared_broker.bootstrap) as client:
        (described,) = client.describe_topics([topic_name])  # type: ignore[attr-defined]
        # The group must exist: from DescribeGroups v6 (KIP-1043) a group that does not
        # is GROUP_ID_NOT_FOUND, and Kafka lists operations only for groups it describes.
        client.alter_group_offsets(  # type: ignore[attr-defined]
            group, {KTopicPartition(topic_name, 0): OffsetAndMetadata(0, "", -1)}
        )
        groups = client.describe_groups(  # type: ignore[attr-defined]
            [group], include_authorized_operations=True
        )
    assert set(described["authorized_operations"]) == TOPIC_OPERATIONS
    assert groups[group]["group_state"] == "Empty"
    assert set(groups[group]["authorized_operations"]) == {"READ", "DESCRIBE", "DELETE"}


# ---------------------------------------------------------------- DescribeLogDirs


def test_describe_log_dirs_kafka_python(
    shared_broker: BrokerProcess, admin: AdminClient, topic_name: str
) -> None:
    _create(admin, topic_name, 2)
    _produce(shared_broker.bootstrap, topic_name, 20)
    with kafka_admin(shared_broker.bootstrap) as client:
        answers = client.describe_log_dirs({topic_name: [0, 1, 7]})  # type: ignore[attr-defined]
    assert len(answers) == 1  # one broker
    (log_dir,) = answers[0]["log_dirs"]
    assert log_dir["error_code"] == 0
    assert log_dir["log_dir"].split("://")[0] in ("file", "s3")  # the object store's URL
    assert "@" not in log_dir["log_dir"] and "?" not in log_dir["log_dir"]
    assert log_dir["total_bytes"] == -1 and log_dir["usable_bytes"] == -1
    (topic,) = log_dir["topics"]
    sizes = {p["partition_index"]: p for p in topic["partitions"]}
    assert set(sizes) == {0, 1}  # partition 7 does not exist: left out, as Kafka does
    assert sizes[0]["partition_size"] > 20 * 100
    assert sizes[1]["partition_size"] == 0
    assert all(p["offset_lag"] == 0 and not p["is_future_key"] for p in sizes.values())


# ---------------------------------------------------------------- ElectLeaders


def test_elect_leaders_confluent(admin: AdminClient, topic_name: str) -> None:
    """As Kafka 4 answers for partitions already on their preferred leader: each named
    partition ELECTION_NOT_NEEDED (confluent-kafka, like Java's Admin, reports it per
    partition; kafka-leader-election.sh prints "Valid replica already elected")."""
    _create(admin, topic_name, 2)
    partitions = [TopicPartition(topic_name, 0), TopicPartition(topic_name, 1)]
    for election in (ElectionType.PREFERRED, ElectionType.UNCLEAN):
        result = _result(admin.elect_leaders(election, partitions))
        codes = {tp.partition: err.code() for tp, err in result.items()}
        assert codes == {0: KafkaError.ELECTION_NOT_NEEDED, 1: KafkaError.ELECTION_NOT_NEEDED}
    result = _result(admin.elect_leaders(ElectionType.UNCLEAN, [TopicPartition(topic_name, 9)]))
    (error,) = result.values()
    assert error is not None and error.code() == KafkaError.UNKNOWN_TOPIC_OR_PART


def test_elect_leaders_kafka_python(
    shared_broker: BrokerProcess, admin: AdminClient, topic_name: str
) -> None:
    """kafka-python's elect_leaders treats ELECTION_NOT_NEEDED as success (no exception),
    as Kafka's tool does."""
    _create(admin, topic_name, 2)
    with kafka_admin(shared_broker.bootstrap) as client:
        named = client.elect_leaders(0, {topic_name: [0, 1]})  # type: ignore[attr-defined]
    errors = {
        p.partition_id: p.error_code
        for r in named.replica_election_results
        for p in r.partition_result
    }
    assert errors == {0: ELECTION_NOT_NEEDED, 1: ELECTION_NOT_NEEDED}


def test_elect_leaders_for_every_partition(
    shared_broker: BrokerProcess, admin: AdminClient, topic_name: str
) -> None:
    """A request naming no partitions (kafka-leader-election.sh --all-topic-partitions;
    the Python clients always name them, so this one is sent raw) gets each topic with no
    partition rows: Kafka leaves out the partitions that need no election."""
    _create(admin, topic_name, 2)
    request = load_request_schema(43, 2)(
        election_type=1, topic_partitions=None, timeout=datetime.timedelta(seconds=15)
    )
    with WireClient(shared_broker.port) as client:
        answer = client.request(43, 2, request)
    rows = {r.topic: r.partition_result for r in answer.replica_election_results}
    assert rows[topic_name] == ()
    assert answer.error_code == 0


# ---------------------------------------------------------------- reassignments


def test_partition_reassignments_kafka_python(
    shared_broker: BrokerProcess, admin: AdminClient, topic_name: str
) -> None:
    from kafka.errors import NoReassignmentInProgressError, UnknownTopicOrPartitionError

    _create(admin, topic_name, 2)
    cluster = _result(admin.describe_cluster())
    broker_id = cluster.nodes[0].id
    with kafka_admin(shared_broker.bootstrap) as client:
        assert client.list_partition_reassignments() == {}  # type: ignore[attr-defined]
        results = client.alter_partition_reassignments(  # type: ignore[attr-defined]
            {
                KTopicPartition(topic_name, 0): [broker_id],
                KTopicPartition(topic_name, 1): None,
                KTopicPartition(topic_name, 5): [broker_id],
            }
        )
        assert results[KTopicPartition(topic_name, 0)] is None  # accepted, nothing moves
        assert results[KTopicPartition(topic_name, 1)] is NoReassignmentInProgressError
        assert results[KTopicPartition(topic_name, 5)] is UnknownTopicOrPartitionError
        listed = client.list_partition_reassignments(  # type: ignore[attr-defined]
            [KTopicPartition(topic_name, 0)]
        )
        assert listed == {}


# ---------------------------------------------------------------- DescribeQuorum


def test_describe_quorum_says_there_is_none(shared_broker: BrokerProcess) -> None:
    with kafka_admin(shared_broker.bootstrap) as client:
        answer = client.describe_metadata_quorum()  # type: ignore[attr-defined]
    (topic,) = answer["topics"]
    assert topic["topic_name"] == "__cluster_metadata"
    (partition,) = topic["partitions"]
    assert "UnknownTopicOrPartition" in partition["error"]
    assert "no KRaft metadata quorum" in partition["error"]
    assert partition["current_voters"] == []


# ---------------------------------------------------------------- configs


def _broker_resource(admin: AdminClient, **kwargs: Any) -> ConfigResource:
    broker_id = str(_result(admin.describe_cluster()).nodes[0].id)
    return ConfigResource(CResourceType.BROKER, broker_id, **kwargs)


def test_advertised_listeners_is_a_static_broker_config(admin: AdminClient) -> None:
    resource = _broker_resource(admin)
    configs = _result(admin.describe_configs([resource])[resource])
    for name in ("advertised.listeners", "listeners"):
        assert configs[name].source == ConfigSource.STATIC_BROKER_CONFIG.value, name
        assert configs[name].value.startswith("PLAINTEXT://")


def test_broker_config_alterations_answered_per_key(
    shared_broker: BrokerProcess, admin: AdminClient
) -> None:
    reset = _broker_resource(
        admin,
        incremental_configs=[
            ConfigEntry("background.threads", None, incremental_operation=AlterConfigOpType.DELETE)
        ],
    )
    _result(admin.incremental_alter_configs([reset])[reset])  # a reset is a no-op: accepted
    change = _broker_resource(
        admin,
        incremental_configs=[
            ConfigEntry("background.threads", "3", incremental_operation=AlterConfigOpType.SET),
            ConfigEntry("num.partitions", "3", incremental_operation=AlterConfigOpType.SET),
            # applied at runtime, but not when another key of the request is refused
            ConfigEntry("log.retention.ms", "1000", incremental_operation=AlterConfigOpType.SET),
        ],
    )
    with pytest.raises(KafkaException) as info:
        _result(admin.incremental_alter_configs([change])[change])
    error = info.value.args[0]
    assert error.name() == "INVALID_REQUEST"
    assert "Cannot update these configs dynamically: ['num.partitions']" in error.str()
    described = _result(admin.describe_configs([_broker_resource(admin)])[_broker_resource(admin)])
    assert described["log.retention.ms"].value != "1000"
    assert "background.threads" not in described  # nothing of the refused request is stored
    with kafka_admin(shared_broker.bootstrap) as client:
        broker_id = str(_result(admin.describe_cluster()).nodes[0].id)
        # A key Kafka changes at runtime is stored (with no effect here), then reset.
        for value in ("5", ("DELETE", None)):
            result = client.alter_configs(  # type: ignore[attr-defined]
                [KConfigResource(ConfigResourceType.BROKER, broker_id, {"num.io.threads": value})],
                raise_on_unknown=False,
                incremental=True,
            )
            assert result == {"broker": {broker_id: "OK"}}, result
            if value == "5":
                found = client.describe_configs(  # type: ignore[attr-defined]
                    [KConfigResource(ConfigResourceType.BROKER, broker_id)]
                )["broker"][broker_id]
                assert found["num.io.threads"]["value"] == value


def test_subtracting_the_last_list_value_leaves_it_empty(
    admin: AdminClient, topic_name: str
) -> None:
    _create(admin, topic_name)
    resource = ConfigResource(
        CResourceType.TOPIC,
        topic_name,
        incremental_configs=[
            ConfigEntry(
                "cleanup.policy", "delete", incremental_operation=AlterConfigOpType.SUBTRACT
            )
        ],
    )
    _result(admin.incremental_alter_configs([resource])[resource])
    described = ConfigResource(CResourceType.TOPIC, topic_name)
    policy = _result(admin.describe_configs([described])[described])["cleanup.policy"]
    assert policy.value == ""
    assert policy.source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value
