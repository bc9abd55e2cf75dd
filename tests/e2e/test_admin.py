"""Topic administration against a real broker with real admin clients: kafka-python's
KafkaAdminClient, confluent-kafka's AdminClient, and the `lakelog topics` CLI."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import KafkaException, TopicPartition
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    NewPartitions,
    NewTopic,
    OffsetSpec,
)
from confluent_kafka.admin import ResourceType as CResourceType
from e2e_harness import BrokerProcess, kafka_admin, wait_until
from kafka.admin import ConfigResource as KConfigResource
from kafka.admin import ConfigResourceType
from kafka.errors import (
    InvalidPartitionsError,
    InvalidTopicError,
    TopicAlreadyExistsError,
    UnknownTopicOrPartitionError,
)

TIMEOUT = 15.0
LAKELOG = Path(sys.executable).with_name("lakelog")


@pytest.fixture
def admin(shared_broker: BrokerProcess) -> Iterator[AdminClient]:
    yield AdminClient({"bootstrap.servers": shared_broker.bootstrap})


def _result(future: Any) -> Any:
    return future.result(timeout=TIMEOUT)


def _create(
    admin: AdminClient,
    name: str,
    partitions: int = 1,
    rf: int = 1,
    config: dict[str, str] | None = None,
) -> None:
    _result(
        admin.create_topics(
            [NewTopic(name, partitions, rf, config=config or {})], operation_timeout=TIMEOUT
        )[name]
    )


def _error_name(exc: KafkaException) -> str:
    """The Kafka error name as librdkafka spells it (it shortens a few)."""
    name = str(exc.args[0].name())
    return "UNKNOWN_TOPIC_OR_PARTITION" if name == "UNKNOWN_TOPIC_OR_PART" else name


def _topic_configs(admin: AdminClient, name: str) -> dict[str, ConfigEntry]:
    resource = ConfigResource(CResourceType.TOPIC, name)
    return dict(_result(admin.describe_configs([resource])[resource]))


# ---------------------------------------------------------------- create


def test_create_with_replication_factor_3_and_configs(
    shared_broker: BrokerProcess, topic_name: str
) -> None:
    with kafka_admin(shared_broker.bootstrap) as client:
        response = client.create_topics(  # type: ignore[attr-defined]
            {
                topic_name: {
                    "num_partitions": 4,
                    "replication_factor": 3,
                    "configs": {"retention.ms": "3600000", "cleanup.policy": "compact"},
                }
            }
        )
        [created] = response["topics"]
        assert created["error_code"] == 0
        assert created["num_partitions"] == 4
        assert created["replication_factor"] == 3
        assert created["configs"]["retention.ms"]["value"] == "3600000"
        assert created["configs"]["cleanup.policy"]["value"] == "compact"
        client.wait_for_topics([topic_name], timeout_ms=int(TIMEOUT * 1000))  # type: ignore[attr-defined]
        [described] = client.describe_topics([topic_name])  # type: ignore[attr-defined]
    assert len(described["partitions"]) == 4


def test_create_with_broker_defaults(admin: AdminClient, topic_name: str) -> None:
    futures = admin.create_topics([NewTopic(topic_name)], operation_timeout=TIMEOUT)
    _result(futures[topic_name])
    metadata = admin.list_topics(topic_name, timeout=TIMEOUT)
    assert len(metadata.topics[topic_name].partitions) == 1


def test_validate_only_creates_nothing(admin: AdminClient, topic_name: str) -> None:
    futures = admin.create_topics(
        [NewTopic(topic_name, 2, 3)], validate_only=True, operation_timeout=TIMEOUT
    )
    _result(futures[topic_name])
    assert topic_name not in admin.list_topics(timeout=TIMEOUT).topics
    _create(admin, topic_name, 2)  # the name is still free


def test_duplicate_name(shared_broker: BrokerProcess, admin: AdminClient, topic_name: str) -> None:
    _create(admin, topic_name)
    with pytest.raises(KafkaException) as info:
        _create(admin, topic_name)
    assert _error_name(info.value) == "TOPIC_ALREADY_EXISTS"
    with kafka_admin(shared_broker.bootstrap) as client, pytest.raises(TopicAlreadyExistsError):
        client.create_topics({topic_name: {"num_partitions": 1}})  # type: ignore[attr-defined]


@pytest.mark.parametrize("bad", ["bad name", "..", "x" * 250, "a/b"])
def test_bad_names(shared_broker: BrokerProcess, bad: str) -> None:
    with kafka_admin(shared_broker.bootstrap) as client, pytest.raises(InvalidTopicError):
        client.create_topics({bad: {"num_partitions": 1}})  # type: ignore[attr-defined]


def test_bad_config_and_partitions(admin: AdminClient, topic_name: str) -> None:
    with pytest.raises(KafkaException) as info:
        _create(admin, topic_name, config={"retention.ms": "soon"})
    assert _error_name(info.value) == "INVALID_CONFIG"
    assert "retention.ms" in info.value.args[0].str()
    with pytest.raises(KafkaException) as info:
        _create(admin, topic_name, config={"no.such.config": "1"})
    assert _error_name(info.value) == "INVALID_CONFIG"
    assert topic_name not in admin.list_topics(timeout=TIMEOUT).topics


def test_manual_assignment(shared_broker: BrokerProcess, topic_name: str) -> None:
    with kafka_admin(shared_broker.bootstrap) as client:
        response = client.create_topics(  # type: ignore[attr-defined]
            {topic_name: {"assignments": {0: [0, 1], 1: [1, 0], 2: [0, 1]}}}
        )
        [created] = response["topics"]
        assert (created["num_partitions"], created["replication_factor"]) == (3, 2)


# ---------------------------------------------------------------- partitions


def test_create_partitions(
    shared_broker: BrokerProcess, admin: AdminClient, topic_name: str
) -> None:
    _create(admin, topic_name, 2)
    _result(
        admin.create_partitions([NewPartitions(topic_name, 5)], operation_timeout=TIMEOUT)[
            topic_name
        ]
    )
    wait_until(
        lambda: (
            len(admin.list_topics(topic_name, timeout=TIMEOUT).topics[topic_name].partitions) == 5
        ),
        TIMEOUT,
        "5 partitions",
    )
    with pytest.raises(KafkaException) as info:
        _result(admin.create_partitions([NewPartitions(topic_name, 4)])[topic_name])
    assert _error_name(info.value) == "INVALID_PARTITIONS"
    with kafka_admin(shared_broker.bootstrap) as client, pytest.raises(InvalidPartitionsError):
        client.create_partitions({topic_name: 5})  # type: ignore[attr-defined]
    with pytest.raises(KafkaException) as info:
        _result(
            admin.create_partitions([NewPartitions(topic_name + "-missing", 4)])[
                topic_name + "-missing"
            ]
        )
    assert _error_name(info.value) == "UNKNOWN_TOPIC_OR_PARTITION"


# ---------------------------------------------------------------- configs


def test_describe_configs_defaults_and_overrides(admin: AdminClient, topic_name: str) -> None:
    _create(admin, topic_name, config={"retention.ms": "123456"})
    configs = _topic_configs(admin, topic_name)
    retention = configs["retention.ms"]
    assert retention.value == "123456"
    assert retention.source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value
    assert not retention.is_default
    policy = configs["cleanup.policy"]
    assert policy.value == "delete"
    assert policy.source == ConfigSource.DEFAULT_CONFIG.value
    assert policy.is_default
    assert not policy.is_read_only
    assert {"max.message.bytes", "segment.bytes", "min.insync.replicas"} <= configs.keys()


EXPLICIT_TOPIC_CONFIGS = {
    "cleanup.policy": "compact",
    "compression.type": "zstd",
    "delete.retention.ms": "1000",
    "file.delete.delay.ms": "1000",
    "flush.messages": "1000",
    "flush.ms": "1000",
    "follower.replication.throttled.replicas": "0:0",
    "index.interval.bytes": "8192",
    "leader.replication.throttled.replicas": "0:0",
    "local.retention.bytes": "-2",
    "local.retention.ms": "-2",
    "max.compaction.lag.ms": "100000",
    "max.message.bytes": "2000000",
    "message.downconversion.enable": "false",
    "message.timestamp.after.max.ms": "1000",
    "message.timestamp.before.max.ms": "1000",
    "message.timestamp.difference.max.ms": "1000",
    "message.timestamp.type": "LogAppendTime",
    "min.cleanable.dirty.ratio": "0.1",
    "min.compaction.lag.ms": "1000",
    "min.insync.replicas": "1",
    "preallocate": "true",
    "remote.storage.enable": "false",
    "retention.bytes": "1000000",
    "retention.ms": "1000000",
    "segment.bytes": "1000000",
    "segment.index.bytes": "1000000",
    "segment.jitter.ms": "1000",
    "segment.ms": "1000000",
    "unclean.leader.election.enable": "true",
}
"""A value for every topic config, some equal to the default (min.insync.replicas=1): a
config the topic sets is the topic's, whatever its value."""


def test_every_explicit_topic_config_is_reported_as_the_topics(
    shared_broker: BrokerProcess, admin: AdminClient, topic_name: str
) -> None:
    """Kafka reports a config a topic sets as DYNAMIC_TOPIC_CONFIG, even when its value is
    the default's; set at create time (confluent-kafka) or altered later (kafka-python)."""
    _create(admin, topic_name, config=EXPLICIT_TOPIC_CONFIGS)
    configs = _topic_configs(admin, topic_name)
    found = {name: (configs[name].value, configs[name].source) for name in EXPLICIT_TOPIC_CONFIGS}
    topic_source = ConfigSource.DYNAMIC_TOPIC_CONFIG.value
    assert found == {name: (v, topic_source) for name, v in EXPLICIT_TOPIC_CONFIGS.items()}
    assert not any(configs[name].is_default for name in EXPLICIT_TOPIC_CONFIGS)

    other = f"{topic_name}-altered"
    _create(admin, other)
    resource = KConfigResource(
        ConfigResourceType.TOPIC, other, configs={"min.insync.replicas": "2"}
    )
    with kafka_admin(shared_broker.bootstrap) as client:
        client.alter_configs([resource], incremental=True)  # type: ignore[attr-defined]
        result = client.describe_configs(  # type: ignore[attr-defined]
            [KConfigResource(ConfigResourceType.TOPIC, other)], config_filter="all"
        )
    entry = result["topic"][other]["min.insync.replicas"]
    assert (entry["value"], entry["config_source"]) == ("2", "DYNAMIC_TOPIC_CONFIG")


def test_describe_configs_kafka_python(
    shared_broker: BrokerProcess, admin: AdminClient, topic_name: str
) -> None:
    _create(admin, topic_name, config={"cleanup.policy": "compact"})
    with kafka_admin(shared_broker.bootstrap) as client:
        result = client.describe_configs(  # type: ignore[attr-defined]
            [KConfigResource(ConfigResourceType.TOPIC, topic_name)],
            include_synonyms=True,
            config_filter="all",
        )
    configs = result["topic"][topic_name]
    assert configs["cleanup.policy"]["value"] == "compact"
    assert configs["cleanup.policy"]["config_source"] == "DYNAMIC_TOPIC_CONFIG"
    synonyms = [s["name"] for s in configs["cleanup.policy"]["synonyms"]]
    assert synonyms == ["cleanup.policy", "log.cleanup.policy"]
    assert configs["retention.ms"]["config_source"] == "DEFAULT_CONFIG"


def test_describe_configs_unknown_topic(admin: AdminClient, topic_name: str) -> None:
    with pytest.raises(KafkaException) as info:
        _topic_configs(admin, topic_name)
    assert _error_name(info.value) == "UNKNOWN_TOPIC_OR_PARTITION"


def test_incremental_alter_set_delete_append(admin: AdminClient, topic_name: str) -> None:
    _create(admin, topic_name, config={"retention.ms": "1000"})
    resource = ConfigResource(
        CResourceType.TOPIC,
        topic_name,
        incremental_configs=[
            ConfigEntry("retention.ms", None, incremental_operation=AlterConfigOpType.DELETE),
            ConfigEntry("retention.bytes", "1048576", incremental_operation=AlterConfigOpType.SET),
            ConfigEntry(
                "cleanup.policy", "compact", incremental_operation=AlterConfigOpType.APPEND
            ),
        ],
    )
    _result(admin.incremental_alter_configs([resource])[resource])
    configs = _topic_configs(admin, topic_name)
    assert configs["retention.ms"].is_default
    assert configs["retention.bytes"].value == "1048576"
    assert configs["cleanup.policy"].value == "delete,compact"

    bad = ConfigResource(
        CResourceType.TOPIC,
        topic_name,
        incremental_configs=[
            ConfigEntry("retention.bytes", "lots", incremental_operation=AlterConfigOpType.SET),
        ],
    )
    with pytest.raises(KafkaException) as info:
        _result(admin.incremental_alter_configs([bad])[bad])
    assert _error_name(info.value) == "INVALID_CONFIG"
    assert _topic_configs(admin, topic_name)["retention.bytes"].value == "1048576"


def test_incremental_alter_validate_only(admin: AdminClient, topic_name: str) -> None:
    _create(admin, topic_name)
    resource = ConfigResource(
        CResourceType.TOPIC,
        topic_name,
        incremental_configs=[
            ConfigEntry("retention.ms", "5000", incremental_operation=AlterConfigOpType.SET),
        ],
    )
    _result(admin.incremental_alter_configs([resource], validate_only=True)[resource])
    assert _topic_configs(admin, topic_name)["retention.ms"].is_default


def test_alter_configs_replaces(
    shared_broker: BrokerProcess, admin: AdminClient, topic_name: str
) -> None:
    _create(admin, topic_name, config={"retention.ms": "1000", "cleanup.policy": "compact"})
    with kafka_admin(shared_broker.bootstrap) as client:
        result = client.alter_configs(  # type: ignore[attr-defined]
            [KConfigResource(ConfigResourceType.TOPIC, topic_name, {"retention.ms": "2000"})],
            incremental=False,
            raise_on_unknown=False,
        )
    assert result["topic"][topic_name] == "OK"
    configs = _topic_configs(admin, topic_name)
    assert configs["retention.ms"].value == "2000"
    # kafka-python re-sends the other modified configs, so a replace keeps them...
    assert configs["cleanup.policy"].value == "compact"
    # ...while confluent's legacy alter_configs replaces the whole set.
    resource = ConfigResource(CResourceType.TOPIC, topic_name, set_config={"retention.ms": "3000"})
    _result(admin.alter_configs([resource])[resource])
    configs = _topic_configs(admin, topic_name)
    assert configs["retention.ms"].value == "3000"
    assert configs["cleanup.policy"].is_default


def test_kafka_python_alter_and_reset(
    shared_broker: BrokerProcess, admin: AdminClient, topic_name: str
) -> None:
    _create(admin, topic_name)
    with kafka_admin(shared_broker.bootstrap) as client:
        resource = KConfigResource(
            ConfigResourceType.TOPIC,
            topic_name,
            {"retention.ms": "777", "max.message.bytes": "2000"},
        )
        result = client.alter_configs([resource])  # type: ignore[attr-defined]
        assert result["topic"][topic_name] == "OK"
        assert _topic_configs(admin, topic_name)["retention.ms"].value == "777"
        reset = KConfigResource(ConfigResourceType.TOPIC, topic_name, ["retention.ms"])
        client.reset_configs([reset])  # type: ignore[attr-defined]
    configs = _topic_configs(admin, topic_name)
    assert configs["retention.ms"].is_default
    assert configs["max.message.bytes"].value == "2000"


def test_broker_configs_are_read_only(shared_broker: BrokerProcess, admin: AdminClient) -> None:
    cluster = _result(admin.describe_cluster())
    broker_id = str(cluster.nodes[0].id)
    resource = ConfigResource(CResourceType.BROKER, broker_id)
    configs = _result(admin.describe_configs([resource])[resource])
    assert configs["broker.id"].value == broker_id
    assert configs["num.partitions"].is_read_only
    alter = ConfigResource(
        CResourceType.BROKER,
        broker_id,
        incremental_configs=[
            ConfigEntry("num.partitions", "3", incremental_operation=AlterConfigOpType.SET),
        ],
    )
    with pytest.raises(KafkaException) as info:
        _result(admin.incremental_alter_configs([alter])[alter])
    assert _error_name(info.value) == "INVALID_REQUEST"


# ---------------------------------------------------------------- delete


def test_delete_topics(shared_broker: BrokerProcess, admin: AdminClient, topic_name: str) -> None:
    _create(admin, topic_name, 2)
    _result(admin.delete_topics([topic_name], operation_timeout=TIMEOUT)[topic_name])
    wait_until(
        lambda: topic_name not in admin.list_topics(timeout=TIMEOUT).topics,
        TIMEOUT,
        "the topic to disappear",
    )
    with pytest.raises(KafkaException) as info:
        _result(admin.delete_topics([topic_name])[topic_name])
    assert _error_name(info.value) == "UNKNOWN_TOPIC_OR_PARTITION"
    with (
        kafka_admin(shared_broker.bootstrap) as client,
        pytest.raises(UnknownTopicOrPartitionError),
    ):
        client.delete_topics([topic_name])  # type: ignore[attr-defined]
    _create(admin, topic_name, 3)  # the name can be reused
    assert len(admin.list_topics(topic_name, timeout=TIMEOUT).topics[topic_name].partitions) == 3


def test_delete_topic_by_id(
    shared_broker: BrokerProcess, admin: AdminClient, topic_name: str
) -> None:
    _create(admin, topic_name)
    with kafka_admin(shared_broker.bootstrap) as client:
        [described] = client.describe_topics([topic_name])  # type: ignore[attr-defined]
        topic_id = uuid.UUID(str(described["topic_id"]))
        assert topic_id.int
        client.delete_topics([topic_id])  # type: ignore[attr-defined]
    wait_until(
        lambda: topic_name not in admin.list_topics(timeout=TIMEOUT).topics,
        TIMEOUT,
        "the topic to disappear",
    )


def _produce(bootstrap: str, topic: str, count: int) -> None:
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0})
    for i in range(count):
        producer.produce(topic, value=f"v{i}".encode(), partition=0)
        producer.flush(TIMEOUT)  # one batch per record: deletes may fall between batches
    assert producer.flush(TIMEOUT) == 0


def test_delete_records_moves_log_start(
    shared_broker: BrokerProcess, admin: AdminClient, topic_name: str
) -> None:
    _create(admin, topic_name, 2)
    _produce(shared_broker.bootstrap, topic_name, 10)
    tp = TopicPartition(topic_name, 0, 4)
    deleted = _result(admin.delete_records([tp])[tp])
    assert deleted.low_watermark == 4
    earliest = admin.list_offsets({TopicPartition(topic_name, 0): OffsetSpec.earliest()})
    assert _result(earliest[TopicPartition(topic_name, 0)]).offset == 4
    latest = admin.list_offsets({TopicPartition(topic_name, 0): OffsetSpec.latest()})
    assert _result(latest[TopicPartition(topic_name, 0)]).offset == 10

    with kafka_admin(shared_broker.bootstrap) as client:
        from kafka import TopicPartition as KTopicPartition

        result = client.delete_records(  # type: ignore[attr-defined]
            {KTopicPartition(topic_name, 0): -1}
        )
    assert result[KTopicPartition(topic_name, 0)]["low_watermark"] == 10


# ---------------------------------------------------------------- cluster


def test_describe_cluster(shared_broker: BrokerProcess, admin: AdminClient) -> None:
    # librdkafka answers describe_cluster from Metadata; kafka-python sends DescribeCluster.
    cluster = _result(admin.describe_cluster())
    assert cluster.cluster_id
    assert [(n.host, n.port) for n in cluster.nodes] == [("127.0.0.1", shared_broker.port)]
    with kafka_admin(shared_broker.bootstrap) as client:
        described = client.describe_cluster()  # type: ignore[attr-defined]
    assert described["cluster_id"] == cluster.cluster_id
    brokers = described["brokers"]
    assert [(b["host"], b["port"]) for b in brokers] == [("127.0.0.1", shared_broker.port)]
    assert described["controller_id"] == min(b["broker_id"] for b in brokers)
    assert {"DESCRIBE", "ALTER", "ALTER_CONFIGS"} <= set(described["authorized_operations"])


def test_two_brokers_share_one_cluster(broker_factory: Callable[..., BrokerProcess]) -> None:
    first = broker_factory()
    second = broker_factory(env={"BROKER_ID": 7}, data_dir=first.data_dir)
    with kafka_admin(second.bootstrap) as client:
        described = client.describe_cluster()  # type: ignore[attr-defined]
        assert sorted(b["broker_id"] for b in described["brokers"]) == [0, 7]
        assert described["controller_id"] == 0
        client.create_topics(  # type: ignore[attr-defined]
            {"made-on-7": {"num_partitions": 2, "configs": {"retention.ms": "42"}}}
        )
    admin = AdminClient({"bootstrap.servers": first.bootstrap})
    assert _topic_configs(admin, "made-on-7")["retention.ms"].value == "42"
    resource = ConfigResource(CResourceType.BROKER, "7")
    configs = _result(admin.describe_configs([resource])[resource])
    assert configs["broker.id"].value == "7"


async def test_aiokafka_admin_old_versions(shared_broker: BrokerProcess, topic_name: str) -> None:
    """aiokafka sends only non-flexible versions (CreateTopics v2-4, DescribeConfigs v1-2)."""
    from aiokafka.admin import AIOKafkaAdminClient
    from aiokafka.admin import NewPartitions as ANewPartitions
    from aiokafka.admin import NewTopic as ANewTopic
    from aiokafka.admin.config_resource import ConfigResource as AConfigResource
    from aiokafka.admin.config_resource import ConfigResourceType as AConfigResourceType

    client = AIOKafkaAdminClient(bootstrap_servers=shared_broker.bootstrap)
    await client.start()
    try:
        created = await client.create_topics(
            [ANewTopic(topic_name, 2, 3, topic_configs={"retention.ms": "99"})]
        )
        assert [t[1] for t in created.topic_errors] == [0]
        grown = await client.create_partitions({topic_name: ANewPartitions(3)})
        assert [t[1] for t in grown.topic_errors] == [0]
        [described] = await client.describe_configs(
            [AConfigResource(AConfigResourceType.TOPIC, topic_name)]
        )
        [resource] = described.resources
        assert resource[0] == 0
        values = {c[0]: c[1] for c in resource[4]}
        assert values["retention.ms"] == "99"
        assert values["cleanup.policy"] == "delete"
        deleted = await client.delete_topics([topic_name])
        assert [t[1] for t in deleted.topic_error_codes] == [0]
    finally:
        await client.close()


# ---------------------------------------------------------------- the CLI


def _cli(bootstrap: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(LAKELOG), "topics", *args, "--bootstrap-server", bootstrap],
        capture_output=True,
        text=True,
        timeout=60,
        env=_cli_env(),
    )


def _cli_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("LAKELOG_")}
    return {**env, "COLUMNS": "200", "NO_COLOR": "1"}


def test_cli_create_list_describe_delete(shared_broker: BrokerProcess, topic_name: str) -> None:
    bootstrap = shared_broker.bootstrap
    created = _cli(
        bootstrap,
        "create",
        topic_name,
        "--partitions",
        "3",
        "--replication-factor",
        "3",
        "--config",
        "retention.ms=60000",
        "--config",
        "cleanup.policy=compact",
    )
    assert created.returncode == 0, created.stderr
    assert f"Created topic {topic_name}." in created.stdout

    listed = _cli(bootstrap, "list")
    assert listed.returncode == 0, listed.stderr
    assert topic_name in listed.stdout.split()

    described = _cli(bootstrap, "describe", topic_name)
    assert described.returncode == 0, described.stderr
    assert "PartitionCount: 3" in described.stdout
    assert "cleanup.policy=compact,retention.ms=60000" in described.stdout
    # Piped, the partition table is plain lines: "PARTITION LEADER REPLICAS ISR" rows.
    rows = [line.split() for line in described.stdout.splitlines()]
    assert {row[0] for row in rows if row and row[0].isdigit()} == {"0", "1", "2"}

    again = _cli(bootstrap, "create", topic_name)
    assert again.returncode == 1
    assert "TOPIC_ALREADY_EXISTS" in again.stderr
    assert _cli(bootstrap, "create", topic_name, "--if-not-exists").returncode == 0

    grown = _cli(bootstrap, "alter", topic_name, "--partitions", "4")
    assert grown.returncode == 0, grown.stderr
    assert "PartitionCount: 4" in _cli(bootstrap, "describe", topic_name).stdout

    deleted = _cli(bootstrap, "delete", topic_name)
    assert deleted.returncode == 0, deleted.stderr
    assert topic_name not in _cli(bootstrap, "list").stdout.split()
    missing = _cli(bootstrap, "delete", topic_name)
    assert missing.returncode == 1
    assert "does not exist" in missing.stderr
    assert _cli(bootstrap, "delete", topic_name, "--if-exists").returncode == 0


def test_cli_errors(shared_broker: BrokerProcess, topic_name: str) -> None:
    bad = _cli(shared_broker.bootstrap, "create", "bad name")
    assert bad.returncode == 1
    assert "INVALID_TOPIC_EXCEPTION" in bad.stderr
    bad_config = _cli(shared_broker.bootstrap, "create", topic_name, "--config", "retention.ms")
    assert bad_config.returncode == 2  # a usage error, as click reports them
    assert bad_config.stderr.startswith("error: ") and bad_config.stderr.count("\n") == 1
    unreachable = _cli("127.0.0.1:1", "list")
    assert unreachable.returncode == 1
    assert "cannot reach" in unreachable.stderr
