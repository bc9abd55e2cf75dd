"""Config entries as DescribeConfigs reports them: a topic's (its own configs over the
broker defaults, with synonyms), a broker's (static settings and the dynamic layers), the
cluster-wide default's, and a group's. Pure: no request, no coordinator."""

from __future__ import annotations

from collections.abc import Mapping

from lakelog.config import Settings
from lakelog.groups import group_configs
from lakelog.log import topic_config
from lakelog.log.config_specs import (
    STANDARD_AUTHORIZER,
    TOPIC_SPECS,
    ConfigEntry,
    ConfigSource,
    ConfigSpec,
    ConfigType,
    Synonym,
)
from lakelog.server.cluster.dynamic_broker_configs import DYNAMIC_KEYS
from lakelog.server.cluster.kafka_dynamic_keys import is_dynamic, lookup


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
    the static ones; `cluster` and `broker_own` the dynamic broker layers over them. Only
    the broker keys Lakelog applies are layered in: a stored `log.cleanup.policy` changes
    no topic here, so a topic does not report it as its value."""
    fallback = topic_defaults(settings)
    cluster = {n: v for n, v in (cluster or {}).items() if n in DYNAMIC_KEYS}
    broker_own = {n: v for n, v in (broker_own or {}).items() if n in DYNAMIC_KEYS}
    entries = []
    for name in sorted(fallback.keys() | own.keys()):
        spec = TOPIC_SPECS.get(name)
        synonyms: list[Synonym] = []
        if name in own:
            synonyms.append(Synonym(name, own[name], ConfigSource.DYNAMIC_TOPIC_CONFIG))
        if spec and spec.broker_name and name in fallback:
            broker_name = spec.broker_name
            for layer, source in (
                (broker_own, ConfigSource.DYNAMIC_BROKER_CONFIG),
                (cluster, ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG),
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
    cluster, own = cluster or {}, own or {}
    entries = []
    for name, value, kind, field_name in values:
        source = (
            ConfigSource.STATIC_BROKER_CONFIG
            if field_name in settings.model_fields_set or name in ALWAYS_STATIC
            else ConfigSource.DEFAULT_CONFIG
        )
        if name in DYNAMIC_KEYS or name in cluster or name in own:
            entries.append(_dynamic_entry(name, value, source, kind, cluster, own))
            continue
        entries.append(
            ConfigEntry(
                name, value, source, not is_dynamic(name), kind, (Synonym(name, value, source),)
            )
        )
    listed = {e.name for e in entries}
    for name in sorted((cluster.keys() | own.keys()) - listed):
        entries.append(_dynamic_entry(name, None, None, _kind(name), cluster, own))
    return sorted(entries, key=lambda e: e.name)


def _kind(name: str) -> ConfigType:
    """DescribeConfigs' type of a dynamic broker key."""
    if name in DYNAMIC_KEYS:
        return _APPLIED_KINDS[DYNAMIC_KEYS[name].kind]
    key = lookup(name)
    return key.type if key is not None else ConfigType.UNKNOWN


_APPLIED_KINDS = {"int": ConfigType.INT, "long": ConfigType.LONG, "string": ConfigType.STRING}


def _dynamic_entry(
    name: str,
    value: str | None,
    static_source: ConfigSource | None,
    kind: ConfigType,
    cluster: Mapping[str, str],
    own: Mapping[str, str],
) -> ConfigEntry:
    """A key that may be set at runtime: its value from the highest layer that sets it,
    and every layer as a synonym, highest first (as Kafka lists them). A secret (PASSWORD)
    shows no value, in any layer. `static_source` None: a key with no static setting
    here (only its dynamic layers are listed)."""
    sensitive = kind == ConfigType.PASSWORD

    def shown(text: str | None) -> str | None:
        return None if sensitive else text

    layers = []
    if name in own:
        layers.append(Synonym(name, shown(own[name]), ConfigSource.DYNAMIC_BROKER_CONFIG))
    if name in cluster:
        layers.append(
            Synonym(name, shown(cluster[name]), ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG)
        )
    if static_source is not None:
        layers.append(Synonym(name, shown(value), static_source))
    top = layers[0]
    return ConfigEntry(name, top.value, top.source, False, kind, tuple(layers), sensitive)


def cluster_default_entries(cluster: Mapping[str, str]) -> list[ConfigEntry]:
    """What describing the cluster-wide default (broker resource "") shows in Kafka: only
    the keys set there."""
    return [_dynamic_entry(name, None, None, _kind(name), cluster, {}) for name in sorted(cluster)]


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
