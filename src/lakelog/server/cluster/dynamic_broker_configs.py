"""Dynamic broker configs: the broker settings Kafka lets an admin change at runtime that
Lakelog applies at runtime too, stored in the batch coordinator (per broker, or as the
cluster-wide default) and layered over the static settings.

Precedence, as in Kafka: this broker's dynamic value > the cluster-wide dynamic default >
the static setting (flags, env, lakelog.toml) > the default. Every broker re-reads the
stored sets every `REFRESH_S`, so a change made through any broker holds everywhere within
about a second (at once on the broker that made it).

Only the keys in `DYNAMIC_KEYS` are applied: each is read where it is used (produce,
retention, the listener's admission), so a new value takes effect on the next request or
retention pass. Other keys Kafka calls dynamic are refused with what to do instead
(`api.broker_configs`)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from lakelog.server.cluster.outage import log_failure

if TYPE_CHECKING:
    from lakelog.config import Settings
    from lakelog.coordinator.interface import BatchCoordinator
    from lakelog.server.listener import Server

log = logging.getLogger(__name__)

REFRESH_S = 1.0
CLUSTER_DEFAULT = ""
"""The scope of the cluster-wide default (Kafka's `--entity-default`, resource name "")."""


@dataclass(frozen=True, slots=True)
class DynamicKey:
    field: str
    """The Settings field it overrides."""
    kind: str
    """"int" or "long" (DescribeConfigs' config type)."""
    minimum: int


DYNAMIC_KEYS: dict[str, DynamicKey] = {
    "log.retention.bytes": DynamicKey("log_retention_bytes", "long", -1),
    "log.retention.ms": DynamicKey("log_retention_ms", "long", -1),
    "max.connections": DynamicKey("max_connections", "int", 0),
    "max.connections.per.ip": DynamicKey("max_connections_per_ip", "int", 0),
    "message.max.bytes": DynamicKey("message_max_bytes", "int", 0),
}


class DynamicConfigError(ValueError):
    """A value Kafka would refuse with INVALID_CONFIG."""


def check(configs: Mapping[str, str]) -> None:
    for name, value in configs.items():
        key = DYNAMIC_KEYS[name]
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
                f"Invalid value {value} for configuration {name}: Value must be at least "
                f"{key.minimum}"
            )


def layered(static: Settings, cluster: Mapping[str, str], own: Mapping[str, str]) -> Settings:
    """The static settings with the dynamic layers on top (unknown stored keys ignored)."""
    update = {
        DYNAMIC_KEYS[name].field: int(value)
        for name, value in {**cluster, **own}.items()
        if name in DYNAMIC_KEYS
    }
    return static.model_copy(update=update) if update else static


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
        if validate_only:
            return
        await self._broker.coordinator.alter_broker_configs(scope, set_configs, delete, replace)
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
        log.info("dynamic broker configs now: cluster default %s, this broker %s", cluster, own)

    async def run(self) -> None:
        while True:
            await asyncio.sleep(REFRESH_S)
            try:
                await self.refresh()
            except Exception:
                log_failure(log, "reading dynamic broker configs failed")
