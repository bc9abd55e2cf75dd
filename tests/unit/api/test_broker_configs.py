"""Altering BROKER configs: which keys Kafka changes at runtime (with its checks and types),
the refusal of the others, and how stored keys are described (secrets without values)."""

from __future__ import annotations

import pytest

from lakelog.config import Settings
from lakelog.server.api.broker_configs import broker_alter_problem
from lakelog.server.api.config_entries import cluster_default_entries, topic_entries
from lakelog.server.api.configs import ConfigSource, ConfigType, broker_entries
from lakelog.server.cluster.dynamic_broker_configs import (
    MAX_VALUE_CHARS,
    DynamicConfigError,
    check,
    layered,
    without_effect,
)
from lakelog.server.cluster.kafka_dynamic_keys import (
    is_sensitive,
    lookup,
    redacted,
    scope_problems,
    value_problem,
)
from lakelog.util.errors import ErrorCode

SET, DELETE = 0, 1


def test_resets_are_no_ops() -> None:
    assert broker_alter_problem([("log.retention.ms", DELETE), ("num.partitions", DELETE)]) is None
    assert broker_alter_problem([]) is None


def test_keys_kafka_cannot_change_are_refused() -> None:
    problem = broker_alter_problem([("log.dirs", SET), ("broker.id", SET), ("broker.id", SET)])
    assert problem == (
        ErrorCode.invalid_request,
        "Cannot update these configs dynamically: ['broker.id', 'log.dirs'].",
    )


def test_listeners_are_static_broker_configs() -> None:
    entries = {e.name: e for e in broker_entries(Settings())}
    for name in ("advertised.listeners", "listeners", "broker.id"):
        assert entries[name].source == ConfigSource.STATIC_BROKER_CONFIG, name
    assert entries["num.partitions"].source == ConfigSource.DEFAULT_CONFIG


@pytest.mark.parametrize(
    ("name", "kind", "per_broker"),
    [
        ("sasl.kerberos.min.time.before.relogin", ConfigType.LONG, True),
        ("sasl.enabled.mechanisms", ConfigType.LIST, True),
        ("num.io.threads", ConfigType.INT, False),
        ("num.network.threads", ConfigType.INT, False),
        ("max.connections", ConfigType.INT, False),
        ("log.cleaner.threads", ConfigType.INT, False),
        ("log.cleanup.policy", ConfigType.LIST, False),
        ("log.roll.ms", ConfigType.LONG, False),
        ("min.insync.replicas", ConfigType.INT, False),
        ("metric.reporters", ConfigType.LIST, False),
        ("leader.replication.throttled.rate", ConfigType.LONG, False),
        ("ssl.keystore.password", ConfigType.PASSWORD, True),
        ("listener.name.internal.ssl.keystore.location", ConfigType.STRING, True),
        ("listener.name.internal.max.connections", ConfigType.INT, False),
        ("listener.name.sasl_ssl.plain.sasl.jaas.config", ConfigType.PASSWORD, True),
        ("listener.name.sasl_ssl.sasl.login.class", ConfigType.CLASS, True),
    ],
)
def test_kafka_dynamic_keys(name: str, kind: ConfigType, per_broker: bool) -> None:
    key = lookup(name)
    assert key is not None
    assert (key.type, key.per_broker) == (kind, per_broker)
    assert is_sensitive(name) == (kind == ConfigType.PASSWORD)


@pytest.mark.parametrize(
    "name",
    ["broker.id", "log.dirs", "log.retention.hours", "no.such.config", "listener.name.x.bogus"],
)
def test_keys_kafka_cannot_change(name: str) -> None:
    assert lookup(name) is None


def test_where_a_key_may_be_set() -> None:
    """SSL stores only per listener; per-broker keys not at the cluster-wide default."""
    assert scope_problems(["ssl.keystore.location"], cluster_wide=False) == [
        "These security configs can be dynamically updated only per-listener using the "
        "listener prefix: ['ssl.keystore.location']"
    ]
    relogin = "sasl.kerberos.min.time.before.relogin"
    assert scope_problems([relogin, "num.io.threads"], cluster_wide=False) == []
    assert scope_problems([relogin, "num.io.threads"], cluster_wide=True) == [
        "Cannot update these configs at default cluster level, broker id must be specified: "
        f"['{relogin}']"
    ]


def test_values_parse_as_their_type() -> None:
    assert value_problem("x", ConfigType.LONG, "60000") is None
    assert value_problem("x", ConfigType.LONG, "soon") == (
        "Invalid value soon for configuration x: Not a number of type LONG"
    )
    assert "Not a number of type SHORT" in (value_problem("x", ConfigType.SHORT, "40000") or "")
    assert value_problem("x", ConfigType.DOUBLE, "0.8") is None
    assert "DOUBLE" in (value_problem("x", ConfigType.DOUBLE, "most") or "")
    assert "either true or false" in (value_problem("x", ConfigType.BOOLEAN, "yes") or "")
    assert value_problem("x", ConfigType.LIST, "a,b") is None
    check({"sasl.kerberos.min.time.before.relogin": "60000", "num.io.threads": "16"})
    with pytest.raises(DynamicConfigError, match="Not a number of type INT"):
        check({"num.io.threads": "many"})
    with pytest.raises(DynamicConfigError, match="at least 0"):
        check({"max.connections": "-1"})
    with pytest.raises(DynamicConfigError, match="is not ip:count"):
        check({"max.connections.per.ip.overrides": "10.0.0.1"})
    with pytest.raises(DynamicConfigError, match="longer than"):
        check({"metric.reporters": "x" * (MAX_VALUE_CHARS + 1)})
    with pytest.raises(DynamicConfigError, match="Cannot update"):
        check({"broker.id": "3"})


def test_only_applied_keys_change_settings() -> None:
    stored = {
        "max.connections.per.ip.overrides": "10.0.0.1:5",
        "num.io.threads": "16",
        "message.max.bytes": "2000",
    }
    settings = layered(Settings(), stored, {})
    assert settings.connections_per_ip_overrides == {"10.0.0.1": 5}
    assert settings.message_max_bytes == 2000
    assert without_effect(stored) == ["num.io.threads"]
    assert redacted({"ssl.keystore.password": "s3cret", "num.io.threads": "16"}) == {
        "ssl.keystore.password": "[hidden]",
        "num.io.threads": "16",
    }


def test_stored_keys_are_described_and_secrets_are_not() -> None:
    secret = "listener.name.internal.ssl.keystore.password"
    entries = {
        e.name: e
        for e in broker_entries(
            Settings(),
            cluster={"num.io.threads": "16", "log.cleanup.policy": "compact"},
            own={secret: "s3cret", "num.io.threads": "32"},
        )
    }
    threads = entries["num.io.threads"]
    assert (threads.value, threads.source, threads.config_type) == (
        "32",
        ConfigSource.DYNAMIC_BROKER_CONFIG,
        ConfigType.INT,
    )
    assert [(s.value, s.source) for s in threads.synonyms] == [
        ("32", ConfigSource.DYNAMIC_BROKER_CONFIG),
        ("16", ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG),
    ]
    password = entries[secret]
    assert (password.value, password.sensitive, password.read_only) == (None, True, False)
    assert [s.value for s in password.synonyms] == [None]
    policy = entries["log.cleanup.policy"]
    assert (policy.value, policy.source) == (
        "compact",
        ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG,
    )
    [default] = cluster_default_entries({"ssl.keystore.password": "s3cret"})
    assert (default.value, default.sensitive) == (None, True)


def test_topics_layer_only_the_applied_broker_keys() -> None:
    """A stored log.cleanup.policy changes no topic here: a topic does not claim it."""
    cluster = {"log.cleanup.policy": "compact", "log.retention.ms": "5000"}
    entries = {e.name: e for e in topic_entries({}, Settings(), cluster, {})}
    assert (entries["cleanup.policy"].value, entries["cleanup.policy"].source) == (
        "delete",
        ConfigSource.DEFAULT_CONFIG,
    )
    assert (entries["retention.ms"].value, entries["retention.ms"].source) == (
        "5000",
        ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG,
    )
