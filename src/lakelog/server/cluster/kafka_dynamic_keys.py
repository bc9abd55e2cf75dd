"""Which broker configs Apache Kafka 4.x lets an admin change at runtime, with their types:
Kafka's `DynamicBrokerConfig.AllDynamicConfigs` (the reconfigurable configs of SSL, SASL
and listeners, the log cleaner, thread pools, the socket server, log defaults, producer
state, remote log, replication, metric reporters, config providers, the group and share
coordinators) and the broker quota configs. Pure tables and checks, no I/O.

Kafka's rules for altering them, followed here (`problems`):
- SSL key and trust store configs (`ssl.keystore.location`, ...) may be set only with a
  listener prefix (`listener.name.<listener>.ssl.keystore.location`);
- the per-broker configs (SSL and listener configs but `max.connections`,
  `max.connection.creation.rate`, `num.network.threads`) may not be set cluster-wide;
- a value must parse as the config's type.
PASSWORD configs (and listener-prefixed SASL mechanism configs such as
`listener.name.sasl_ssl.plain.sasl.jaas.config`) are sensitive: DescribeConfigs shows them
with a null value, as Kafka does."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from lakelog.log.config_specs import TOPIC_SPECS, ConfigType

T = ConfigType

SSL_STORE_CONFIGS: dict[str, ConfigType] = {
    "ssl.keystore.type": T.STRING,
    "ssl.keystore.location": T.STRING,
    "ssl.keystore.password": T.PASSWORD,
    "ssl.key.password": T.PASSWORD,
    "ssl.truststore.type": T.STRING,
    "ssl.truststore.location": T.STRING,
    "ssl.truststore.password": T.PASSWORD,
    "ssl.keystore.certificate.chain": T.PASSWORD,
    "ssl.keystore.key": T.PASSWORD,
    "ssl.truststore.certificates": T.PASSWORD,
}
"""Kafka's SslConfigs.RECONFIGURABLE_CONFIGS: only with a listener prefix."""

LISTENER_CONFIGS: dict[str, ConfigType] = {
    **SSL_STORE_CONFIGS,
    "listeners": T.STRING,
    "listener.security.protocol.map": T.STRING,
    "principal.builder.class": T.CLASS,
    "ssl.protocol": T.STRING,
    "ssl.provider": T.STRING,
    "ssl.cipher.suites": T.LIST,
    "ssl.enabled.protocols": T.LIST,
    "ssl.keymanager.algorithm": T.STRING,
    "ssl.trustmanager.algorithm": T.STRING,
    "ssl.endpoint.identification.algorithm": T.STRING,
    "ssl.secure.random.implementation": T.STRING,
    "ssl.client.auth": T.STRING,
    "ssl.engine.factory.class": T.CLASS,
    "sasl.mechanism.inter.broker.protocol": T.STRING,
    "sasl.jaas.config": T.PASSWORD,
    "sasl.enabled.mechanisms": T.LIST,
    "sasl.kerberos.service.name": T.STRING,
    "sasl.kerberos.kinit.cmd": T.STRING,
    "sasl.kerberos.ticket.renew.window.factor": T.DOUBLE,
    "sasl.kerberos.ticket.renew.jitter": T.DOUBLE,
    "sasl.kerberos.min.time.before.relogin": T.LONG,
    "sasl.kerberos.principal.to.local.rules": T.LIST,
    "sasl.login.refresh.window.factor": T.DOUBLE,
    "sasl.login.refresh.window.jitter": T.DOUBLE,
    "sasl.login.refresh.min.period.seconds": T.SHORT,
    "sasl.login.refresh.buffer.seconds": T.SHORT,
    "max.connections": T.INT,
    "max.connection.creation.rate": T.INT,
    "num.network.threads": T.INT,
}
"""Kafka's DynamicListenerConfig.ReconfigurableConfigs (SSL configs included)."""

CLUSTER_LEVEL_LISTENER_CONFIGS = frozenset(
    {"max.connections", "max.connection.creation.rate", "num.network.threads"}
)
PER_BROKER = frozenset(LISTENER_CONFIGS) - CLUSTER_LEVEL_LISTENER_CONFIGS
"""Kafka's PerBrokerConfigs: refused at the cluster-wide default."""

LISTENER_MECHANISM_CONFIGS: dict[str, ConfigType] = {
    "sasl.jaas.config": T.PASSWORD,
    "sasl.login.callback.handler.class": T.CLASS,
    "sasl.login.class": T.CLASS,
    "sasl.server.callback.handler.class": T.CLASS,
    "connections.max.reauth.ms": T.LONG,
}
"""Configs a listener prefix may carry with a SASL mechanism in front
(`listener.name.sasl_ssl.scram-sha-256.sasl.jaas.config`)."""


def _log_defaults() -> dict[str, ConfigType]:
    """The broker synonyms of the topic configs (Kafka's DynamicLogConfig: every
    `ServerTopicConfigSynonyms` broker name), with the topic config's type."""
    return {s.broker_name: s.type for s in TOPIC_SPECS.values() if s.broker_name}


OTHER_CONFIGS: dict[str, ConfigType] = {
    # log cleaner
    "log.cleaner.threads": T.INT,
    "log.cleaner.dedupe.buffer.size": T.LONG,
    "log.cleaner.io.buffer.load.factor": T.DOUBLE,
    "log.cleaner.io.buffer.size": T.INT,
    "log.cleaner.io.max.bytes.per.second": T.DOUBLE,
    "log.cleaner.backoff.ms": T.LONG,
    "message.max.bytes": T.INT,
    # thread pools
    "num.io.threads": T.INT,
    "num.replica.fetchers": T.INT,
    "num.recovery.threads.per.data.dir": T.INT,
    "background.threads": T.INT,
    # socket server
    "max.connections.per.ip": T.INT,
    "max.connections.per.ip.overrides": T.STRING,
    # producer state
    "producer.id.expiration.ms": T.INT,
    "transaction.partition.verification.enable": T.BOOLEAN,
    # remote log
    "remote.log.index.file.cache.total.size.bytes": T.LONG,
    "remote.fetch.max.wait.ms": T.INT,
    "remote.log.manager.copy.max.bytes.per.second": T.LONG,
    "remote.log.manager.fetch.max.bytes.per.second": T.LONG,
    "remote.list.offsets.request.timeout.ms": T.LONG,
    "remote.log.manager.copier.thread.pool.size": T.INT,
    "remote.log.manager.expiration.thread.pool.size": T.INT,
    "remote.log.manager.follower.thread.pool.size": T.INT,
    "remote.log.reader.threads": T.INT,
    # replication
    "follower.fetch.last.tiered.offset.enable": T.BOOLEAN,
    # plugins
    "metric.reporters": T.LIST,
    "config.providers": T.LIST,
    # coordinators
    "group.coordinator.cached.buffer.max.bytes": T.INT,
    "share.coordinator.cached.buffer.max.bytes": T.INT,
    # broker quotas (DynamicConfig.Broker)
    "leader.replication.throttled.rate": T.LONG,
    "follower.replication.throttled.rate": T.LONG,
    "replica.alter.log.dirs.io.max.bytes.per.second": T.LONG,
}

KAFKA_DYNAMIC: dict[str, ConfigType] = {**_log_defaults(), **OTHER_CONFIGS, **LISTENER_CONFIGS}
"""Every broker config Kafka 4.x changes at runtime, with its type."""

_LISTENER_PREFIX = re.compile(r"listener\.name\.([^.]+)\.(.+)")


@dataclass(frozen=True, slots=True)
class DynamicKey:
    """What Kafka makes of one broker config name."""

    name: str
    type: ConfigType
    per_broker: bool
    listener_prefixed: bool

    @property
    def sensitive(self) -> bool:
        return self.type == ConfigType.PASSWORD


def lookup(name: str) -> DynamicKey | None:
    """The dynamic config `name` is, or None when Kafka cannot change it at runtime (or it
    is no Kafka config at all). A listener prefix makes a listener config per-listener."""
    found = _LISTENER_PREFIX.fullmatch(name)
    if found is None:
        kind = KAFKA_DYNAMIC.get(name)
        return None if kind is None else DynamicKey(name, kind, name in PER_BROKER, False)
    base = found.group(2)
    kind = LISTENER_CONFIGS.get(base)
    if kind is None:
        mechanism, _, rest = base.partition(".")
        kind = LISTENER_MECHANISM_CONFIGS.get(rest) if mechanism else None
        kind = kind if kind is not None else LISTENER_MECHANISM_CONFIGS.get(base)
    if kind is None:
        return None
    return DynamicKey(name, kind, base not in CLUSTER_LEVEL_LISTENER_CONFIGS, True)


def is_dynamic(name: str) -> bool:
    return lookup(name) is not None


def is_sensitive(name: str) -> bool:
    key = lookup(name)
    return key is not None and key.sensitive


_BOUNDS = {T.INT: 2**31, T.SHORT: 2**15, T.LONG: 2**63}
_TYPE_NAMES = {T.INT: "INT", T.SHORT: "SHORT", T.LONG: "LONG", T.DOUBLE: "DOUBLE"}


def value_problem(name: str, kind: ConfigType, value: str) -> str | None:
    """Kafka's ConfigDef parse error for `value`, or None when it parses."""
    text = value.strip()
    if kind in _BOUNDS:
        try:
            number = int(text)
        except ValueError:
            number = None
        if number is None or not -_BOUNDS[kind] <= number < _BOUNDS[kind]:
            return (
                f"Invalid value {value} for configuration {name}: Not a number of type "
                + _TYPE_NAMES[kind]
            )
    elif kind == T.DOUBLE:
        try:
            float(text)
        except ValueError:
            return f"Invalid value {value} for configuration {name}: Not a number of type DOUBLE"
    elif kind == T.BOOLEAN and text.lower() not in ("true", "false"):
        return (
            f"Invalid value {value} for configuration {name}: Expected value to be either "
            "true or false"
        )
    return None


def scope_problems(names: Iterable[str], cluster_wide: bool) -> list[str]:
    """Kafka's refusals (INVALID_REQUEST) of dynamic keys for where they are set."""
    keys = [k for k in (lookup(n) for n in names) if k is not None]
    problems = []
    unprefixed = sorted(k.name for k in keys if k.name in SSL_STORE_CONFIGS)
    if unprefixed:
        problems.append(
            "These security configs can be dynamically updated only per-listener using the "
            f"listener prefix: {unprefixed}"
        )
    per_broker = sorted(k.name for k in keys if k.per_broker and k.name not in unprefixed)
    if cluster_wide and per_broker:
        problems.append(
            "Cannot update these configs at default cluster level, broker id must be "
            f"specified: {per_broker}"
        )
    return problems


def redacted(configs: Mapping[str, str]) -> dict[str, str]:
    """The configs with sensitive values hidden, for log lines."""
    return {n: "[hidden]" if is_sensitive(n) else v for n, v in configs.items()}
