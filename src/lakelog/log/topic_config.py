"""Topic configs: which names exist, their defaults, validation, and the effective values
the produce and retention paths use."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from lakelog.config import Settings
from lakelog.coordinator.log_types import TimestampType
from lakelog.coordinator.topic_types import TopicInfo
from lakelog.tables import table_config

TIMESTAMP_TYPES = {
    "CreateTime": TimestampType.CREATE_TIME,
    "LogAppendTime": TimestampType.LOG_APPEND_TIME,
}
CLEANUP_POLICIES = {"", "delete", "compact", "compact,delete", "delete,compact"}
"""Empty (Kafka 4.1+, e.g. after subtracting the last value): neither deletes nor compacts."""


def _int(min_value: int) -> object:
    def check(value: str) -> str | None:
        try:
            number = int(value)
        except ValueError:
            return "must be an integer"
        return None if number >= min_value else f"must be >= {min_value}"

    return check


def _ratio(value: str) -> str | None:
    try:
        number = float(value)
    except ValueError:
        return "must be a number"
    return None if 0.0 <= number <= 1.0 else "must be between 0 and 1"


def _choice(choices: set[str] | dict[str, object]) -> object:
    def check(value: str) -> str | None:
        return None if value.replace(" ", "") in choices else f"must be one of {sorted(choices)}"

    return check


def _any(value: str) -> str | None:
    return None


SUBJECT_STRATEGIES = ("TopicNameStrategy", "RecordNameStrategy", "TopicRecordNameStrategy")
STRATEGY_PACKAGE = "io.confluent.kafka.serializers.subject."


def _strategy(value: str) -> str | None:
    short = value.removeprefix(STRATEGY_PACKAGE)
    return None if short in SUBJECT_STRATEGIES else f"must be one of {list(SUBJECT_STRATEGIES)}"


# name -> validator; the configs that change behaviour here. Others Kafka knows are accepted
# and stored so tools that set them keep working (listed in ACCEPTED).
VALIDATORS = {
    "retention.ms": _int(-1),
    "retention.bytes": _int(-1),
    "max.message.bytes": _int(0),
    "message.timestamp.type": _choice(TIMESTAMP_TYPES),
    "cleanup.policy": _choice(CLEANUP_POLICIES),
    "delete.retention.ms": _int(0),
    "segment.ms": _int(1),
    "segment.bytes": _int(14),
    "min.compaction.lag.ms": _int(0),
    "max.compaction.lag.ms": _int(1),
    "min.cleanable.dirty.ratio": _ratio,
    # Confluent Server's produce-time schema validation (see lakelog.registry.validation).
    "confluent.key.schema.validation": _choice({"true", "false"}),
    "confluent.value.schema.validation": _choice({"true", "false"}),
    "confluent.key.subject.name.strategy": _strategy,
    "confluent.value.subject.name.strategy": _strategy,
    # Table topics (lakelog.tables.table_config; the schemas are checked with the rest of
    # the topic's table configs by `table_config.check_change`).
    table_config.MODE: _choice(set(table_config.MODES)),
    table_config.PARTITION: _choice(set(table_config.PARTITIONS)),
    table_config.VALUE_SCHEMA: _any,
    table_config.VALUE_SCHEMA_TYPE: _choice(set(table_config.SCHEMA_TYPES)),
    table_config.KEY_SCHEMA: _any,
    table_config.KEY_SCHEMA_TYPE: _choice(set(table_config.SCHEMA_TYPES)),
}
ACCEPTED = {
    "min.insync.replicas",
    "compression.type",
    "unclean.leader.election.enable",
    "flush.messages",
    "flush.ms",
    "index.interval.bytes",
    "message.downconversion.enable",
    "preallocate",
    "segment.index.bytes",
    "segment.jitter.ms",
    "file.delete.delay.ms",
    "follower.replication.throttled.replicas",
    "leader.replication.throttled.replicas",
    "local.retention.ms",
    "local.retention.bytes",
    "message.timestamp.difference.max.ms",
    "message.timestamp.before.max.ms",
    "message.timestamp.after.max.ms",
    "remote.storage.enable",
}


def defaults(settings: Settings) -> dict[str, str]:
    """Broker-level defaults, reported by DescribeConfigs for configs a topic did not set."""
    return {
        "retention.ms": str(settings.log_retention_ms),
        "retention.bytes": str(settings.log_retention_bytes),
        "max.message.bytes": str(settings.message_max_bytes),
        "message.timestamp.type": "CreateTime",
        "cleanup.policy": "delete",
        "delete.retention.ms": str(24 * 3600 * 1000),
        "segment.bytes": str(1024 * 1024 * 1024),
        "segment.ms": str(7 * 24 * 3600 * 1000),
        "min.compaction.lag.ms": "0",
        "max.compaction.lag.ms": str(2**63 - 1),
        "min.cleanable.dirty.ratio": "0.5",
        "min.insync.replicas": "1",
        "compression.type": "producer",
        "confluent.key.schema.validation": "false",
        "confluent.value.schema.validation": "false",
        "confluent.key.subject.name.strategy": STRATEGY_PACKAGE + "TopicNameStrategy",
        "confluent.value.subject.name.strategy": STRATEGY_PACKAGE + "TopicNameStrategy",
        **table_config.DEFAULTS,
    }


def validate(configs: Mapping[str, str | None]) -> str | None:
    """The first problem with the given topic configs, or None."""
    for name, value in configs.items():
        if name in VALIDATORS:
            if value is None:
                return f"{name}: a value is required"
            problem = VALIDATORS[name](value)  # type: ignore[operator]
            if problem:
                return f"{name}: {problem}"
        elif name not in ACCEPTED:
            return f"unknown topic config {name}"
    return None


@dataclass(frozen=True, slots=True)
class EffectiveConfig:
    retention_ms: int
    retention_bytes: int
    max_message_bytes: int
    timestamp_type: TimestampType
    cleanup_policy: str
    key_schema_validation: bool = False
    value_schema_validation: bool = False
    key_subject_strategy: str = "TopicNameStrategy"
    value_subject_strategy: str = "TopicNameStrategy"


@dataclass(frozen=True, slots=True)
class CompactionConfig:
    """The configs that decide when the broker compacts a partition (Kafka's meanings)."""

    delete_retention_ms: int
    segment_ms: int
    segment_bytes: int
    min_compaction_lag_ms: int
    max_compaction_lag_ms: int
    min_cleanable_dirty_ratio: float


def compaction_config(topic: TopicInfo, settings: Settings) -> CompactionConfig:
    merged = {**defaults(settings), **topic.configs}
    return CompactionConfig(
        delete_retention_ms=int(merged["delete.retention.ms"]),
        segment_ms=int(merged["segment.ms"]),
        segment_bytes=int(merged["segment.bytes"]),
        min_compaction_lag_ms=int(merged["min.compaction.lag.ms"]),
        max_compaction_lag_ms=int(merged["max.compaction.lag.ms"]),
        min_cleanable_dirty_ratio=float(merged["min.cleanable.dirty.ratio"]),
    )


def effective(topic: TopicInfo, settings: Settings) -> EffectiveConfig:
    merged = {**defaults(settings), **topic.configs}
    return EffectiveConfig(
        retention_ms=int(merged["retention.ms"]),
        retention_bytes=int(merged["retention.bytes"]),
        max_message_bytes=int(merged["max.message.bytes"]),
        timestamp_type=TIMESTAMP_TYPES.get(
            merged["message.timestamp.type"], TimestampType.CREATE_TIME
        ),
        cleanup_policy=merged["cleanup.policy"].replace(" ", ""),
        key_schema_validation=merged["confluent.key.schema.validation"] == "true",
        value_schema_validation=merged["confluent.value.schema.validation"] == "true",
        key_subject_strategy=merged["confluent.key.subject.name.strategy"].removeprefix(
            STRATEGY_PACKAGE
        ),
        value_subject_strategy=merged["confluent.value.subject.name.strategy"].removeprefix(
            STRATEGY_PACKAGE
        ),
    )
