"""Altering BROKER configs: answered key by key (Lakelog's broker settings are static)."""

from __future__ import annotations

from lakelog.config import Settings
from lakelog.server.api.broker_configs import broker_alter_problem
from lakelog.server.api.configs import ConfigSource, broker_entries
from lakelog.util.errors import ErrorCode

SET, DELETE = 0, 1


def test_resets_are_no_ops() -> None:
    assert broker_alter_problem([("log.retention.ms", DELETE), ("num.partitions", DELETE)]) is None
    assert broker_alter_problem([]) is None


def test_sets_name_each_key_and_what_to_do() -> None:
    problem = broker_alter_problem(
        [("message.max.bytes", SET), ("broker.id", SET), ("listener.name.x.ssl.key", SET)]
    )
    assert problem is not None
    error, message = problem
    assert error == ErrorCode.invalid_request
    assert "['listener.name.x.ssl.key', 'message.max.bytes']" in message
    assert "applies only ['log.retention.bytes', 'log.retention.ms'" in message
    assert "lakelog.toml" in message
    assert "Cannot update these configs dynamically: ['broker.id']" in message


def test_listeners_are_static_broker_configs() -> None:
    entries = {e.name: e for e in broker_entries(Settings())}
    for name in ("advertised.listeners", "listeners", "broker.id"):
        assert entries[name].source == ConfigSource.STATIC_BROKER_CONFIG, name
    assert entries["num.partitions"].source == ConfigSource.DEFAULT_CONFIG
