"""What handlers reach through `ctx.broker`, as small protocols, one per part of a broker.

`RequestContext.broker` is typed by `BrokerServices`, all of them together; helpers that
need one part take that part (`authz` the `Security` one, `api_versions` the `Listener`
one). The Broker (`lakelog.server.broker`) satisfies them structurally and hands itself to
the Dispatcher; nothing here imports it, so no handler depends on the module that builds
the broker, and a test can pass any object with the parts its handler uses.

The parts are the broker's own components (topic cache, batch coordinator, group
coordinator...): lower layers, referenced by their concrete types. Every member is
read-only here (properties): handlers use the components, never replace them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from lakelog.config import Settings
    from lakelog.coordinator.interface import BatchCoordinator
    from lakelog.coordinator.topic_types import BrokerInfo
    from lakelog.groups.coordinator import GroupCoordinator
    from lakelog.groups.group_configs import GroupConfigs
    from lakelog.groups.share.service import ShareService
    from lakelog.log.fetch.reader import BatchReader
    from lakelog.log.fetch.waiter import CommitWaiter
    from lakelog.log.produce.wal_writer import WalWriter
    from lakelog.mirror.manager import MirrorManager
    from lakelog.security.authorizer import Authorizer
    from lakelog.server.cluster.dynamic_broker_configs import DynamicBrokerConfigs
    from lakelog.server.listener import Server
    from lakelog.server.topics import TopicCache


class ClusterView(Protocol):
    """Who this broker is, its settings, and which brokers serve (Metadata, DescribeCluster,
    FindCoordinator, the outage answers)."""

    @property
    def settings(self) -> Settings: ...
    @property
    def broker_id(self) -> int: ...
    @property
    def cluster_id(self) -> str: ...
    @property
    def broker_epoch(self) -> int: ...
    @property
    def stopping(self) -> bool: ...
    async def live_brokers(self) -> list[BrokerInfo]: ...
    def serving(self, brokers: list[BrokerInfo], zone: str | None) -> list[BrokerInfo]: ...
    def fenced_lately(self) -> list[BrokerInfo]: ...
    def self_info(self) -> BrokerInfo: ...


class LogAccess(Protocol):
    """Topics and their records: the batch coordinator, the topic cache, the produce path
    (WAL writer, mirrored topics are read-only) and the fetch path (reader, commit waiter)."""

    @property
    def coordinator(self) -> BatchCoordinator: ...
    @property
    def topics(self) -> TopicCache: ...
    @property
    def wal(self) -> WalWriter: ...
    @property
    def mirrors(self) -> MirrorManager: ...
    @property
    def reader(self) -> BatchReader: ...
    @property
    def waiter(self) -> CommitWaiter: ...


class GroupAccess(Protocol):
    """Consumer groups (classic and KIP-848), share groups and their configs."""

    @property
    def groups(self) -> GroupCoordinator: ...
    @property
    def share(self) -> ShareService: ...
    @property
    def group_configs(self) -> GroupConfigs: ...


class Security(Protocol):
    """The ACL authorizer (`authz`)."""

    @property
    def authorizer(self) -> Authorizer: ...


class Listener(Protocol):
    """The network server: whether SASL is on, the SCRAM login credentials."""

    @property
    def server(self) -> Server: ...


class BrokerConfigs(Protocol):
    """Broker configs applied at runtime (DescribeConfigs, AlterConfigs)."""

    @property
    def dynamic_configs(self) -> DynamicBrokerConfigs: ...


class BrokerServices(
    ClusterView, LogAccess, GroupAccess, Security, Listener, BrokerConfigs, Protocol
):
    """Everything a handler may use: what `RequestContext.broker` offers."""
