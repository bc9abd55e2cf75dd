"""The source cluster as a mirror sees it: admin requests (Metadata, ListOffsets, groups,
configs) over one Kafka-protocol client, a metadata cache that tells fetchers each
partition's leader, and the Fetch version to speak.

Works with any Kafka-protocol source (Apache Kafka or Lakelog). Client security (TLS,
SASL PLAIN/SCRAM) comes from the definition's settings (lakelog.security.client_config);
`unsupported_settings` names what this client cannot do, and `validate` reports it."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar
from uuid import UUID

from lakelog.admin.results import ConfigValue, Node
from lakelog.admin.wire import DESCRIBE_CONFIGS, EARLIEST, KafkaError
from lakelog.log.protocol.kio_build import build
from lakelog.mirror.resource import MirrorResourceClient, request_module
from lakelog.mirror.wire import FETCH_KEY, MAX_FETCH_VERSION, MIN_FETCH_VERSION
from lakelog.security.client_config import ClientSecurity, SecurityConfigError
from lakelog.security.client_config import problems as security_problems
from lakelog.util.errors import ErrorCode

log = logging.getLogger(__name__)

T = TypeVar("T")
LIST_GROUPS = 16
REFRESH_DEBOUNCE_S = 1.0
WARN_EVERY_S = 30.0


class SourceUnavailable(Exception):
    """The source cluster could not be reached or answered garbage."""


def unsupported_settings(configs: Mapping[str, str]) -> list[str]:
    """The source client settings this mirror client cannot honour (secrets masked)."""
    return security_problems(configs)


@dataclass(frozen=True, slots=True)
class SourceTopic:
    name: str
    topic_id: UUID | None
    leaders: Mapping[int, int]
    """Partition -> leader node id."""
    is_internal: bool = False

    @property
    def num_partitions(self) -> int:
        return len(self.leaders)


@dataclass(frozen=True, slots=True)
class ListedSourceGroup:
    group_id: str
    protocol_type: str
    group_type: str
    """'consumer', 'classic', 'share', ... from ListGroups v5; '' when older."""
    state: str


@dataclass
class _Metadata:
    topics: dict[str, SourceTopic] = field(default_factory=dict)
    nodes: dict[int, Node] = field(default_factory=dict)
    fetched_at: float = 0.0


class SourceAdmin(MirrorResourceClient):
    """The admin client plus what the mirror needs beyond `lakelog topics/groups`."""

    def fetch_version(self) -> int:
        theirs = self._versions.get(FETCH_KEY)
        if theirs is None or theirs[1] < MIN_FETCH_VERSION:
            raise KafkaError(ErrorCode.unsupported_version, "source cannot Fetch v4+")
        return min(MAX_FETCH_VERSION, theirs[1])

    def api_max(self, api_key: int) -> int:
        return self._versions.get(api_key, (-1, -1))[1]

    async def list_groups_typed(self) -> list[ListedSourceGroup]:
        """Every group of every broker, with its type where ListGroups v5 tells it."""
        found: dict[str, ListedSourceGroup] = {}
        for node in await self.brokers() or [None]:
            client = self if node is None else await self.client_for(node)
            assert isinstance(client, SourceAdmin)
            for group in await client._typed_here():
                found.setdefault(group.group_id, group)
        return sorted(found.values(), key=lambda g: g.group_id)

    async def _typed_here(self) -> list[ListedSourceGroup]:
        theirs = self.api_max(LIST_GROUPS)
        version = min(theirs, 5)
        if version < 0:
            raise KafkaError(ErrorCode.unsupported_version, "source lacks ListGroups")
        m = request_module(LIST_GROUPS, version)
        request = build(m.ListGroupsRequest, states_filter=(), types_filter=())
        response = await self._roundtrip(LIST_GROUPS, version, request)
        if response.error_code != ErrorCode.none:
            raise KafkaError(response.error_code, "ListGroups")
        return [
            ListedSourceGroup(
                g.group_id,
                g.protocol_type,
                getattr(g, "group_type", "") or "",
                getattr(g, "group_state", "") or "",
            )
            for g in response.groups
        ]

    async def describe_mirror_entries(self, name: str, keys: Sequence[str]) -> dict[str, str]:
        """DescribeConfigs on a Lakelog mirror resource; {} when the source is no Lakelog
        (or does not know the resource)."""
        version = min(self.api_max(DESCRIBE_CONFIGS), 4)
        if version < 1:
            return {}
        result = await self.describe_mirror_resource(version, name, tuple(keys))
        if result.error_code != ErrorCode.none:
            return {}
        return {c.name: c.value for c in result.configs if c.value is not None}


class SourceCluster:
    """One mirror's view of its source; safe to share between tasks (requests are
    serialized on one admin connection; Fetch uses the fetchers' own connections)."""

    def __init__(
        self,
        bootstrap: str,
        configs: Mapping[str, str],
        client_id: str,
        timeout: float = 30.0,
    ) -> None:
        self.bootstrap = bootstrap
        self.configs = dict(configs)
        self.client_id = configs.get("client.id") or client_id
        self.timeout = timeout
        self._client: SourceAdmin | None = None
        self._lock = asyncio.Lock()
        self._metadata = _Metadata()
        self._refresh_wanted = True
        self._refreshing: asyncio.Task[None] | None = None
        self._fetch_version: int | None = None
        self._warned_at = 0.0
        self._security: ClientSecurity | None = None

    @property
    def security(self) -> ClientSecurity:
        """TLS/SASL for every connection to the source (SourceUnavailable if unusable)."""
        if self._security is None:
            try:
                security = ClientSecurity.from_configs(self.configs)
                _ = security.ssl_context  # reads the PEM files once, here
            except SecurityConfigError as exc:
                raise SourceUnavailable(f"source {self.bootstrap}: {exc}") from exc
            self._security = security
        return self._security

    async def close(self) -> None:
        if self._refreshing is not None:
            self._refreshing.cancel()
        client, self._client = self._client, None
        if client is not None:
            await client.close()

    async def call(self, op: Callable[[SourceAdmin], Awaitable[T]]) -> T:
        """Run `op` on the admin connection (reconnecting once after a broken one)."""
        async with self._lock:
            for attempt in (1, 2):
                try:
                    client = await self._connect()
                    return await op(client)
                except KafkaError:
                    raise
                except (OSError, EOFError, TimeoutError, asyncio.IncompleteReadError) as exc:
                    await self._drop()
                    if attempt == 2:
                        raise SourceUnavailable(f"source {self.bootstrap}: {exc!r}") from exc
                except Exception as exc:
                    await self._drop()
                    raise SourceUnavailable(f"source {self.bootstrap}: {exc!r}") from exc
        raise AssertionError("unreachable")

    async def _connect(self) -> SourceAdmin:
        if self._client is not None:
            return self._client
        security = self.security
        last: BaseException | None = None
        for address in [a.strip() for a in self.bootstrap.split(",") if a.strip()]:
            try:
                client = await SourceAdmin.connect(address, self.client_id, self.timeout, security)
            except (OSError, TimeoutError, asyncio.IncompleteReadError, KafkaError) as exc:
                last = exc
                continue
            assert isinstance(client, SourceAdmin)
            self._client = client
            return client
        raise OSError(f"no source broker of {self.bootstrap} answered ({last!r})")

    async def _drop(self) -> None:
        self._fetch_version = None  # the source may come back upgraded
        client, self._client = self._client, None
        if client is not None:
            try:
                await client.close()
            except Exception:  # already broken
                log.debug("closing a broken source connection failed", exc_info=True)

    # -- metadata
    async def fetch_version(self) -> int:
        """The Fetch version to speak (learnt once per connection to the source)."""
        if self._fetch_version is None:
            self._fetch_version = await self.call(lambda c: _sync(c.fetch_version()))
        return self._fetch_version

    async def refresh(self, names: Sequence[str] | None = None) -> dict[str, SourceTopic]:
        """Metadata for the named topics (all with None), merged into the cache."""

        async def op(client: SourceAdmin) -> tuple[list[Any], list[Node]]:
            topics = await client.describe_topics(list(names) if names is not None else None)
            return topics, await client.brokers()

        described, nodes = await self.call(op)
        got = {
            t.name: SourceTopic(
                t.name,
                t.topic_id,
                {p.partition: p.leader for p in t.partitions},
                t.is_internal,
            )
            for t in described
        }
        self._metadata.nodes = {n.node_id: n for n in nodes}
        if names is None:
            self._metadata.topics = dict(got)
        else:
            self._metadata.topics.update(got)
        self._metadata.fetched_at = time.monotonic()
        self._refresh_wanted = False
        return got

    def want_refresh(self) -> None:
        self._refresh_wanted = True

    async def leader(self, topic: str, partition: int) -> Node | None:
        """The source broker to fetch `topic`-`partition` from (None: unknown for now; a
        refresh is under way)."""
        meta = self._metadata
        found = meta.topics.get(topic)
        if found is None or partition not in found.leaders:
            self._refresh_wanted = True
        if self._refresh_wanted and time.monotonic() - meta.fetched_at > REFRESH_DEBOUNCE_S:
            self._start_refresh()
        if found is None:
            return None
        leader = found.leaders.get(partition)
        return None if leader is None or leader < 0 else meta.nodes.get(leader)

    def _start_refresh(self) -> None:
        if self._refreshing is not None and not self._refreshing.done():
            return
        names = sorted(self._metadata.topics) or None
        self._metadata.fetched_at = time.monotonic()  # debounce failures too
        self._refreshing = asyncio.get_running_loop().create_task(self._refresh_quietly(names))

    async def _refresh_quietly(self, names: Sequence[str] | None) -> None:
        try:
            await self.refresh(names)
        except (SourceUnavailable, KafkaError) as exc:
            now = time.monotonic()
            if now - self._warned_at > WARN_EVERY_S:  # once in a while during an outage
                self._warned_at = now
                log.warning("source %s metadata refresh failed: %s", self.bootstrap, exc)

    def track(self, topics: Sequence[str]) -> None:
        """Make sure these topics are in the next refresh."""
        for name in topics:
            if name not in self._metadata.topics:
                self._metadata.topics[name] = SourceTopic(name, None, {})
                self._refresh_wanted = True

    # -- offsets, groups, configs
    async def earliest_offsets(
        self, partitions: Sequence[tuple[str, int]]
    ) -> dict[tuple[str, int], int]:
        async def op(client: SourceAdmin) -> dict[tuple[str, int], int]:
            listed = await client.list_offsets({tp: EARLIEST for tp in partitions})
            out = {}
            for tp, value in listed.items():
                if value.error != ErrorCode.none:
                    raise KafkaError(value.error, f"ListOffsets {tp[0]}-{tp[1]}")
                out[tp] = value.offset
            return out

        return await self.call(op)

    async def topic_configs(self, name: str) -> list[ConfigValue]:
        return await self.call(lambda c: c.describe_topic_configs(name))

    async def groups(self) -> list[ListedSourceGroup]:
        return await self.call(lambda c: c.list_groups_typed())

    async def committed(self, group_id: str) -> dict[tuple[str, int], int]:
        return await self.call(lambda c: c.committed_offsets(group_id))

    async def mirror_entries(self, name: str, keys: Sequence[str]) -> dict[str, str]:
        return await self.call(lambda c: c.describe_mirror_entries(name, keys))


async def _sync(value: T) -> T:
    return value
