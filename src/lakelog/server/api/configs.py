"""DescribeConfigs, AlterConfigs and IncrementalAlterConfigs.

Topic configs live in the coordinator (only the ones a topic set); everything else is the
broker default, reported the way Kafka reports it so admin tools show the same picture.
Broker configs are static here (set by flags, env or lakelog.toml), so they are described
read-only; altering them is answered key by key (`broker_configs`).
"""

from __future__ import annotations

import datetime
import enum
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from lakelog.config import Settings
from lakelog.coordinator.topic_types import AlterTopicConfigsRequest
from lakelog.groups import group_configs
from lakelog.log import topic_config
from lakelog.security.acl import Operation
from lakelog.server.api import authz
from lakelog.server.api.broker_configs import broker_alter_problem
from lakelog.server.api.context import RequestContext, build
from lakelog.server.api.registry import handles
from lakelog.server.cluster.dynamic_broker_configs import (
    CLUSTER_DEFAULT,
    DYNAMIC_KEYS,
    DynamicConfigError,
)
from lakelog.util.errors import ErrorCode
from lakelog.util.pacing import paced

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


def topic_defaults(settings: Settings) -> dict[str, str]:
    """Every known topic config's value when the topic does not set it."""
    stock = {name: spec.stock_default for name, spec in TOPIC_SPECS.items()}
    return {**stock, **topic_config.defaults(settings)}


def _default_source(settings: Settings, spec: ConfigSpec | None) -> ConfigSource:
    if spec and spec.settings_field and spec.settings_field in settings.model_fields_set:
        return ConfigSource.STATIC_BROKER_CONFIG
    return ConfigSource.DEFAULT_CONFIG


def topic_entries(
    own: Mapping[str, str],
    settings: Settings,
    cluster: Mapping[str, str] | None = None,
    broker_own: Mapping[str, str] | None = None,
) -> list[ConfigEntry]:
    """A topic's full config as DescribeConfigs shows it, sorted by name. `settings` are
    the static ones; `cluster` and `broker_own` the dynamic broker layers over them."""
    fallback = topic_defaults(settings)
    entries = []
    for name in sorted(fallback.keys() | own.keys()):
        spec = TOPIC_SPECS.get(name)
        synonyms: list[Synonym] = []
        if name in own:
            synonyms.append(Synonym(name, own[name], ConfigSource.DYNAMIC_TOPIC_CONFIG))
        if spec and spec.broker_name and name in fallback:
            broker_name = spec.broker_name
            for layer, source in (
                (broker_own or {}, ConfigSource.DYNAMIC_BROKER_CONFIG),
                (cluster or {}, ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG),
            ):
                if broker_name in layer:
                    synonyms.append(Synonym(broker_name, layer[broker_name], source))
            static_source = _default_source(settings, spec)
            synonyms.append(Synonym(broker_name, fallback[name], static_source))
        if synonyms:
            value, source = synonyms[0].value, synonyms[0].source
        else:
            value, source = fallback.get(name), _default_source(settings, spec)
        entries.append(
            ConfigEntry(
                name=name,
                value=value,
                source=source,
                read_only=False,
                config_type=spec.type if spec else ConfigType.UNKNOWN,
                synonyms=tuple(synonyms),
            )
        )
    return entries


RECORDED_REPLICATION_FACTOR = "lakelog.replication.factor"
"""A read-only topic entry, returned only when asked for by name (so Kafka tools listing all
configs see none): the replication factor recorded at create time. Metadata cannot carry it,
as it lists the brokers serving a partition as its replicas (see README, Topics)."""


def recorded_replication_factor(value: int) -> ConfigEntry:
    return ConfigEntry(
        name=RECORDED_REPLICATION_FACTOR,
        value=str(value),
        source=ConfigSource.DYNAMIC_TOPIC_CONFIG,
        read_only=True,
        config_type=ConfigType.INT,
    )


ALWAYS_STATIC = frozenset({"advertised.listeners", "listeners", "broker.id"})
"""A broker cannot run without these, so Kafka reports them as STATIC_BROKER_CONFIG (from
its properties file) even where Lakelog derived them from its defaults."""


def broker_entries(
    settings: Settings,
    broker_epoch: int = -1,
    cluster: Mapping[str, str] | None = None,
    own: Mapping[str, str] | None = None,
) -> list[ConfigEntry]:
    """The broker settings a Kafka tool looks for, all read-only (they are static here),
    plus `broker.epoch`, the registration epoch the coordinator fences commits with."""
    host, port = settings.advertised_host_port
    listen_host, listen_port = settings.listen_host_port
    values: list[tuple[str, str | None, ConfigType, str]] = [
        ("advertised.listeners", f"PLAINTEXT://{host}:{port}", ConfigType.LIST, "advertised"),
        (
            "allow.everyone.if.no.acl.found",
            str(settings.allow_everyone_if_no_acl_found).lower(),
            ConfigType.BOOLEAN,
            "allow_everyone_if_no_acl_found",
        ),
        (
            "authorizer.class.name",
            STANDARD_AUTHORIZER if settings.authorizer_enabled else "",
            ConfigType.STRING,
            "authorizer_enabled",
        ),
        (
            "auto.create.topics.enable",
            str(settings.auto_create_topics_enable).lower(),
            ConfigType.BOOLEAN,
            "auto_create_topics_enable",
        ),
        ("broker.epoch", str(broker_epoch), ConfigType.LONG, ""),
        ("broker.id", str(settings.broker_id), ConfigType.INT, "broker_id"),
        ("broker.rack", settings.rack, ConfigType.STRING, "rack"),
        (
            "connections.max.idle.ms",
            str(settings.connections_max_idle_ms),
            ConfigType.LONG,
            "connections_max_idle_ms",
        ),
        (
            "default.replication.factor",
            str(settings.default_replication_factor),
            ConfigType.INT,
            "default_replication_factor",
        ),
        (
            "lakelog.metrics.listen",
            settings.metrics_listen,
            ConfigType.STRING,
            "metrics_listen",
        ),
        ("listeners", f"PLAINTEXT://{listen_host}:{listen_port}", ConfigType.LIST, "listen"),
        ("log.cleanup.policy", "delete", ConfigType.LIST, ""),
        ("log.message.timestamp.type", "CreateTime", ConfigType.STRING, ""),
        (
            "log.retention.bytes",
            str(settings.log_retention_bytes),
            ConfigType.LONG,
            "log_retention_bytes",
        ),
        ("log.retention.ms", str(settings.log_retention_ms), ConfigType.LONG, "log_retention_ms"),
        ("max.connections", str(settings.max_connections), ConfigType.INT, "max_connections"),
        (
            "max.connections.per.ip",
            str(settings.max_connections_per_ip),
            ConfigType.INT,
            "max_connections_per_ip",
        ),
        (
            "max.connections.per.ip.overrides",
            settings.max_connections_per_ip_overrides,
            ConfigType.STRING,
            "max_connections_per_ip_overrides",
        ),
        ("message.max.bytes", str(settings.message_max_bytes), ConfigType.INT, "message_max_bytes"),
        ("num.partitions", str(settings.num_partitions), ConfigType.INT, "num_partitions"),
        (
            "queued.max.request.bytes",
            str(settings.queued_max_request_bytes),
            ConfigType.LONG,
            "queued_max_request_bytes",
        ),
        (
            "socket.request.max.bytes",
            str(settings.socket_request_max_bytes),
            ConfigType.INT,
            "socket_request_max_bytes",
        ),
        ("super.users", settings.super_users, ConfigType.STRING, "super_users"),
        (
            "transaction.abort.timed.out.transaction.cleanup.interval.ms",
            str(settings.transaction_abort_timed_out_transaction_cleanup_interval_ms),
            ConfigType.INT,
            "transaction_abort_timed_out_transaction_cleanup_interval_ms",
        ),
        (
            "transaction.max.timeout.ms",
            str(settings.transaction_max_timeout_ms),
            ConfigType.INT,
            "transaction_max_timeout_ms",
        ),
    ]
    entries = []
    for name, value, kind, field_name in values:
        source = (
            ConfigSource.STATIC_BROKER_CONFIG
            if field_name in settings.model_fields_set or name in ALWAYS_STATIC
            else ConfigSource.DEFAULT_CONFIG
        )
        if name in DYNAMIC_KEYS:
            entries.append(_dynamic_entry(name, value, source, kind, cluster or {}, own or {}))
            continue
        entries.append(
            ConfigEntry(name, value, source, True, kind, (Synonym(name, value, source),))
        )
    return entries


def _dynamic_entry(
    name: str,
    value: str | None,
    static_source: ConfigSource,
    kind: ConfigType,
    cluster: Mapping[str, str],
    own: Mapping[str, str],
) -> ConfigEntry:
    """A key applied at runtime: its value from the highest layer that sets it, and every
    layer as a synonym, highest first (as Kafka lists them)."""
    layers = []
    if name in own:
        layers.append(Synonym(name, own[name], ConfigSource.DYNAMIC_BROKER_CONFIG))
    if name in cluster:
        layers.append(Synonym(name, cluster[name], ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG))
    layers.append(Synonym(name, value, static_source))
    return ConfigEntry(name, layers[0].value, layers[0].source, False, kind, tuple(layers))


def cluster_default_entries(cluster: Mapping[str, str]) -> list[ConfigEntry]:
    """What describing the cluster-wide default (broker resource "") shows in Kafka: only
    the keys set there."""
    kinds = {"int": ConfigType.INT, "long": ConfigType.LONG}
    source = ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG
    return [
        ConfigEntry(
            name,
            value,
            source,
            False,
            kinds[DYNAMIC_KEYS[name].kind],
            (Synonym(name, value, source),),
        )
        for name, value in sorted(cluster.items())
        if name in DYNAMIC_KEYS
    ]


class ConfigProblem(Exception):
    """One resource's alteration is refused with this error code and message."""

    def __init__(self, error: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.error = error
        self.message = message


@dataclass(frozen=True, slots=True)
class AlterPlan:
    set_configs: dict[str, str]
    delete_configs: list[str]


def _parts(value: str | None) -> list[str]:
    return [p.strip() for p in (value or "").split(",") if p.strip()]


def _check_unique(names: Iterable[str]) -> None:
    seen: set[str] = set()
    for name in names:
        if name in seen:
            raise ConfigProblem(
                ErrorCode.invalid_request, f"Error due to duplicate config keys: {name}"
            )
        seen.add(name)


def plan_incremental(
    own: Mapping[str, str],
    fallback: Mapping[str, str],
    ops: Sequence[tuple[str, int, str | None]],
    *,
    validate: bool = True,
) -> AlterPlan:
    """Turn IncrementalAlterConfigs operations (name, op, value) into sets and deletes.
    APPEND/SUBTRACT start from the current value: the topic's own, else the default."""
    _check_unique(name for name, _, _ in ops)
    plan = AlterPlan({}, [])
    for name, op, value in ops:
        if op == AlterOp.SET:
            if value is None:
                raise ConfigProblem(
                    ErrorCode.invalid_request, f"Null value not supported for : {name}"
                )
            plan.set_configs[name] = value
        elif op == AlterOp.DELETE:
            plan.delete_configs.append(name)
        elif op in (AlterOp.APPEND, AlterOp.SUBTRACT):
            if name not in LIST_CONFIGS:
                verb = "append" if op == AlterOp.APPEND else "subtract"
                raise ConfigProblem(
                    ErrorCode.invalid_config,
                    f"Config value {verb} is not allowed for config key: {name}",
                )
            current = _parts(own[name] if name in own else fallback.get(name))
            items = _parts(value)
            if op == AlterOp.APPEND:
                result = current + [i for i in items if i not in current]
            else:
                result = [i for i in current if i not in items]
            plan.set_configs[name] = ",".join(result)
        else:
            raise ConfigProblem(
                ErrorCode.invalid_request, f"Unknown config operation {op} for {name}"
            )
    problem = topic_config.validate(plan.set_configs) if validate else None
    if problem:
        raise ConfigProblem(ErrorCode.invalid_config, problem)
    return plan


def plan_replace(
    configs: Sequence[tuple[str, str | None]], *, validate: bool = True
) -> dict[str, str]:
    """Legacy AlterConfigs: the given configs become the topic's whole config."""
    _check_unique(name for name, _ in configs)
    result: dict[str, str] = {}
    for name, value in configs:
        if value is None:
            raise ConfigProblem(ErrorCode.invalid_request, f"Null value not supported for : {name}")
        result[name] = value
    problem = topic_config.validate(result) if validate else None
    if problem:
        raise ConfigProblem(ErrorCode.invalid_config, problem)
    return result


def group_entries(own: Mapping[str, str], settings: Settings) -> list[ConfigEntry]:
    """A group's configs as Kafka describes them: every group config, GROUP_CONFIG where the
    group overrides it, else DEFAULT_CONFIG with the broker config it comes from."""
    kinds = {"int": ConfigType.INT, "string": ConfigType.STRING, "boolean": ConfigType.BOOLEAN}
    entries = []
    for name, spec in sorted(group_configs.SPECS.items()):
        default = spec.default(settings)
        fallback = Synonym(spec.broker_name or name, default, ConfigSource.DEFAULT_CONFIG)
        if name in own:
            value, source = own[name], ConfigSource.GROUP_CONFIG
            synonyms: tuple[Synonym, ...] = (Synonym(name, value, source), fallback)
        else:
            value, source, synonyms = default, ConfigSource.DEFAULT_CONFIG, (fallback,)
        entries.append(ConfigEntry(name, value, source, False, kinds[spec.kind], synonyms))
    return entries


def _check_group_name(name: str) -> None:
    if not name:
        raise ConfigProblem(ErrorCode.invalid_request, "Group name must not be empty")


def _check_broker_name(name: str, broker_id: int) -> None:
    if name and name != str(broker_id):
        raise ConfigProblem(
            ErrorCode.invalid_request,
            f"Unexpected broker id, expected {broker_id} or empty string, but received {name}",
        )


def _refuse_broker_alter(name: str, ops: Sequence[tuple[str, int]], broker_id: int) -> None:
    """Keys not applied at runtime: sets are refused key by key (see
    `broker_configs.broker_alter_problem`), resets are no-ops."""
    _check_broker_name(name, broker_id)
    problem = broker_alter_problem(ops)
    if problem:
        error, why = problem
        raise ConfigProblem(
            error,
            f"Invalid config value for resource ConfigResource(type=BROKER, name='{name}'): {why}",
        )


def _unsupported_type(resource_type: int) -> ConfigProblem:
    return ConfigProblem(ErrorCode.invalid_request, f"Unsupported resource type {resource_type}")


def _unknown_topic(name: str) -> ConfigProblem:
    return ConfigProblem(ErrorCode.unknown_topic_or_partition, f"Topic '{name}' does not exist.")


def _check_duplicates(resources: Sequence[Any]) -> set[tuple[int, str]]:
    seen: set[tuple[int, str]] = set()
    duplicates: set[tuple[int, str]] = set()
    for r in resources:
        key = (int(r.resource_type), r.resource_name)
        (duplicates if key in seen else seen).add(key)
    return duplicates


# ---------------------------------------------------------------- DescribeConfigs


def _describe_entry(m: Any, entry: ConfigEntry, include_synonyms: bool) -> Any:
    synonyms = (
        tuple(
            build(m.DescribeConfigsSynonym, name=s.name, value=s.value, source=int(s.source))
            for s in entry.synonyms
        )
        if include_synonyms
        else ()
    )
    return build(
        m.DescribeConfigsResourceResult,
        name=entry.name,
        value=entry.value,
        read_only=entry.read_only,
        config_source=int(entry.source),
        is_sensitive=False,
        synonyms=synonyms,
        config_type=int(entry.config_type),
        documentation=None,
    )


def _check_access(ctx: RequestContext, resource: Any, operation: Operation) -> None:
    """Kafka's check for a config resource: the operation (DESCRIBE_CONFIGS or
    ALTER_CONFIGS) on the topic, else on the cluster (brokers, loggers, and here mirrors)."""
    if not authz.enabled(ctx):
        return
    if resource.resource_type == TOPIC_RESOURCE:
        if not authz.topic_allowed(ctx, resource.resource_name, operation):
            raise ConfigProblem(ErrorCode.topic_authorization_failed, "Authorization failed.")
    elif resource.resource_type == GROUP_RESOURCE:
        if not authz.group_allowed(ctx, resource.resource_name, operation):
            raise ConfigProblem(ErrorCode.group_authorization_failed, "Authorization failed.")
    elif not authz.cluster_allowed(ctx, operation):
        raise ConfigProblem(ErrorCode.cluster_authorization_failed, "Authorization failed.")


async def _entries_for(ctx: RequestContext, resource: Any) -> list[ConfigEntry]:
    settings = ctx.broker.settings
    _check_access(ctx, resource, Operation.DESCRIBE_CONFIGS)
    if resource.resource_type == TOPIC_RESOURCE:
        topics = await ctx.broker.coordinator.get_topics([resource.resource_name])
        if not topics:
            raise _unknown_topic(resource.resource_name)
        dynamic = ctx.broker.dynamic_configs
        entries = topic_entries(topics[0].configs, dynamic.static, dynamic.cluster, dynamic.own)
        if RECORDED_REPLICATION_FACTOR in (resource.configuration_keys or ()):
            entries.append(recorded_replication_factor(topics[0].replication_factor))
        return entries
    if resource.resource_type == BROKER_RESOURCE:
        _check_broker_name(resource.resource_name, ctx.broker.broker_id)
        dynamic = ctx.broker.dynamic_configs
        if not resource.resource_name:
            return cluster_default_entries(dynamic.cluster)
        # from the static settings: the dynamic layers are laid over them entry by entry
        return broker_entries(dynamic.static, ctx.broker.broker_epoch, dynamic.cluster, dynamic.own)
    if resource.resource_type == GROUP_RESOURCE:
        _check_group_name(resource.resource_name)
        own = await ctx.broker.group_configs.overrides(resource.resource_name)
        return group_entries(own, settings)
    if resource.resource_type == MIRROR_RESOURCE:
        return await _mirror_entries(ctx, resource)
    raise _unsupported_type(resource.resource_type)


async def _mirror_entries(ctx: RequestContext, resource: Any) -> list[ConfigEntry]:
    """Mirrors as a config resource (KIP-1279 admin, see lakelog.mirror.admin)."""
    from lakelog.mirror import admin

    try:
        found = await admin.describe(
            ctx.broker, resource.resource_name, resource.configuration_keys
        )
    except admin.MirrorAdminError as exc:
        raise ConfigProblem(exc.error, exc.message) from None
    source = ConfigSource.DYNAMIC_BROKER_CONFIG
    return [ConfigEntry(e.name, e.value, source, True, ConfigType.STRING, ()) for e in found]


@handles(32, 1, 4)
async def describe_configs(ctx: RequestContext, request: Any) -> Any:
    m = ctx.schema
    results = []
    async for resource in paced(request.resources):
        error: ErrorCode = ErrorCode.none
        message: str | None = None
        configs: tuple[Any, ...] = ()
        try:
            entries = await _entries_for(ctx, resource)
        except ConfigProblem as problem:
            error, message = problem.error, problem.message
        else:
            keys = resource.configuration_keys
            if resource.resource_type == MIRROR_RESOURCE:
                keys = None  # the keys were commands (validate, topic:<T>), not a filter
            configs = tuple(
                _describe_entry(m, e, request.include_synonyms)
                for e in entries
                if not keys or e.name in keys
            )
        results.append(
            build(
                m.DescribeConfigsResult,
                error_code=error,
                error_message=message,
                resource_type=resource.resource_type,
                resource_name=resource.resource_name,
                configs=configs,
            )
        )
    return build(
        m.DescribeConfigsResponse, throttle_time=datetime.timedelta(0), results=tuple(results)
    )


# ---------------------------------------------------------------- AlterConfigs


def _alter_result(m: Any, resource: Any, error: ErrorCode, message: str | None) -> Any:
    return build(
        m.AlterConfigsResourceResponse,
        error_code=error,
        error_message=message,
        resource_type=resource.resource_type,
        resource_name=resource.resource_name,
    )


async def _apply(
    ctx: RequestContext, request: AlterTopicConfigsRequest, validate_only: bool
) -> tuple[ErrorCode, str | None]:
    [result] = await ctx.broker.coordinator.alter_topic_configs([request], validate_only)
    if not validate_only and result.error == ErrorCode.none:
        ctx.broker.topics.invalidate()
    if result.error == ErrorCode.unknown_topic_or_partition and not result.message:
        return result.error, _unknown_topic(request.name).message
    return result.error, result.message


async def _alter_one(
    ctx: RequestContext, resource: Any, validate_only: bool, incremental: bool
) -> tuple[ErrorCode, str | None]:
    _check_access(ctx, resource, Operation.ALTER_CONFIGS)
    if resource.resource_type == BROKER_RESOURCE:
        await _alter_broker(ctx, resource, validate_only, incremental)
        return ErrorCode.none, None
    if resource.resource_type == MIRROR_RESOURCE and incremental:
        from lakelog.mirror import admin

        ops = [(c.name, int(c.config_operation), c.value) for c in resource.configs]
        try:
            message = await admin.alter(ctx.broker, resource.resource_name, ops, validate_only)
        except admin.MirrorAdminError as exc:
            raise ConfigProblem(exc.error, exc.message) from None
        return ErrorCode.none, message
    if resource.resource_type == GROUP_RESOURCE:
        await _alter_group(ctx, resource, validate_only, incremental)
        return ErrorCode.none, None
    if resource.resource_type != TOPIC_RESOURCE:
        raise _unsupported_type(resource.resource_type)
    name = resource.resource_name
    if not incremental:
        configs = plan_replace([(c.name, c.value) for c in resource.configs])
        return await _apply(
            ctx, AlterTopicConfigsRequest(name, configs, replace=True), validate_only
        )
    topics = await ctx.broker.coordinator.get_topics([name])
    if not topics:
        raise _unknown_topic(name)
    plan = plan_incremental(
        topics[0].configs,
        topic_defaults(ctx.broker.settings),
        [(c.name, c.config_operation, c.value) for c in resource.configs],
    )
    return await _apply(
        ctx,
        AlterTopicConfigsRequest(name, plan.set_configs, plan.delete_configs),
        validate_only,
    )


def _refuse_list_ops(ops: Sequence[tuple[str, int, str | None]]) -> None:
    """APPEND/SUBTRACT on a config that is not a list: Kafka's INVALID_CONFIG."""
    for name, op, _ in ops:
        if op in (AlterOp.APPEND, AlterOp.SUBTRACT):
            verb = "append" if op == AlterOp.APPEND else "subtract"
            raise ConfigProblem(
                ErrorCode.invalid_config,
                f"Config value {verb} is not allowed for config key: {name}",
            )


async def _alter_broker(
    ctx: RequestContext, resource: Any, validate_only: bool, incremental: bool
) -> None:
    """The keys in `DYNAMIC_KEYS` are stored and applied (this broker, or every broker when
    the resource name is empty); any other key is refused as before, and the whole
    resource with it (nothing is applied unless everything can be)."""
    broker_id = ctx.broker.broker_id
    name = resource.resource_name
    ops = [
        (c.name, int(getattr(c, "config_operation", AlterOp.SET)), c.value)
        for c in resource.configs
    ]
    _refuse_broker_alter(name, [(n, op) for n, op, _ in ops if n not in DYNAMIC_KEYS], broker_id)
    mine = [op for op in ops if op[0] in DYNAMIC_KEYS]
    _refuse_list_ops(mine)
    if incremental:
        plan = plan_incremental({}, {}, mine, validate=False)
        set_configs, delete = plan.set_configs, plan.delete_configs
    else:
        set_configs = plan_replace([(n, v) for n, _, v in mine], validate=False)
        delete = []
    if not incremental or set_configs or delete:
        try:
            await ctx.broker.dynamic_configs.alter(
                name or CLUSTER_DEFAULT, set_configs, delete, not incremental, validate_only
            )
        except DynamicConfigError as exc:
            raise ConfigProblem(ErrorCode.invalid_config, str(exc)) from None


async def _alter_group(
    ctx: RequestContext, resource: Any, validate_only: bool, incremental: bool
) -> None:
    """Group configs: SET and DELETE (no list configs, so no APPEND/SUBTRACT); the legacy
    AlterConfigs replaces the group's whole set of overrides."""
    group_id = resource.resource_name
    _check_group_name(group_id)
    store = ctx.broker.group_configs
    if incremental:
        ops = [(c.name, int(c.config_operation), c.value) for c in resource.configs]
        _refuse_list_ops(ops)
        plan = plan_incremental({}, {}, ops, validate=False)
        set_configs, delete = plan.set_configs, plan.delete_configs
    else:
        set_configs = plan_replace([(c.name, c.value) for c in resource.configs], validate=False)
        delete = [n for n in await store.overrides(group_id) if n not in set_configs]
    try:
        await store.alter(group_id, set_configs, delete, validate_only)
    except group_configs.GroupConfigError as exc:
        raise ConfigProblem(ErrorCode.invalid_config, str(exc)) from None


async def _alter(ctx: RequestContext, request: Any, incremental: bool) -> Any:
    m = ctx.schema
    duplicates = _check_duplicates(request.resources)
    responses = []
    for resource in request.resources:
        if (int(resource.resource_type), resource.resource_name) in duplicates:
            error, message = ErrorCode.invalid_request, "Duplicate resource in request."
        else:
            try:
                error, message = await _alter_one(ctx, resource, request.validate_only, incremental)
            except ConfigProblem as problem:
                error, message = problem.error, problem.message
        responses.append(_alter_result(m, resource, error, message))
    response_cls = m.IncrementalAlterConfigsResponse if incremental else m.AlterConfigsResponse
    return build(response_cls, throttle_time=datetime.timedelta(0), responses=tuple(responses))


@handles(33, 0, 2)
async def alter_configs(ctx: RequestContext, request: Any) -> Any:
    return await _alter(ctx, request, incremental=False)


@handles(44, 0, 1)
async def incremental_alter_configs(ctx: RequestContext, request: Any) -> Any:
    return await _alter(ctx, request, incremental=True)
