"""A small Kafka admin client on kio and asyncio streams, for `lakelog topics` and
`lakelog groups`.

It speaks to any Kafka-protocol broker (Lakelog or Apache Kafka): ApiVersions first, then
each request at the highest version both sides know. One request at a time per connection:
enough for a command-line tool, with no dependency on a Kafka client library. Requests that
belong to another broker (a group's coordinator, a partition's leader) go over a second
connection to that broker, opened on first use.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import io
import struct
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any, TypeVar
from uuid import UUID

from kio.index import load_entity_schema, load_payload_module, load_response_schema
from kio.serial import entity_reader, entity_writer
from kio.serial.errors import DecodeError
from kio.static.constants import EntityType

from lakelog.config import split_host_port
from lakelog.log.protocol.bounded import OutOfBounds, check_body
from lakelog.log.protocol.kio_build import build
from lakelog.log.protocol.varint import skip_tagged_fields
from lakelog.security.acl import (
    AclBinding,
    AclFilter,
    Operation,
    PatternType,
    Permission,
    ResourceType,
)
from lakelog.security.client_config import ClientSecurity
from lakelog.security.sasl_client import SaslFailed, authenticate
from lakelog.util.errors import ErrorCode

API_VERSIONS, METADATA, CREATE_TOPICS, DELETE_TOPICS, DESCRIBE_CONFIGS = 18, 3, 19, 20, 32
CREATE_PARTITIONS, LIST_OFFSETS, FIND_COORDINATOR, LIST_GROUPS = 37, 2, 10, 16
DESCRIBE_GROUPS, OFFSET_FETCH, OFFSET_COMMIT, DELETE_GROUPS = 15, 9, 8, 42
DESCRIBE_ACLS, CREATE_ACLS, DELETE_ACLS = 29, 30, 31
TOPIC_RESOURCE = 2
BROKER_RESOURCE = 4
GROUP_KEY_TYPE = 0
EARLIEST, LATEST = -2, -1
"""ListOffsets' special timestamps: the log start and the log end."""
# The versions this client can build: (min, max) per API key. OffsetFetch and OffsetCommit
# stop below v10, where topics are named by id only.
CLIENT_VERSIONS = {
    METADATA: (1, 12),
    CREATE_TOPICS: (2, 7),
    DELETE_TOPICS: (1, 6),
    DESCRIBE_CONFIGS: (1, 4),
    CREATE_PARTITIONS: (0, 3),
    LIST_OFFSETS: (1, 10),
    FIND_COORDINATOR: (0, 6),
    LIST_GROUPS: (0, 5),
    DESCRIBE_GROUPS: (0, 6),
    OFFSET_FETCH: (2, 9),
    OFFSET_COMMIT: (2, 9),
    DELETE_GROUPS: (0, 2),
    DESCRIBE_ACLS: (1, 3),
    CREATE_ACLS: (1, 3),
    DELETE_ACLS: (1, 3),
    77: (1, 1),  # ShareGroupDescribe
    90: (0, 1),  # DescribeShareGroupOffsets
    91: (0, 0),  # AlterShareGroupOffsets
    92: (0, 0),  # DeleteShareGroupOffsets
}
COORDINATOR_RETRIABLE = frozenset(
    {
        ErrorCode.coordinator_not_available,
        ErrorCode.not_coordinator,
        ErrorCode.coordinator_load_in_progress,
    }
)
"""Errors after which the coordinator is looked up again: it moved or is still loading."""
COORDINATOR_ATTEMPTS = 10
RETRY_BACKOFF_S = 0.2
ASSIGNMENT_MAX_VERSION = 3
API_VERSIONS_REQUEST_VERSION = 3
_HEADER = struct.Struct(">hhi")
T = TypeVar("T")
TopicPartition = tuple[str, int]


class KafkaError(Exception):
    """A request answered with a Kafka error code."""

    def __init__(self, error: ErrorCode, message: str | None = None) -> None:
        super().__init__(f"{error.name.upper()}: {message}" if message else error.name.upper())
        self.error = error
        self.message = message


@dataclass(frozen=True, slots=True)
class PartitionDescription:
    partition: int
    leader: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class TopicDescription:
    name: str
    topic_id: UUID | None
    partitions: tuple[PartitionDescription, ...]
    is_internal: bool = False

    @property
    def replication_factor(self) -> int:
        return len(self.partitions[0].replicas) if self.partitions else 0


@dataclass(frozen=True, slots=True)
class ConfigValue:
    name: str
    value: str | None
    source: int
    """Kafka's ConfigSource: 1 = set on the topic, 4/5 = broker setting or default."""
    read_only: bool

    @property
    def is_topic_override(self) -> bool:
        return self.source == 1


@dataclass(frozen=True, slots=True)
class CreatedTopic:
    name: str
    topic_id: UUID | None
    num_partitions: int
    replication_factor: int
    configs: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Node:
    node_id: int
    host: str
    port: int
    rack: str | None = None

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"


@dataclass(frozen=True, slots=True)
class ListedGroup:
    group_id: str
    protocol_type: str
    state: str
    """Empty when the broker's ListGroups is older than v4 and the group was not described."""


@dataclass(frozen=True, slots=True)
class GroupMember:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    assignment: dict[str, tuple[int, ...]]
    """Topic -> partitions; empty for members of non-consumer groups."""

    def partitions(self) -> list[TopicPartition]:
        return sorted((t, p) for t, ps in self.assignment.items() for p in ps)


@dataclass(frozen=True, slots=True)
class GroupDescription:
    group_id: str
    state: str
    protocol_type: str
    protocol: str
    members: tuple[GroupMember, ...]
    coordinator: Node


@dataclass(frozen=True, slots=True)
class ListedOffset:
    offset: int
    """-1 when no record matches (a timestamp past the last record)."""
    timestamp: int
    error: ErrorCode = ErrorCode.none


def decode_assignment(data: bytes | None) -> dict[str, tuple[int, ...]]:
    """A consumer member's assignment (ConsumerProtocolAssignment: a 2-byte version, then
    the body) as topic -> partitions. Versions newer than kio knows are read with the newest
    schema, as Kafka's consumer does: they only append fields."""
    if not data:
        return {}
    if len(data) < 2:
        raise ValueError("assignment shorter than its version prefix")
    version = int.from_bytes(data[:2], "big", signed=True)
    if version < 0:
        raise ValueError(f"bad assignment version {version}")
    schema = load_entity_schema(
        "consumer_protocol_assignment", min(version, ASSIGNMENT_MAX_VERSION), EntityType.data
    )
    try:
        assignment, _ = entity_reader(schema)(bytes(data), 2)
    except DecodeError as exc:
        raise ValueError(f"bad assignment: {exc!r}") from exc
    out: dict[str, list[int]] = {}
    for tp in assignment.assigned_partitions:
        out.setdefault(tp.topic, []).extend(int(p) for p in tp.partitions)
    return {topic: tuple(sorted(parts)) for topic, parts in out.items()}


def _ms(ms: int) -> datetime.timedelta:
    return datetime.timedelta(milliseconds=ms)


def _module(api_key: int, version: int, kind: EntityType) -> ModuleType:
    return load_payload_module(api_key, version, kind)


def encode_request(
    api_key: int, version: int, correlation_id: int, client_id: str, request: Any
) -> bytes:
    """A whole request frame: size, header v1 (or v2 for flexible versions), body."""
    out = io.BytesIO()
    out.write(b"\0\0\0\0")
    out.write(_HEADER.pack(api_key, version, correlation_id))
    raw_id = client_id.encode()
    out.write(len(raw_id).to_bytes(2, "big") + raw_id)
    if type(request).__flexible__:
        out.write(b"\0")
    entity_writer(type(request))(out, request)
    data = out.getbuffer()
    struct.pack_into(">i", data, 0, len(data) - 4)
    del data
    return out.getvalue()


class AdminClient:
    """Connect with `await AdminClient.connect("host:port")`; close with `await close()`."""

    def __init__(
        self,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        client_id: str,
        timeout: float,
    ) -> None:
        self._reader = reader
        self._writer = writer
        self._client_id = client_id
        self._timeout = timeout
        self._correlation_id = 0
        self._versions: dict[int, tuple[int, int]] = {}
        self.address = ""
        self._peers: dict[str, AdminClient] = {}
        self._security: ClientSecurity | None = None

    @classmethod
    async def connect(
        cls,
        bootstrap: str,
        client_id: str = "lakelog-admin",
        timeout: float = 30.0,
        security: ClientSecurity | None = None,
    ) -> AdminClient:
        """`bootstrap`: HOST:PORT[,HOST:PORT...], tried in turn until one answers.
        `security`: TLS and/or SASL (after ApiVersions, as Kafka clients do)."""
        addresses = [entry.strip() for entry in bootstrap.split(",") if entry.strip()]
        if not addresses:
            raise ValueError("empty bootstrap server list")
        last: BaseException | None = None
        for address in addresses:
            try:
                return await cls._connect_one(address, client_id, timeout, security)
            except (OSError, TimeoutError, asyncio.IncompleteReadError) as exc:
                last = exc
        assert last is not None
        raise last

    @classmethod
    async def _connect_one(
        cls, address: str, client_id: str, timeout: float, security: ClientSecurity | None
    ) -> AdminClient:
        host, port = split_host_port(address)
        tls = security.ssl_context if security is not None else None
        reader, writer = await asyncio.wait_for(
            asyncio.open_connection(host, port, ssl=tls, server_hostname=host if tls else None),
            timeout,
        )
        client = cls(reader, writer, client_id, timeout)
        client.address = f"{host}:{port}"
        client._security = security
        try:
            await client._negotiate()
            if security is not None and security.uses_sasl:
                try:
                    await authenticate(client._roundtrip, security)
                except SaslFailed as exc:
                    raise KafkaError(exc.error, str(exc)) from exc
        except BaseException:
            await client.close()
            raise
        return client

    async def close(self) -> None:
        peers, self._peers = list(self._peers.values()), {}
        for peer in peers:
            await peer.close()
        self._writer.close()
        with contextlib.suppress(OSError):
            await self._writer.wait_closed()

    async def client_for(self, node: Node) -> AdminClient:
        """A connection to `node`: this one when it is the same address, else a second one
        kept until `close()`."""
        if node.address == self.address:
            return self
        peer = self._peers.get(node.address)
        if peer is None:
            peer = await type(self).connect(
                node.address, self._client_id, self._timeout, self._security
            )
            self._peers[node.address] = peer
        return peer

    async def __aenter__(self) -> AdminClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    # ---------------------------------------------------------------- transport

    async def _roundtrip(
        self, api_key: int, version: int, request: Any, response_version: int | None = None
    ) -> Any:
        self._correlation_id += 1
        correlation_id = self._correlation_id
        self._writer.write(
            encode_request(api_key, version, correlation_id, self._client_id, request)
        )
        await self._writer.drain()
        size = int.from_bytes(
            await asyncio.wait_for(self._reader.readexactly(4), self._timeout), "big"
        )
        data = await asyncio.wait_for(self._reader.readexactly(size), self._timeout)
        if int.from_bytes(data[:4], "big", signed=True) != correlation_id:
            raise ConnectionError("response correlation id does not match the request")
        response_version = version if response_version is None else response_version
        cls = load_response_schema(api_key, response_version)
        pos = 4
        if cls.__flexible__ and api_key != API_VERSIONS:
            pos = skip_tagged_fields(data, pos)
        try:
            check_body(cls, data, pos)  # kio aborts the process on a huge length
        except OutOfBounds as exc:
            raise ConnectionError(f"malformed response: {exc}") from exc
        response, _ = entity_reader(cls)(data, pos)
        return response

    async def _negotiate(self) -> None:
        m = _module(API_VERSIONS, API_VERSIONS_REQUEST_VERSION, EntityType.request)
        request = m.ApiVersionsRequest(
            client_software_name="lakelog-admin", client_software_version="1"
        )
        try:
            response = await self._roundtrip(API_VERSIONS, API_VERSIONS_REQUEST_VERSION, request)
        except Exception:  # an old broker's v0 answer does not parse as v3
            response = None
        if response is None or response.error_code != ErrorCode.none:
            # KIP-511: an older broker answers in v0; ask again in v0.
            request = _module(API_VERSIONS, 0, EntityType.request).ApiVersionsRequest()
            response = await self._roundtrip(API_VERSIONS, 0, request)
        if response.error_code != ErrorCode.none:
            raise KafkaError(response.error_code, "ApiVersions failed")
        self._versions = {
            int(k.api_key): (int(k.min_version), int(k.max_version)) for k in response.api_keys
        }

    def version_for(self, api_key: int, ours: tuple[int, int] | None = None) -> int:
        """The highest version both this client (or the caller's range `ours`) and the
        broker support."""
        ours = ours or CLIENT_VERSIONS[api_key]
        theirs = self._versions.get(api_key)
        if theirs is None:
            raise KafkaError(ErrorCode.unsupported_version, f"broker lacks API {api_key}")
        low, high = max(ours[0], theirs[0]), min(ours[1], theirs[1])
        if low > high:
            raise KafkaError(ErrorCode.unsupported_version, f"no common version for API {api_key}")
        return high

    async def _call(
        self, api_key: int, build_request: Callable[[ModuleType, int], Any]
    ) -> tuple[Any, int]:
        version = self.version_for(api_key)
        m = _module(api_key, version, EntityType.request)
        return await self._roundtrip(api_key, version, build_request(m, version)), version

    # ---------------------------------------------------------------- operations

    async def create_topic(
        self,
        name: str,
        partitions: int = -1,
        replication_factor: int = -1,
        configs: Mapping[str, str] | None = None,
        validate_only: bool = False,
    ) -> CreatedTopic:
        def make(m: ModuleType, _version: int) -> Any:
            topic = m.CreatableTopic(
                name=name,
                num_partitions=partitions,
                replication_factor=replication_factor,
                assignments=(),
                configs=tuple(
                    m.CreatableTopicConfig(name=k, value=v) for k, v in (configs or {}).items()
                ),
            )
            return build(
                m.CreateTopicsRequest,
                topics=(topic,),
                timeout=_ms(30_000),
                validate_only=validate_only,
            )

        response, _ = await self._call(CREATE_TOPICS, make)
        [result] = response.topics
        if result.error_code != ErrorCode.none:
            raise KafkaError(result.error_code, result.error_message)
        returned = getattr(result, "configs", None) or ()
        return CreatedTopic(
            name=result.name,
            topic_id=getattr(result, "topic_id", None),
            num_partitions=int(getattr(result, "num_partitions", partitions)),
            replication_factor=int(getattr(result, "replication_factor", replication_factor)),
            configs={c.name: c.value for c in returned if c.value is not None},
        )

    async def delete_topic(self, name: str) -> None:
        def make(m: ModuleType, version: int) -> Any:
            if version >= 6:
                topics = (m.DeleteTopicState(name=name, topic_id=None),)
                return m.DeleteTopicsRequest(topics=topics, timeout=_ms(30_000))
            return m.DeleteTopicsRequest(topic_names=(name,), timeout=_ms(30_000))

        response, _ = await self._call(DELETE_TOPICS, make)
        [result] = response.responses
        if result.error_code != ErrorCode.none:
            raise KafkaError(result.error_code, getattr(result, "error_message", None))

    async def create_partitions(self, name: str, total: int) -> None:
        def make(m: ModuleType, _version: int) -> Any:
            topic = m.CreatePartitionsTopic(name=name, count=total, assignments=None)
            return m.CreatePartitionsRequest(
                topics=(topic,), timeout=_ms(30_000), validate_only=False
            )

        response, _ = await self._call(CREATE_PARTITIONS, make)
        [result] = response.results
        if result.error_code != ErrorCode.none:
            raise KafkaError(result.error_code, result.error_message)

    async def _metadata(self, names: Sequence[str] | None) -> Any:
        """The raw Metadata response: every topic with None, no topic with ()."""

        def make(m: ModuleType, version: int) -> Any:
            topics = None
            if names is not None:
                topics = tuple(build(m.MetadataRequestTopic, name=n, topic_id=None) for n in names)
            return build(
                m.MetadataRequest,
                topics=topics,
                allow_auto_topic_creation=False,
                include_cluster_authorized_operations=False,
                include_topic_authorized_operations=False,
            )

        response, _ = await self._call(METADATA, make)
        return response

    async def brokers(self) -> list[Node]:
        """The cluster's brokers, by node id."""
        response = await self._metadata(())
        return sorted(
            (
                Node(int(b.node_id), b.host, int(b.port), getattr(b, "rack", None))
                for b in response.brokers
            ),
            key=lambda n: n.node_id,
        )

    async def controller_id(self) -> int:
        return int(getattr(await self._metadata(()), "controller_id", -1))

    async def describe_topics(self, names: Sequence[str] | None = None) -> list[TopicDescription]:
        """Topics from Metadata (all of them with None), sorted by name; a missing named
        topic raises UNKNOWN_TOPIC_OR_PARTITION."""
        response = await self._metadata(names)
        described = []
        for topic in response.topics:
            if topic.error_code != ErrorCode.none:
                raise KafkaError(topic.error_code, f"topic {topic.name}")
            partitions = tuple(
                sorted(
                    (
                        PartitionDescription(
                            int(p.partition_index),
                            int(p.leader_id),
                            tuple(int(r) for r in p.replica_nodes),
                            tuple(int(r) for r in p.isr_nodes),
                        )
                        for p in topic.partitions
                    ),
                    key=lambda p: p.partition,
                )
            )
            topic_id = getattr(topic, "topic_id", None)
            described.append(
                TopicDescription(
                    name=topic.name,
                    topic_id=topic_id if topic_id is not None and topic_id.int else None,
                    partitions=partitions,
                    is_internal=bool(topic.is_internal),
                )
            )
        return sorted(described, key=lambda t: t.name)

    async def list_topics(self) -> list[str]:
        return [t.name for t in await self.describe_topics(None)]

    async def describe_topic_configs(self, name: str) -> list[ConfigValue]:
        return await self._describe_configs(TOPIC_RESOURCE, name)

    async def describe_broker_configs(self, node: Node) -> list[ConfigValue]:
        """A broker's own settings (asked of that broker, as Kafka requires)."""
        client = await self.client_for(node)
        return await client._describe_configs(BROKER_RESOURCE, str(node.node_id))

    async def _describe_configs(self, resource_type: int, name: str) -> list[ConfigValue]:
        result = await self.describe_config_result(resource_type, name)
        return [
            ConfigValue(c.name, c.value, int(c.config_source), bool(c.read_only))
            for c in result.configs
        ]

    async def describe_config_result(
        self, resource_type: int, name: str, include_synonyms: bool = False
    ) -> Any:
        """DescribeConfigs for one resource, all its configs: the response's result entry
        (KafkaError if it carries an error)."""

        def make(m: ModuleType, _version: int) -> Any:
            resource = m.DescribeConfigsResource(
                resource_type=resource_type, resource_name=name, configuration_keys=None
            )
            return build(
                m.DescribeConfigsRequest,
                resources=(resource,),
                include_synonyms=include_synonyms,
                include_documentation=False,
            )

        response, _ = await self._call(DESCRIBE_CONFIGS, make)
        [result] = response.results
        if result.error_code != ErrorCode.none:
            raise KafkaError(result.error_code, result.error_message or name)
        return result

    # ---------------------------------------------------------------- log offsets

    async def list_offsets(
        self,
        timestamps: Mapping[TopicPartition, int],
    ) -> dict[TopicPartition, ListedOffset]:
        """ListOffsets per partition (EARLIEST, LATEST or a timestamp in ms), sent to each
        partition's leader. A partition that does not exist answers with its error code
        instead of raising, so one deleted topic does not hide the others."""
        if not timestamps:
            return {}
        response = await self._metadata(sorted({topic for topic, _ in timestamps}))
        nodes = {
            int(b.node_id): Node(int(b.node_id), b.host, int(b.port)) for b in response.brokers
        }
        leaders = {
            (t.name, int(p.partition_index)): int(p.leader_id)
            for t in response.topics
            if t.error_code == ErrorCode.none
            for p in t.partitions
        }
        out: dict[TopicPartition, ListedOffset] = {}
        by_node: dict[Node | None, dict[TopicPartition, int]] = {}
        for tp, timestamp in timestamps.items():
            if tp not in leaders:
                out[tp] = ListedOffset(-1, -1, ErrorCode.unknown_topic_or_partition)
            else:
                by_node.setdefault(nodes.get(leaders[tp]), {})[tp] = timestamp
        for node, asks in by_node.items():
            client = self if node is None else await self.client_for(node)
            out.update(await client._list_offsets_here(asks))
        return out

    async def _list_offsets_here(
        self,
        asks: Mapping[TopicPartition, int],
    ) -> dict[TopicPartition, ListedOffset]:
        by_topic: dict[str, list[tuple[int, int]]] = {}
        for (topic, partition), timestamp in sorted(asks.items()):
            by_topic.setdefault(topic, []).append((partition, timestamp))

        def make(m: ModuleType, _version: int) -> Any:
            topics = tuple(
                m.ListOffsetsTopic(
                    name=topic,
                    partitions=tuple(
                        build(
                            m.ListOffsetsPartition,
                            partition_index=p,
                            current_leader_epoch=-1,
                            timestamp=ts,
                        )
                        for p, ts in parts
                    ),
                )
                for topic, parts in by_topic.items()
            )
            return build(
                m.ListOffsetsRequest,
                replica_id=-1,
                isolation_level=0,
                topics=topics,
                timeout=_ms(int(self._timeout * 1000)),
            )

        response, _ = await self._call(LIST_OFFSETS, make)
        return {
            (t.name, int(p.partition_index)): ListedOffset(
                int(p.offset), int(p.timestamp), p.error_code
            )
            for t in response.topics
            for p in t.partitions
        }

    # ---------------------------------------------------------------- groups

    async def find_coordinator(self, group_id: str) -> Node:
        """The broker that coordinates `group_id` (FindCoordinator, key type 0)."""

        def make(m: ModuleType, version: int) -> Any:
            if version >= 4:
                return m.FindCoordinatorRequest(
                    key_type=GROUP_KEY_TYPE, coordinator_keys=(group_id,)
                )
            return build(m.FindCoordinatorRequest, key=group_id, key_type=GROUP_KEY_TYPE)

        response, version = await self._call(FIND_COORDINATOR, make)
        if version >= 4:
            if not response.coordinators:
                raise KafkaError(ErrorCode.coordinator_not_available, f"group {group_id}")
            response = response.coordinators[0]
        if response.error_code != ErrorCode.none:
            raise KafkaError(
                response.error_code, getattr(response, "error_message", None) or f"group {group_id}"
            )
        return Node(int(response.node_id), response.host, int(response.port))

    async def _on_coordinator(
        self, group_id: str, op: Callable[[AdminClient, Node], Awaitable[T]]
    ) -> T:
        """Run `op` on the group's coordinator; look it up again while it moves or loads."""
        for attempt in range(1, COORDINATOR_ATTEMPTS + 1):
            try:
                node = await self.find_coordinator(group_id)
                return await op(await self.client_for(node), node)
            except KafkaError as exc:
                if exc.error not in COORDINATOR_RETRIABLE or attempt == COORDINATOR_ATTEMPTS:
                    raise
            await asyncio.sleep(RETRY_BACKOFF_S)
        raise AssertionError("unreachable")

    async def list_groups(self, states: Sequence[str] = ()) -> list[ListedGroup]:
        """Every group of the cluster, by id: each broker lists the groups it coordinates.
        `states` keeps groups in those states (case-insensitive); brokers older than
        ListGroups v4 cannot filter, so the groups are described here to learn their state."""
        found: dict[str, ListedGroup] = {}
        filter_here = False
        for node in await self.brokers() or [None]:
            client = self if node is None else await self.client_for(node)
            groups, filtered = await client._list_groups_here(states)
            filter_here |= bool(states) and not filtered
            for group in groups:
                found.setdefault(group.group_id, group)
        listed = sorted(found.values(), key=lambda g: g.group_id)
        if not filter_here:
            return listed
        wanted = {s.lower() for s in states}
        kept = []
        for group in listed:
            state = group.state
            if not state:
                try:
                    state = (await self.describe_group(group.group_id)).state
                except KafkaError:
                    continue  # deleted since it was listed
            if state.lower() in wanted:
                kept.append(ListedGroup(group.group_id, group.protocol_type, state))
        return kept

    async def _list_groups_here(self, states: Sequence[str]) -> tuple[list[ListedGroup], bool]:
        def make(m: ModuleType, _version: int) -> Any:
            return build(m.ListGroupsRequest, states_filter=tuple(states), types_filter=())

        response, version = await self._call(LIST_GROUPS, make)
        if response.error_code != ErrorCode.none:
            raise KafkaError(response.error_code, "ListGroups")
        groups = [
            ListedGroup(g.group_id, g.protocol_type, getattr(g, "group_state", ""))
            for g in response.groups
        ]
        return groups, version >= 4

    async def describe_group(self, group_id: str) -> GroupDescription:
        """DescribeGroups at the coordinator, with each consumer member's assignment decoded."""

        async def op(client: AdminClient, node: Node) -> GroupDescription:
            def make(m: ModuleType, _version: int) -> Any:
                return build(
                    m.DescribeGroupsRequest, groups=(group_id,), include_authorized_operations=False
                )

            response, _ = await client._call(DESCRIBE_GROUPS, make)
            [group] = response.groups
            if group.error_code != ErrorCode.none:
                raise KafkaError(
                    group.error_code, getattr(group, "error_message", None) or f"group {group_id}"
                )
            consumer = group.protocol_type == "consumer"
            members = tuple(
                GroupMember(
                    m.member_id,
                    getattr(m, "group_instance_id", None),
                    m.client_id,
                    m.client_host,
                    _safe_assignment(m.member_assignment) if consumer else {},
                )
                for m in group.members
            )
            return GroupDescription(
                group.group_id,
                group.group_state,
                group.protocol_type,
                group.protocol_data,
                members,
                node,
            )

        return await self._on_coordinator(group_id, op)

    async def committed_offsets(
        self,
        group_id: str,
        partitions: Sequence[TopicPartition] | None = None,
    ) -> dict[TopicPartition, int]:
        """The group's committed offsets (OffsetFetch), for every partition it committed when
        `partitions` is None; partitions without a commit are left out."""
        asked = None if partitions is None else _by_topic(partitions)

        def make(m: ModuleType, version: int) -> Any:
            if version >= 8:
                topics = (
                    None
                    if asked is None
                    else tuple(
                        m.OffsetFetchRequestTopics(name=t, partition_indexes=ps)
                        for t, ps in asked.items()
                    )
                )
                group = build(
                    m.OffsetFetchRequestGroup,
                    group_id=group_id,
                    member_id=None,
                    member_epoch=-1,
                    topics=topics,
                )
                return build(m.OffsetFetchRequest, groups=(group,), require_stable=False)
            topics = (
                None
                if asked is None
                else tuple(
                    m.OffsetFetchRequestTopic(name=t, partition_indexes=ps)
                    for t, ps in asked.items()
                )
            )
            return build(
                m.OffsetFetchRequest, group_id=group_id, topics=topics, require_stable=False
            )

        async def op(client: AdminClient, _node: Node) -> dict[TopicPartition, int]:
            response, version = await client._call(OFFSET_FETCH, make)
            holder = response.groups[0] if version >= 8 else response
            if holder.error_code != ErrorCode.none:
                raise KafkaError(holder.error_code, f"group {group_id}")
            out = {}
            for topic in holder.topics:
                for p in topic.partitions:
                    if p.error_code != ErrorCode.none:
                        raise KafkaError(p.error_code, f"{topic.name}-{p.partition_index}")
                    if p.committed_offset >= 0:
                        out[(topic.name, int(p.partition_index))] = int(p.committed_offset)
            return out

        return await self._on_coordinator(group_id, op)

    async def commit_offsets(
        self,
        group_id: str,
        offsets: Mapping[TopicPartition, int],
    ) -> dict[TopicPartition, ErrorCode]:
        """OffsetCommit in the standalone form admin tools use (generation -1, no member
        id): coordinators accept it only while the group has no active member. Returns each
        partition's error code."""
        by_topic: dict[str, list[tuple[int, int]]] = {}
        for (topic, partition), offset in sorted(offsets.items()):
            by_topic.setdefault(topic, []).append((partition, offset))

        def make(m: ModuleType, _version: int) -> Any:
            topics = tuple(
                m.OffsetCommitRequestTopic(
                    name=topic,
                    partitions=tuple(
                        build(
                            m.OffsetCommitRequestPartition,
                            partition_index=p,
                            committed_offset=o,
                            committed_leader_epoch=-1,
                            committed_metadata="",
                        )
                        for p, o in parts
                    ),
                )
                for topic, parts in by_topic.items()
            )
            return build(
                m.OffsetCommitRequest,
                group_id=group_id,
                generation_id_or_member_epoch=-1,
                member_id="",
                group_instance_id=None,
                topics=topics,
            )

        async def op(client: AdminClient, _node: Node) -> dict[TopicPartition, ErrorCode]:
            response, _ = await client._call(OFFSET_COMMIT, make)
            errors = {
                (t.name, int(p.partition_index)): p.error_code
                for t in response.topics
                for p in t.partitions
            }
            moved = next((e for e in errors.values() if e in COORDINATOR_RETRIABLE), None)
            if moved is not None:
                raise KafkaError(moved, f"group {group_id}")
            return errors

        return await self._on_coordinator(group_id, op)

    async def delete_groups(self, group_ids: Sequence[str]) -> dict[str, ErrorCode]:
        """DeleteGroups, each group at its coordinator; each group's error code, so one
        failure does not hide the others."""

        async def op(client: AdminClient, _node: Node, group_id: str) -> ErrorCode:
            def make(m: ModuleType, _version: int) -> Any:
                return m.DeleteGroupsRequest(groups_names=(group_id,))

            response, _ = await client._call(DELETE_GROUPS, make)
            [result] = response.results
            if result.error_code in COORDINATOR_RETRIABLE:
                raise KafkaError(result.error_code, f"group {group_id}")
            return ErrorCode(result.error_code)

        out = {}
        for group_id in group_ids:
            try:
                out[group_id] = await self._on_coordinator(
                    group_id, lambda client, node, g=group_id: op(client, node, g)
                )
            except KafkaError as exc:
                out[group_id] = exc.error
        return out

    # ---------------------------------------------------------------- ACLs

    async def create_acls(self, bindings: Sequence[AclBinding]) -> list[KafkaError | None]:
        """Create the ACLs: per binding, None or the error it was refused with."""

        def make(m: ModuleType, _version: int) -> Any:
            return m.CreateAclsRequest(
                creations=tuple(
                    build(
                        m.AclCreation,
                        resource_type=int(b.resource_type),
                        resource_name=b.resource_name,
                        resource_pattern_type=int(b.pattern_type),
                        principal=b.principal,
                        host=b.host,
                        operation=int(b.operation),
                        permission_type=int(b.permission),
                    )
                    for b in bindings
                )
            )

        response, _ = await self._call(CREATE_ACLS, make)
        return [
            None if r.error_code == ErrorCode.none else KafkaError(r.error_code, r.error_message)
            for r in response.results
        ]

    async def describe_acls(self, acl_filter: AclFilter) -> list[AclBinding]:
        """The ACLs `acl_filter` selects (KafkaError if the broker refuses)."""

        def make(m: ModuleType, _version: int) -> Any:
            return build(m.DescribeAclsRequest, **_filter_fields(acl_filter))

        response, _ = await self._call(DESCRIBE_ACLS, make)
        if response.error_code != ErrorCode.none:
            raise KafkaError(response.error_code, response.error_message)
        return [
            AclBinding(
                ResourceType(int(r.resource_type)),
                r.resource_name,
                PatternType(int(r.pattern_type)),
                a.principal,
                a.host,
                Operation(int(a.operation)),
                Permission(int(a.permission_type)),
            )
            for r in response.resources
            for a in r.acls
        ]

    async def delete_acls(self, filters: Sequence[AclFilter]) -> list[list[AclBinding]]:
        """Delete what each filter selects; answer i lists what filter i deleted."""

        def make(m: ModuleType, _version: int) -> Any:
            return m.DeleteAclsRequest(
                filters=tuple(build(m.DeleteAclsFilter, **_filter_fields(f)) for f in filters)
            )

        response, _ = await self._call(DELETE_ACLS, make)
        out = []
        for result in response.filter_results:
            if result.error_code != ErrorCode.none:
                raise KafkaError(result.error_code, result.error_message)
            out.append(
                [
                    AclBinding(
                        ResourceType(int(a.resource_type)),
                        a.resource_name,
                        PatternType(int(a.pattern_type)),
                        a.principal,
                        a.host,
                        Operation(int(a.operation)),
                        Permission(int(a.permission_type)),
                    )
                    for a in result.matching_acls
                ]
            )
        return out


def _by_topic(partitions: Iterable[TopicPartition]) -> dict[str, tuple[int, ...]]:
    out: dict[str, list[int]] = {}
    for topic, partition in sorted(set(partitions)):
        out.setdefault(topic, []).append(partition)
    return {topic: tuple(parts) for topic, parts in out.items()}


def _safe_assignment(data: bytes | None) -> dict[str, tuple[int, ...]]:
    """A member whose assignment does not decode shows as assigned nothing, rather than
    making the whole group undescribable."""
    try:
        return decode_assignment(data)
    except ValueError:
        return {}


def _filter_fields(f: AclFilter) -> dict[str, Any]:
    """An ACL filter as DescribeAcls/DeleteAcls fields."""
    return {
        "resource_type_filter": int(f.resource_type),
        "resource_name_filter": f.resource_name,
        "pattern_type_filter": int(f.pattern_type),
        "principal_filter": f.principal,
        "host_filter": f.host,
        "operation": int(f.operation),
        "permission_type": int(f.permission),
    }
