"""Dynamic broker configs on a cluster of two brokers sharing one coordinator: a
cluster-wide default set through one broker holds on the other within seconds, a
broker's own value wins over it, DescribeConfigs shows Kafka's sources and synonyms, and
the new message.max.bytes refuses a record that was fine before."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from cluster_support import start_cluster
from confluent_kafka import KafkaError, Producer
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    ResourceType,
)
from e2e_fixtures import BrokerFactory
from e2e_harness import create_topic, kafka_admin, wait_until
from group_clients import unique
from kafka.admin import ConfigResource as KConfigResource
from kafka.admin import ConfigResourceType, NewTopic

TIMEOUT = 15.0


def _alter(admin: AdminClient, name: str, *entries: ConfigEntry) -> None:
    resource = ConfigResource(ResourceType.BROKER, name, incremental_configs=list(entries))
    admin.incremental_alter_configs([resource])[resource].result(timeout=TIMEOUT)


def _describe(admin: AdminClient, name: str) -> dict[str, Any]:
    resource = ConfigResource(ResourceType.BROKER, name)
    return admin.describe_configs([resource])[resource].result(timeout=TIMEOUT)


def _lakelog(*args: str) -> str:
    done = subprocess.run(
        [sys.executable, "-m", "lakelog", "configs", "--entity-type", "brokers", *args],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def _produce_error(bootstrap: str, topic: str, size: int) -> str | None:
    """The error name of one record of `size` bytes sent to every partition's broker, or
    None when it was stored."""
    errors: list[str | None] = []
    producer = Producer({"bootstrap.servers": bootstrap, "message.timeout.ms": 10_000})
    producer.produce(
        topic,
        value=b"x" * size,
        on_delivery=lambda err, _msg: errors.append(err.name() if err else None),
    )
    producer.flush(TIMEOUT)
    return errors[0] if errors else "no delivery report"


def test_cluster_default_and_per_broker_values(
    broker_factory: BrokerFactory, tmp_path: Path
) -> None:
    one, two = start_cluster(broker_factory, tmp_path / "cluster", [None, None])
    admin_one = AdminClient({"bootstrap.servers": one.bootstrap})
    admin_two = AdminClient({"bootstrap.servers": two.bootstrap})
    topic = unique("dyn")
    create_topic(two.bootstrap, topic, 1)
    assert _produce_error(two.bootstrap, topic, 5000) is None

    # Neither confluent-kafka nor kafka-python accepts the empty broker name of the cluster
    # default; `lakelog configs --entity-default` (kafka-configs' flag) sends it.
    _lakelog(
        "--alter", "--entity-default", "--add-config", "message.max.bytes=2000", "-b", one.bootstrap
    )
    [default] = json.loads(
        _lakelog("--describe", "--entity-default", "--json", "-b", one.bootstrap)
    )
    assert default["entity_name"] == ""
    assert [(c["name"], c["value"], c["source"]) for c in default["configs"]] == [
        ("message.max.bytes", "2000", "DYNAMIC_DEFAULT_BROKER_CONFIG")
    ]

    def two_has_it() -> bool:
        entry = _describe(admin_two, "2")["message.max.bytes"]
        return entry.value == "2000" and (
            entry.source == ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG.value
        )

    wait_until(two_has_it, 20, "broker 2 to apply the cluster-wide default")
    # Both brokers refuse the record now (whichever of them the partition is placed on).
    assert _produce_error(one.bootstrap, topic, 5000) == "MSG_SIZE_TOO_LARGE"
    assert _produce_error(two.bootstrap, topic, 5000) == "MSG_SIZE_TOO_LARGE"
    assert _produce_error(two.bootstrap, topic, 100) is None

    # A broker's own value wins over the default; every layer is a synonym.
    own = ConfigEntry("message.max.bytes", "100000", incremental_operation=AlterConfigOpType.SET)
    _alter(admin_two, "2", own)
    entry = _describe(admin_two, "2")["message.max.bytes"]
    assert (entry.value, entry.source) == ("100000", ConfigSource.DYNAMIC_BROKER_CONFIG.value)
    # (confluent-kafka keys synonyms by name, so all layers are read through the CLI)
    [two_described] = json.loads(
        _lakelog("--describe", "--entity-name", "2", "--json", "-b", two.bootstrap)
    )
    [size] = [c for c in two_described["configs"] if c["name"] == "message.max.bytes"]
    assert [(s["value"], s["source"]) for s in size["synonyms"]] == [
        ("100000", "DYNAMIC_BROKER_CONFIG"),
        ("2000", "DYNAMIC_DEFAULT_BROKER_CONFIG"),
        ("1048588", "DEFAULT_CONFIG"),
    ]
    assert not entry.is_read_only
    assert _describe(admin_one, "1")["message.max.bytes"].value == "2000"

    # Removing both layers brings the static value back everywhere.
    reset = ConfigEntry("message.max.bytes", None, incremental_operation=AlterConfigOpType.DELETE)
    _alter(admin_two, "2", reset)
    _lakelog(
        "--alter", "--entity-default", "--delete-config", "message.max.bytes", "-b", one.bootstrap
    )
    wait_until(
        lambda: (
            _describe(admin_two, "2")["message.max.bytes"].source
            == ConfigSource.DEFAULT_CONFIG.value
        ),
        20,
        "broker 2 to drop the dynamic values",
    )
    assert _produce_error(two.bootstrap, topic, 5000) is None

    # Kafka's refusals: a bad value, and no partial application.
    bad = ConfigEntry("max.connections", "lots", incremental_operation=AlterConfigOpType.SET)
    try:
        _alter(admin_one, "1", bad)
    except Exception as exc:  # confluent-kafka raises KafkaException
        error: KafkaError = exc.args[0]
        assert error.name() == "INVALID_REQUEST" and "Not a number" in error.str()
    else:
        raise AssertionError("max.connections=lots was accepted")

    # kafka-python sets and reads a per-broker value.
    with kafka_admin(one.bootstrap) as client:
        result = client.alter_configs(  # type: ignore[attr-defined]
            [KConfigResource(ConfigResourceType.BROKER, "1", {"log.retention.ms": "86400000"})],
            raise_on_unknown=False,
        )
        described = client.describe_configs(  # type: ignore[attr-defined]
            [KConfigResource(ConfigResourceType.BROKER, "1")]
        )
    assert result == {"broker": {"1": "OK"}}, result
    retention = described["broker"]["1"]["log.retention.ms"]
    assert retention["value"] == "86400000"
    assert retention["config_source"] == "DYNAMIC_BROKER_CONFIG"


def _refusal(admin: AdminClient, name: str, *entries: ConfigEntry) -> tuple[str, str]:
    """The (error name, message) an alteration is refused with."""
    try:
        _alter(admin, name, *entries)
    except Exception as exc:  # confluent-kafka raises KafkaException
        error: KafkaError = exc.args[0]
        return error.name(), error.str()
    raise AssertionError(f"{[e.name for e in entries]} was accepted")


def _set(name: str, value: str) -> ConfigEntry:
    return ConfigEntry(name, value, incremental_operation=AlterConfigOpType.SET)


def test_every_kafka_dynamic_key_is_stored_and_described(broker_factory: BrokerFactory) -> None:
    """Keys Kafka changes at runtime but Lakelog has no use for (a SASL relogin time, thread
    counts, a listener's key store password) are accepted with Kafka's checks, stored and
    described (the password without its value), and the broker logs that they have no
    effect; keys Kafka cannot change, or only elsewhere, are refused as Kafka refuses them."""
    broker = broker_factory()
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    [broker_id] = admin.list_topics(timeout=TIMEOUT).brokers
    name = str(broker_id)
    relogin = "sasl.kerberos.min.time.before.relogin"
    secret = "listener.name.plaintext.ssl.keystore.password"
    _alter(
        admin,
        name,
        _set(relogin, "60000"),
        _set("num.io.threads", "16"),
        _set(secret, "s3cret-value"),
        ConfigEntry(
            "metric.reporters", "a.Reporter", incremental_operation=AlterConfigOpType.APPEND
        ),
    )
    described = _describe(admin, name)
    dynamic = ConfigSource.DYNAMIC_BROKER_CONFIG.value
    assert (described[relogin].value, described[relogin].source) == ("60000", dynamic)
    assert (described["num.io.threads"].value, described["num.io.threads"].source) == (
        "16",
        dynamic,
    )
    assert described["metric.reporters"].value == "a.Reporter"
    password = described[secret]
    assert (password.value, password.is_sensitive, password.source) == (None, True, dynamic)
    assert not described[relogin].is_read_only

    # kafka-python reads the same, the secret without its value too.
    with kafka_admin(broker.bootstrap) as client:
        found = client.describe_configs(  # type: ignore[attr-defined]
            [KConfigResource(ConfigResourceType.BROKER, name)]
        )["broker"][name]
    assert found[relogin]["value"] == "60000"
    assert found[secret]["value"] is None and found[secret]["is_sensitive"]

    # An applied key is a topic's default: CreateTopics' answer (v5+) says where it is from.
    _alter(admin, name, _set("log.retention.ms", "3600000"))
    with kafka_admin(broker.bootstrap) as client:
        created = client.create_topics(  # type: ignore[attr-defined]
            [NewTopic(unique("dyn-created"), 1, 1)]
        )
    [topic] = created["topics"]
    retention = topic["configs"]["retention.ms"]
    assert (retention["value"], retention["config_source"]) == ("3600000", "DYNAMIC_BROKER_CONFIG")
    assert topic["configs"]["cleanup.policy"]["config_source"] == "DEFAULT_CONFIG"

    # The cluster-wide default takes cluster-level keys, through `lakelog configs`.
    _lakelog(
        "--alter",
        "--entity-default",
        "--add-config",
        "log.cleaner.threads=4",
        "-b",
        broker.bootstrap,
    )
    [default] = json.loads(
        _lakelog("--describe", "--entity-default", "--json", "-b", broker.bootstrap)
    )
    assert [(c["name"], c["value"], c["source"]) for c in default["configs"]] == [
        ("log.cleaner.threads", "4", "DYNAMIC_DEFAULT_BROKER_CONFIG")
    ]

    # Kafka's refusals, and nothing stored by a refused request.
    refused = _refusal(
        admin, name, _set("ssl.keystore.location", "/k.jks"), _set("num.io.threads", "8")
    )
    assert refused[0] == "INVALID_REQUEST" and "only per-listener" in refused[1]
    refused = _refusal(admin, name, _set("broker.id", "7"))
    assert (
        refused[0] == "INVALID_REQUEST" and "Cannot update these configs dynamically" in refused[1]
    )
    refused = _refusal(admin, name, _set("no.such.config", "1"))
    assert refused[0] == "INVALID_REQUEST"
    refused = _refusal(admin, name, _set(relogin, "soon"))
    assert refused == (
        "INVALID_REQUEST",
        f"Invalid value soon for configuration {relogin}: Not a number of type LONG",
    )
    assert _describe(admin, name)["num.io.threads"].value == "16"
    done = subprocess.run(
        [
            *(sys.executable, "-m", "lakelog", "configs", "--entity-type", "brokers", "--alter"),
            *("--entity-default", "--add-config", f"{relogin}=1", "-b", broker.bootstrap),
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode != 0
    assert "broker id must be specified" in done.stdout + done.stderr

    log = broker.log_text()
    assert "no effect in Lakelog" in log and relogin in log
    assert "s3cret-value" not in log
