"""Dynamic broker configs: the broker settings Kafka lets an admin change at runtime,
stored in the batch coordinator (per broker, or as the cluster-wide default), described as
Kafka describes them, and applied where they mean something in Lakelog.

Every key Kafka 4.x treats as dynamic is accepted (`kafka_dynamic_keys`), with Kafka's
checks, so admin tools that set them keep working. Only the keys in `APPLIED` change what
a broker does: they are layered over the static settings, with Kafka's precedence (this
broker's dynamic value > the cluster-wide dynamic default > the static setting (flags,
env, lakelog.toml) > the default), and read where they are used (produce, retention, the
listener's admission), so a new value takes effect on the next request or retention pass.
The others are stored and described but have no effect here (threads, SSL stores, SASL
logins, the log cleaner... belong to parts Lakelog does not have or configures
statically); a log line names them when they are set.

Every broker re-reads the stored sets every `REFRESH_S`, so a change made through any
broker holds everywhere within about a second (at once on the broker that made it)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from lakelog.config import parse_ip_overrides
from lakelog.server.cluster.kafka_dynamic_keys import lookup, redacted, value_problem
from lakelog.server.cluster.outage import log_failure

if TYPE_CHECKING:
    from lakelog.config import Settings
    from lakelog.coordinator.interface import BatchCoordinator
    from lakelog.server.listener import Server

log = logging.getLogger(__name__)

REFRESH_S = 1.0
CLUSTER_DEFAULT = ""
"""The scope of the cluster-wide default (Kafka's `--entity-default`, resource name "")."""
MAX_KEYS_PER_SCOPE = 1000
"""Listener-prefixed keys name any listener: the stored set of one scope stays bounded."""
MAX_VALUE_CHARS = 100_000
"""Room for a PEM certificate chain (`ssl.keystore.certificate.chain`), no more."""


def _ip_overrides(value: str) -> str:
    """`max.connections.per.ip.overrides` as Kafka writes it (`ip:count,...`), checked."""
    parse_ip_overrides(value)
    return value


@dataclass(frozen=True, slots=True)
class AppliedKey:
    field: str
    """The Settings field it overrides."""
    kind: str
    """"int", "long" or "string" (DescribeConfigs' config type)."""
    minimum: int = 0
    parse: Callable[[str], Any] = int


APPLIED: dict[str, AppliedKey] = {
    "log.retention.bytes": AppliedKey("log_retention_bytes", "long", -1),
    "log.retention.ms": AppliedKey("log_retention_ms", "long", -1),
    "max.connections": AppliedKey("max_connections", "int"),
    "max.connections.per.ip": AppliedKey("max_connections_per_ip", "int"),
    "max.connections.per.ip.overrides": AppliedKey(
        "max_connections_per_ip_overrides", "string", parse=_ip_overrides
    ),
    "message.max.bytes": AppliedKey("message_max_bytes", "int"),
}
"""The dynamic keys Lakelog applies at runtime."""
DYNAMIC_KEYS = APPLIED


class DynamicConfigError(ValueError):
    """A value Kafka's ConfigDef refuses (Kafka answers INVALID_REQUEST)."""


def _check_applied(name: str, value: str) -> None:
    key = APPLIED[name]
    if key.kind == "string":
        try:
            key.parse(value)
        except ValueError as exc:
            raise DynamicConfigError(
                f"Invalid value {value} for configuration {name}: {exc}"
            ) from None
        return
    limit = 2**31 if key.kind == "int" else 2**63
    try:
        number = int(value)
    except ValueError:
        number = None
    if number is None or not -limit <= number < limit:
        raise DynamicConfigError(
            f"Invalid value {value} for configuration {name}: Not a number of type "
            + key.kind.upper()
        )
    if number < key.minimum:
        raise DynamicConfigError(
            f"Invalid value {value} for configuration {name}: Value must be at least {key.minimum}"
        )


def check(configs: Mapping[str, str]) -> None:
    """Raise DynamicConfigError for a value Kafka would not parse (or Lakelog not apply)."""
    for name, value in configs.items():
        if len(value) > MAX_VALUE_CHARS:
            raise DynamicConfigError(
                f"Invalid value for configuration {name}: longer than {MAX_VALUE_CHARS} characters"
            )
        if name in APPLIED:
            _check_applied(name, value)
            continue
        key = lookup(name)
        if key is None:
            raise DynamicConfigError(f"Cannot update these configs dynamically: ['{name}']")
        problem = value_problem(name, key.type, value)
        if problem:
            raise DynamicConfigError(problem)


def layered(static: Settings, cluster: Mapping[str, str], own: Mapping[str, str]) -> Settings:
    """The static settings with the dynamic layers on top (keys not applied ignored)."""
    update = {}
    for name, value in {**cluster, **own}.items():
        key = APPLIED.get(name)
        if key is None:
            continue
        try:
            update[key.field] = key.parse(value)
        except ValueError:
            log.warning("ignoring a stored %s that does not parse: %r", name, value)
    return static.model_copy(update=update) if update else static


def without_effect(configs: Mapping[str, str]) -> list[str]:
    """The stored keys that change nothing in Lakelog."""
    return sorted(name for name in configs if name not in APPLIED)


class DynamicConfigsHost(Protocol):
    """What dynamic broker configs use of the broker (the Broker is one). `settings` is
    written: applying a change replaces the broker's settings with the layered result."""

    settings: Settings

    @property
    def broker_id(self) -> int: ...
    @property
    def coordinator(self) -> BatchCoordinator: ...
    @property
    def server(self) -> Server: ...


class DynamicBrokerConfigs:
    """This broker's dynamic layers; `broker.settings` is always the layered result."""

    def __init__(self, broker: DynamicConfigsHost) -> None:
        self._broker = broker
        self.static = broker.settings
        self.cluster: dict[str, str] = {}
        self.own: dict[str, str] = {}

    @property
    def scope(self) -> str:
        return str(self._broker.broker_id)

    async def refresh(self) -> None:
        stored = await self._broker.coordinator.load_broker_configs()
        self._apply(stored.get(CLUSTER_DEFAULT, {}), stored.get(self.scope, {}))

    async def alter(
        self,
        scope: str,
        set_configs: Mapping[str, str],
        delete: Sequence[str],
        replace: bool,
        validate_only: bool,
    ) -> None:
        check(set_configs)
        current = self.cluster if scope == CLUSTER_DEFAULT else self.own
        kept = {} if replace else {n: v for n, v in current.items() if n not in delete}
        if len({**kept, **set_configs}) > MAX_KEYS_PER_SCOPE:
            raise DynamicConfigError(
                f"A broker config scope holds at most {MAX_KEYS_PER_SCOPE} dynamic keys"
            )
        if validate_only:
            return
        await self._broker.coordinator.alter_broker_configs(scope, set_configs, delete, replace)
        ignored = without_effect(set_configs)
        if ignored:
            where = "the cluster-wide default" if scope == CLUSTER_DEFAULT else f"broker {scope}"
            log.info(
                "dynamic broker configs stored for %s with no effect in Lakelog "
                "(described, not applied): %s",
                where,
                ignored,
            )
        await self.refresh()

    def _apply(self, cluster: dict[str, str], own: dict[str, str]) -> None:
        if cluster == self.cluster and own == self.own:
            return
        self.cluster, self.own = cluster, own
        settings = layered(self.static, cluster, own)
        broker = self._broker
        broker.settings = settings
        broker.server.max_connections = settings.max_connections
        broker.server.max_connections_per_ip = settings.max_connections_per_ip
        broker.server.max_connections_per_ip_overrides = dict(settings.connections_per_ip_overrides)
        log.info(
            "dynamic broker configs now: cluster default %s, this broker %s",
            redacted(cluster),
            redacted(own),
        )

    async def run(self) -> None:
        while True:
            await asyncio.sleep(REFRESH_S)
            try:
                await self.refresh()
            except Exception:
                log_failure(log, "reading dynamic broker configs failed")
