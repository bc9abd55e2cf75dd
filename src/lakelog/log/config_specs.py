"""Kafka's config resource types and how each topic config is described (type, stock
default, broker synonym): the tables DescribeConfigs answers from, and what mirrors copy.
Below the API handlers so that lakelog.mirror can use them without importing a handler."""

from __future__ import annotations

import enum
from dataclasses import dataclass

TOPIC_RESOURCE = 2
BROKER_RESOURCE = 4
STANDARD_AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
"""What `authorizer.class.name` says with the authorizer on: tools read it to tell an
empty ACL listing from a cluster without ACLs (librdkafka drops DescribeAcls' error)."""
GROUP_RESOURCE = 32
MIRROR_RESOURCE = 64
"""Cluster mirrors (KIP-1279), served by lakelog.mirror.admin; private until Kafka
assigns the resource a type."""


class ConfigSource(enum.IntEnum):
    DYNAMIC_TOPIC_CONFIG = 1
    DYNAMIC_BROKER_CONFIG = 2
    DYNAMIC_DEFAULT_BROKER_CONFIG = 3
    STATIC_BROKER_CONFIG = 4
    DEFAULT_CONFIG = 5
    GROUP_CONFIG = 8


class ConfigType(enum.IntEnum):
    UNKNOWN = 0
    BOOLEAN = 1
    STRING = 2
    INT = 3
    SHORT = 4
    LONG = 5
    DOUBLE = 6
    LIST = 7
    CLASS = 8
    PASSWORD = 9


class AlterOp(enum.IntEnum):
    SET = 0
    DELETE = 1
    APPEND = 2
    SUBTRACT = 3


@dataclass(frozen=True, slots=True)
class ConfigSpec:
    """How one topic config is described: type, Kafka's stock default, the broker synonym
    and the Settings field behind it (for STATIC_BROKER_CONFIG)."""

    type: ConfigType
    stock_default: str
    broker_name: str | None = None
    settings_field: str | None = None


_LONG_MAX = str(2**63 - 1)
TOPIC_SPECS: dict[str, ConfigSpec] = {
    "cleanup.policy": ConfigSpec(ConfigType.LIST, "delete", "log.cleanup.policy"),
    "compression.type": ConfigSpec(ConfigType.STRING, "producer", "compression.type"),
    "confluent.key.schema.validation": ConfigSpec(ConfigType.BOOLEAN, "false"),
    "confluent.value.schema.validation": ConfigSpec(ConfigType.BOOLEAN, "false"),
    "confluent.key.subject.name.strategy": ConfigSpec(
        ConfigType.STRING, "io.confluent.kafka.serializers.subject.TopicNameStrategy"
    ),
    "confluent.value.subject.name.strategy": ConfigSpec(
        ConfigType.STRING, "io.confluent.kafka.serializers.subject.TopicNameStrategy"
    ),
    # Table topics (lakelog.tables.table_config).
    "lakelog.iceberg.key.schema": ConfigSpec(ConfigType.STRING, ""),
    "lakelog.iceberg.key.schema.type": ConfigSpec(ConfigType.STRING, "json"),
    "lakelog.iceberg.mode": ConfigSpec(ConfigType.STRING, "disabled"),
    "lakelog.iceberg.partition": ConfigSpec(ConfigType.STRING, "day(timestamp)"),
    "lakelog.iceberg.value.schema": ConfigSpec(ConfigType.STRING, ""),
    "lakelog.iceberg.value.schema.type": ConfigSpec(ConfigType.STRING, "json"),
    "delete.retention.ms": ConfigSpec(
        ConfigType.LONG, "86400000", "log.cleaner.delete.retention.ms"
    ),
    "file.delete.delay.ms": ConfigSpec(ConfigType.LONG, "60000", "log.segment.delete.delay.ms"),
    "flush.messages": ConfigSpec(ConfigType.LONG, _LONG_MAX, "log.flush.interval.messages"),
    "flush.ms": ConfigSpec(ConfigType.LONG, _LONG_MAX, "log.flush.interval.ms"),
    "follower.replication.throttled.replicas": ConfigSpec(ConfigType.LIST, ""),
    "index.interval.bytes": ConfigSpec(ConfigType.INT, "4096", "log.index.interval.bytes"),
    "leader.replication.throttled.replicas": ConfigSpec(ConfigType.LIST, ""),
    "local.retention.bytes": ConfigSpec(ConfigType.LONG, "-2", "log.local.retention.bytes"),
    "local.retention.ms": ConfigSpec(ConfigType.LONG, "-2", "log.local.retention.ms"),
    "max.compaction.lag.ms": ConfigSpec(
        ConfigType.LONG, _LONG_MAX, "log.cleaner.max.compaction.lag.ms"
    ),
    "max.message.bytes": ConfigSpec(
        ConfigType.INT, "1048588", "message.max.bytes", "message_max_bytes"
    ),
    "message.downconversion.enable": ConfigSpec(
        ConfigType.BOOLEAN, "true", "log.message.downconversion.enable"
    ),
    "message.timestamp.after.max.ms": ConfigSpec(
        ConfigType.LONG, _LONG_MAX, "log.message.timestamp.after.max.ms"
    ),
    "message.timestamp.before.max.ms": ConfigSpec(
        ConfigType.LONG, _LONG_MAX, "log.message.timestamp.before.max.ms"
    ),
    "message.timestamp.difference.max.ms": ConfigSpec(
        ConfigType.LONG, _LONG_MAX, "log.message.timestamp.difference.max.ms"
    ),
    "message.timestamp.type": ConfigSpec(
        ConfigType.STRING, "CreateTime", "log.message.timestamp.type"
    ),
    "min.cleanable.dirty.ratio": ConfigSpec(
        ConfigType.DOUBLE, "0.5", "log.cleaner.min.cleanable.ratio"
    ),
    "min.compaction.lag.ms": ConfigSpec(ConfigType.LONG, "0", "log.cleaner.min.compaction.lag.ms"),
    "min.insync.replicas": ConfigSpec(ConfigType.INT, "1", "min.insync.replicas"),
    "preallocate": ConfigSpec(ConfigType.BOOLEAN, "false", "log.preallocate"),
    "remote.storage.enable": ConfigSpec(ConfigType.BOOLEAN, "false"),
    "retention.bytes": ConfigSpec(
        ConfigType.LONG, "-1", "log.retention.bytes", "log_retention_bytes"
    ),
    "retention.ms": ConfigSpec(
        ConfigType.LONG, "604800000", "log.retention.ms", "log_retention_ms"
    ),
    "segment.bytes": ConfigSpec(ConfigType.INT, "1073741824", "log.segment.bytes"),
    "segment.index.bytes": ConfigSpec(ConfigType.INT, "10485760", "log.index.size.max.bytes"),
    "segment.jitter.ms": ConfigSpec(ConfigType.LONG, "0", "log.roll.jitter.ms"),
    "segment.ms": ConfigSpec(ConfigType.LONG, "604800000", "log.roll.ms"),
    "unclean.leader.election.enable": ConfigSpec(
        ConfigType.BOOLEAN, "false", "unclean.leader.election.enable"
    ),
}
LIST_CONFIGS = frozenset(n for n, s in TOPIC_SPECS.items() if s.type is ConfigType.LIST)


@dataclass(frozen=True, slots=True)
class Synonym:
    name: str
    value: str | None
    source: ConfigSource


@dataclass(frozen=True, slots=True)
class ConfigEntry:
    name: str
    value: str | None
    source: ConfigSource
    read_only: bool
    config_type: ConfigType
    synonyms: tuple[Synonym, ...] = ()
    sensitive: bool = False
    """A secret (PASSWORD type): described with a null value, as Kafka does."""
