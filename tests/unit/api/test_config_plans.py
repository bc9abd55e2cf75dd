"""Describe entries and alter plans for topic configs (the pure half of api/configs)."""

from __future__ import annotations

import pytest

from lakelog.config import Settings
from lakelog.log.topic_config import ACCEPTED, VALIDATORS
from lakelog.server.api.configs import (
    AlterOp,
    ConfigProblem,
    ConfigSource,
    ConfigType,
    broker_entries,
    plan_incremental,
    plan_replace,
    topic_defaults,
    topic_entries,
)
from lakelog.server.cluster.dynamic_broker_configs import (
    DYNAMIC_KEYS,
    DynamicConfigError,
    check,
    layered,
)
from lakelog.server.cluster.kafka_dynamic_keys import is_dynamic
from lakelog.util.errors import ErrorCode


def test_every_known_config_is_described() -> None:
    names = [e.name for e in topic_entries({}, Settings())]
    assert names == sorted(names)
    assert set(names) >= set(VALIDATORS) | ACCEPTED


def test_defaults_versus_overrides() -> None:
    settings = Settings()
    entries = {e.name: e for e in topic_entries({"retention.ms": "1234"}, settings)}
    own = entries["retention.ms"]
    assert (own.value, own.source) == ("1234", ConfigSource.DYNAMIC_TOPIC_CONFIG)
    assert [s.name for s in own.synonyms] == ["retention.ms", "log.retention.ms"]
    policy = entries["cleanup.policy"]
    assert (policy.value, policy.source) == ("delete", ConfigSource.DEFAULT_CONFIG)
    assert policy.config_type == ConfigType.LIST
    assert not policy.read_only
    assert entries["max.message.bytes"].value == str(settings.message_max_bytes)


def test_broker_setting_shows_as_static_broker_config() -> None:
    settings = Settings(log_retention_ms=5000)
    entry = {e.name: e for e in topic_entries({}, settings)}["retention.ms"]
    assert (entry.value, entry.source) == ("5000", ConfigSource.STATIC_BROKER_CONFIG)


def test_broker_entries_are_read_only_but_the_dynamic_ones() -> None:
    entries = {e.name: e for e in broker_entries(Settings(broker_id=3))}
    assert entries["broker.id"].value == "3"
    writable = {name for name, e in entries.items() if not e.read_only}
    assert writable == {n for n in entries if n in DYNAMIC_KEYS or is_dynamic(n)}
    assert set(DYNAMIC_KEYS) <= writable
    assert {"log.cleanup.policy", "listeners"} <= writable  # Kafka changes them at runtime
    assert "broker.id" not in writable and "advertised.listeners" not in writable


def test_dynamic_layers_in_kafka_order() -> None:
    """This broker's value > the cluster default > static > default, all as synonyms."""
    settings = Settings(log_retention_ms=5000)
    entries = {
        e.name: e
        for e in broker_entries(
            settings,
            cluster={"log.retention.ms": "7000", "message.max.bytes": "2000"},
            own={"log.retention.ms": "9000"},
        )
    }
    retention = entries["log.retention.ms"]
    assert (retention.value, retention.source) == ("9000", ConfigSource.DYNAMIC_BROKER_CONFIG)
    assert [(s.value, s.source) for s in retention.synonyms] == [
        ("9000", ConfigSource.DYNAMIC_BROKER_CONFIG),
        ("7000", ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG),
        ("5000", ConfigSource.STATIC_BROKER_CONFIG),
    ]
    size = entries["message.max.bytes"]
    assert (size.value, size.source) == ("2000", ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG)
    assert entries["max.connections"].source == ConfigSource.DEFAULT_CONFIG


def test_layered_settings() -> None:
    static = Settings(log_retention_ms=5000, max_connections=50)
    layered_settings = layered(static, {"log.retention.ms": "7000"}, {"max.connections": "9"})
    assert (layered_settings.log_retention_ms, layered_settings.max_connections) == (7000, 9)
    assert layered(static, {}, {"unknown.key": "1"}) is static
    assert static.log_retention_ms == 5000


@pytest.mark.parametrize(
    ("configs", "words"),
    [
        ({"max.connections": "many"}, "Not a number of type INT"),
        ({"max.connections": str(2**31)}, "Not a number of type INT"),
        ({"log.retention.ms": "-2"}, "at least -1"),
        ({"message.max.bytes": "-1"}, "at least 0"),
    ],
)
def test_dynamic_values_checked(configs: dict[str, str], words: str) -> None:
    with pytest.raises(DynamicConfigError, match=words):
        check(configs)
    check({"log.retention.ms": "-1", "log.retention.bytes": str(2**62)})


def _fallback() -> dict[str, str]:
    return topic_defaults(Settings())


def test_incremental_set_and_delete() -> None:
    plan = plan_incremental(
        {"retention.ms": "1"},
        _fallback(),
        [("retention.ms", AlterOp.DELETE, None), ("retention.bytes", AlterOp.SET, "100")],
    )
    assert plan.set_configs == {"retention.bytes": "100"}
    assert plan.delete_configs == ["retention.ms"]


def test_append_and_subtract_start_from_the_default() -> None:
    plan = plan_incremental({}, _fallback(), [("cleanup.policy", AlterOp.APPEND, "compact")])
    assert plan.set_configs == {"cleanup.policy": "delete,compact"}
    plan = plan_incremental(
        {"cleanup.policy": "delete,compact"},
        _fallback(),
        [("cleanup.policy", AlterOp.SUBTRACT, "delete")],
    )
    assert plan.set_configs == {"cleanup.policy": "compact"}
    plan = plan_incremental(
        {"cleanup.policy": "compact"}, _fallback(), [("cleanup.policy", AlterOp.APPEND, "compact")]
    )
    assert plan.set_configs == {"cleanup.policy": "compact"}


def test_subtracting_the_last_list_value_leaves_it_empty() -> None:
    """Kafka 4.x accepts an empty cleanup.policy (it neither deletes nor compacts)."""
    plan = plan_incremental({}, _fallback(), [("cleanup.policy", AlterOp.SUBTRACT, "delete")])
    assert plan.set_configs == {"cleanup.policy": ""}


@pytest.mark.parametrize(
    ("ops", "error"),
    [
        ([("retention.ms", AlterOp.APPEND, "1")], ErrorCode.invalid_config),
        ([("retention.ms", AlterOp.SET, "x")], ErrorCode.invalid_config),
        ([("cleanup.policy", AlterOp.SET, "shred")], ErrorCode.invalid_config),
        ([("retention.ms", AlterOp.SET, None)], ErrorCode.invalid_request),
        ([("retention.ms", 9, "1")], ErrorCode.invalid_request),
        (
            [("retention.ms", AlterOp.SET, "1"), ("retention.ms", AlterOp.DELETE, None)],
            ErrorCode.invalid_request,
        ),
        ([("bogus.config", AlterOp.SET, "1")], ErrorCode.invalid_config),
    ],
)
def test_incremental_refusals(ops: list[tuple[str, int, str | None]], error: ErrorCode) -> None:
    with pytest.raises(ConfigProblem) as info:
        plan_incremental({}, _fallback(), ops)
    assert info.value.error == error


def test_replace() -> None:
    assert plan_replace([("retention.ms", "5")]) == {"retention.ms": "5"}
    with pytest.raises(ConfigProblem):
        plan_replace([("retention.ms", "-5")])
    with pytest.raises(ConfigProblem):
        plan_replace([("retention.ms", None)])


def test_topic_default_from_a_dynamic_broker_layer() -> None:
    """A topic without its own retention.ms gets the cluster-wide dynamic default, and its
    synonyms name every layer down to the static setting."""
    settings = Settings(log_retention_ms=5000)
    entries = {
        e.name: e
        for e in topic_entries(
            {"retention.bytes": "10"}, settings, cluster={"log.retention.ms": "7000"}, broker_own={}
        )
    }
    retention = entries["retention.ms"]
    assert (retention.value, retention.source) == (
        "7000",
        ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG,
    )
    assert [(s.name, s.value, s.source) for s in retention.synonyms] == [
        ("log.retention.ms", "7000", ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG),
        ("log.retention.ms", "5000", ConfigSource.STATIC_BROKER_CONFIG),
    ]
    size = entries["retention.bytes"]
    assert (size.value, size.source) == ("10", ConfigSource.DYNAMIC_TOPIC_CONFIG)
