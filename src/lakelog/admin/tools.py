"""The requests behind Kafka's tools (`lakelog configs`, `delete-records`, `transactions`) on
top of `AdminClient`: DescribeConfigs with synonyms, IncrementalAlterConfigs, DeleteRecords,
ListTransactions, DescribeTransactions and DescribeProducers.

Each request is sent where Kafka's admin client sends it (a broker's configs to that broker,
records and producers to the partition's leader, a transaction to its coordinator), so the
commands work against Apache Kafka as well as Lakelog.
"""

from __future__ import annotations

import asyncio
import datetime
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from types import ModuleType
from typing import Any

from kio.static.constants import EntityType

from lakelog.admin.client import AdminClient
from lakelog.admin.results import Node, TopicPartition
from lakelog.admin.wire import (
    BROKER_RESOURCE,
    DESCRIBE_CONFIGS,
    FIND_COORDINATOR,
    TOPIC_RESOURCE,
    KafkaError,
    encode_request,
    payload_module,
)
from lakelog.log.protocol.kio_build import build
from lakelog.log.protocol.varint import read_uvarint, skip_tagged_fields
from lakelog.util.errors import ErrorCode

DELETE_RECORDS, INCREMENTAL_ALTER_CONFIGS = 21, 44
DESCRIBE_PRODUCERS, DESCRIBE_TRANSACTIONS, LIST_TRANSACTIONS = 61, 65, 66
GROUP_RESOURCE = 32
TRANSACTION_KEY_TYPE = 1
RESOURCE_TYPES = {"topics": TOPIC_RESOURCE, "brokers": BROKER_RESOURCE, "groups": GROUP_RESOURCE}
SET, DELETE = 0, 1
VERSIONS = {
    50: (0, 0),  # DescribeUserScramCredentials (scram_admin.py)
    51: (0, 0),  # AlterUserScramCredentials
    DESCRIBE_CONFIGS: (1, 4),
    INCREMENTAL_ALTER_CONFIGS: (0, 1),
    DELETE_RECORDS: (0, 2),
    DESCRIBE_PRODUCERS: (0, 0),
    DESCRIBE_TRANSACTIONS: (0, 0),
    LIST_TRANSACTIONS: (0, 1),
    FIND_COORDINATOR: (1, 3),
}
"""The versions built here (FindCoordinator below v4, where one key is asked at a time)."""
CONFIG_SOURCES = {
    0: "UNKNOWN",
    1: "DYNAMIC_TOPIC_CONFIG",
    2: "DYNAMIC_BROKER_CONFIG",
    3: "DYNAMIC_DEFAULT_BROKER_CONFIG",
    4: "STATIC_BROKER_CONFIG",
    5: "DEFAULT_CONFIG",
    6: "DYNAMIC_BROKER_LOGGER_CONFIG",
    7: "CLIENT_METRICS_CONFIG",
    8: "GROUP_CONFIG",
}
DYNAMIC_SOURCES = {"topics": 1, "brokers": 2, "groups": 8}
"""The source of the values `--describe` shows without `--all`, per entity type."""
TIMEOUT = datetime.timedelta(seconds=30)


@dataclass(frozen=True, slots=True)
class ConfigSynonym:
    name: str
    value: str | None
    source: str


@dataclass(frozen=True, slots=True)
class ConfigEntry:
    name: str
    value: str | None
    source: str
    sensitive: bool
    read_only: bool
    synonyms: tuple[ConfigSynonym, ...]


@dataclass(frozen=True, slots=True)
class ListedTransaction:
    transactional_id: str
    producer_id: int
    state: str
    coordinator: int


@dataclass(frozen=True, slots=True)
class TransactionDescription:
    coordinator: int
    transactional_id: str
    producer_id: int
    producer_epoch: int
    state: str
    timeout_ms: int
    start_time_ms: int
    """-1 when no transaction is running."""
    partitions: tuple[TopicPartition, ...]


@dataclass(frozen=True, slots=True)
class ProducerState:
    producer_id: int
    producer_epoch: int
    coordinator_epoch: int
    last_sequence: int
    last_timestamp: int
    current_txn_start_offset: int
    """-1 when the producer has no open transaction on the partition."""


def _ms(value: object) -> int:
    """kio gives datetimes and timedeltas for ms fields; -1 stays -1."""
    if isinstance(value, datetime.datetime):
        return int(value.timestamp() * 1000)
    if isinstance(value, datetime.timedelta):
        return int(value.total_seconds() * 1000)
    return int(value)  # type: ignore[call-overload]


async def call(
    client: AdminClient, api_key: int, make: Callable[[ModuleType, int], Any]
) -> tuple[Any, int]:
    """One request at the highest version both `client`'s broker and this module know."""
    version = pick_version(client, api_key)
    m = payload_module(api_key, version, EntityType.request)
    return await client._roundtrip(api_key, version, make(m, version)), version


def pick_version(client: AdminClient, api_key: int) -> int:
    return client.version_for(api_key, VERSIONS[api_key])


async def _node(client: AdminClient, broker_id: int) -> Node:
    for node in await client.brokers():
        if node.node_id == broker_id:
            return node
    raise KafkaError(ErrorCode.broker_not_available, f"no broker with id {broker_id}")


async def leaders(client: AdminClient, topics: Sequence[str]) -> dict[TopicPartition, Node]:
    """Each partition of `topics` with its leader; a topic that does not exist raises."""
    response = await client._metadata(sorted(set(topics)))
    nodes = {int(b.node_id): Node(int(b.node_id), b.host, int(b.port)) for b in response.brokers}
    out: dict[TopicPartition, Node] = {}
    for t in response.topics:
        if t.error_code != ErrorCode.none:
            raise KafkaError(t.error_code, f"topic {t.name}")
        for p in t.partitions:
            node = nodes.get(int(p.leader_id))
            if node is not None:
                out[(t.name, int(p.partition_index))] = node
    return out


# ---------------------------------------------------------------- configs


async def describe_configs(client: AdminClient, entity_type: str, name: str) -> list[ConfigEntry]:
    """Every config of one entity, with synonyms; a broker is asked directly."""
    resource_type = RESOURCE_TYPES[entity_type]
    target = client
    if resource_type == BROKER_RESOURCE and name:  # "": the cluster default, any broker
        target = await client.client_for(await _node(client, int(name)))

    result = await target.describe_config_result(resource_type, name, include_synonyms=True)
    return sorted(
        (
            ConfigEntry(
                name=c.name,
                value=c.value,
                source=CONFIG_SOURCES.get(int(c.config_source), str(c.config_source)),
                sensitive=bool(c.is_sensitive),
                read_only=bool(c.read_only),
                synonyms=tuple(
                    ConfigSynonym(s.name, s.value, CONFIG_SOURCES.get(int(s.source), str(s.source)))
                    for s in getattr(c, "synonyms", ())
                ),
            )
            for c in result.configs
        ),
        key=lambda e: e.name,
    )


async def alter_configs(
    client: AdminClient,
    entity_type: str,
    name: str,
    set_configs: Mapping[str, str],
    delete_configs: Sequence[str],
) -> None:
    """One IncrementalAlterConfigs: SET `set_configs`, DELETE `delete_configs`."""
    resource_type = RESOURCE_TYPES[entity_type]
    target = client
    if resource_type == BROKER_RESOURCE and name:  # "": the cluster default, any broker
        target = await client.client_for(await _node(client, int(name)))

    def make(m: ModuleType, _version: int) -> Any:
        ops = [
            m.AlterableConfig(name=k, config_operation=SET, value=v) for k, v in set_configs.items()
        ]
        ops += [
            m.AlterableConfig(name=k, config_operation=DELETE, value=None) for k in delete_configs
        ]
        resource = m.AlterConfigsResource(
            resource_type=resource_type, resource_name=name, configs=tuple(ops)
        )
        return m.IncrementalAlterConfigsRequest(resources=(resource,), validate_only=False)

    response, _ = await call(target, INCREMENTAL_ALTER_CONFIGS, make)
    [result] = response.responses
    if result.error_code != ErrorCode.none:
        raise KafkaError(result.error_code, result.error_message or f"{entity_type} {name}")


# ---------------------------------------------------------------- records


async def delete_records(
    client: AdminClient, offsets: Mapping[TopicPartition, int]
) -> dict[TopicPartition, tuple[int, ErrorCode]]:
    """DeleteRecords before each offset (-1: the high watermark), at each partition's leader:
    (low watermark, error) per partition, so one failure does not hide the others."""
    found = await leaders_or_unknown(client, [t for t, _ in offsets])
    out: dict[TopicPartition, tuple[int, ErrorCode]] = {}
    by_node: dict[Node, dict[TopicPartition, int]] = {}
    for tp, offset in offsets.items():
        node = found.get(tp)
        if node is None:
            out[tp] = (-1, ErrorCode.unknown_topic_or_partition)
        else:
            by_node.setdefault(node, {})[tp] = offset
    for node, asks in by_node.items():
        peer = await client.client_for(node)
        by_topic: dict[str, list[tuple[int, int]]] = {}
        for (topic, partition), offset in sorted(asks.items()):
            by_topic.setdefault(topic, []).append((partition, offset))

        def make(m: ModuleType, _version: int, by_topic: dict = by_topic) -> Any:  # type: ignore[type-arg]
            topics = tuple(
                m.DeleteRecordsTopic(
                    name=topic,
                    partitions=tuple(
                        m.DeleteRecordsPartition(partition_index=p, offset=o) for p, o in parts
                    ),
                )
                for topic, parts in by_topic.items()
            )
            return m.DeleteRecordsRequest(topics=topics, timeout=TIMEOUT)

        response, _ = await call(peer, DELETE_RECORDS, make)
        for t in response.topics:
            for p in t.partitions:
                out[(t.name, int(p.partition_index))] = (
                    int(p.low_watermark),
                    ErrorCode(p.error_code),
                )
    return out


async def leaders_or_unknown(
    client: AdminClient, topics: Sequence[str]
) -> dict[TopicPartition, Node]:
    """Like `leaders`, leaving out the topics that do not exist."""
    response = await client._metadata(sorted(set(topics)))
    nodes = {int(b.node_id): Node(int(b.node_id), b.host, int(b.port)) for b in response.brokers}
    return {
        (t.name, int(p.partition_index)): nodes[int(p.leader_id)]
        for t in response.topics
        if t.error_code == ErrorCode.none
        for p in t.partitions
        if int(p.leader_id) in nodes
    }


# ---------------------------------------------------------------- transactions


async def list_transactions(
    client: AdminClient, states: Sequence[str] = (), producer_ids: Sequence[int] = ()
) -> list[ListedTransaction]:
    """ListTransactions asked of every broker (each lists those it coordinates)."""

    def make(m: ModuleType, _version: int) -> Any:
        return build(
            m.ListTransactionsRequest,
            state_filters=tuple(states),
            producer_id_filters=tuple(producer_ids),
            duration_filter=-1,
        )

    out: dict[str, ListedTransaction] = {}
    for node in await client.brokers():
        response, _ = await call(await client.client_for(node), LIST_TRANSACTIONS, make)
        if response.error_code != ErrorCode.none:
            raise KafkaError(response.error_code, f"ListTransactions on broker {node.node_id}")
        for s in response.transaction_states:
            out.setdefault(
                s.transactional_id,
                ListedTransaction(
                    s.transactional_id, int(s.producer_id), s.transaction_state, node.node_id
                ),
            )
    return sorted(out.values(), key=lambda t: t.transactional_id)


async def find_transaction_coordinator(client: AdminClient, transactional_id: str) -> Node:
    def make(m: ModuleType, _version: int) -> Any:
        return build(m.FindCoordinatorRequest, key=transactional_id, key_type=TRANSACTION_KEY_TYPE)

    response, _ = await call(client, FIND_COORDINATOR, make)
    if response.error_code != ErrorCode.none:
        raise KafkaError(
            response.error_code,
            getattr(response, "error_message", None) or f"transactional id {transactional_id}",
        )
    return Node(int(response.node_id), response.host, int(response.port))


async def describe_transaction(
    client: AdminClient, transactional_id: str
) -> TransactionDescription:
    node = await find_transaction_coordinator(client, transactional_id)

    peer = await client.client_for(node)
    version = pick_version(peer, DESCRIBE_TRANSACTIONS)
    m = payload_module(DESCRIBE_TRANSACTIONS, version, EntityType.request)
    data = await raw_roundtrip(
        peer,
        DESCRIBE_TRANSACTIONS,
        version,
        m.DescribeTransactionsRequest(transactional_ids=(transactional_id,)),
    )
    states = decode_describe_transactions(data)
    if len(states) != 1:
        raise ConnectionError("DescribeTransactions answered for another number of ids")
    d = states[0]
    if d.error != ErrorCode.none:
        raise KafkaError(d.error, f"transactional id {transactional_id}")
    return TransactionDescription(
        coordinator=node.node_id,
        transactional_id=d.transactional_id,
        producer_id=d.producer_id,
        producer_epoch=d.producer_epoch,
        state=d.state,
        timeout_ms=d.timeout_ms,
        start_time_ms=d.start_time_ms,
        partitions=d.partitions,
    )


@dataclass(frozen=True, slots=True)
class _DescribedState:
    error: ErrorCode
    transactional_id: str
    state: str
    timeout_ms: int
    start_time_ms: int
    producer_id: int
    producer_epoch: int
    partitions: tuple[TopicPartition, ...]


async def raw_roundtrip(client: AdminClient, api_key: int, version: int, request: Any) -> bytes:
    """One request; the response body's bytes (after the header), for responses kio cannot
    read: DescribeTransactions carries -1 as the start time of no transaction, which kio
    refuses as a negative timestamp."""
    client._correlation_id += 1
    correlation_id = client._correlation_id
    client._writer.write(
        encode_request(api_key, version, correlation_id, client._client_id, request)
    )
    await client._writer.drain()
    timeout = client._timeout
    size = int.from_bytes(await asyncio.wait_for(client._reader.readexactly(4), timeout), "big")
    data = await asyncio.wait_for(client._reader.readexactly(size), timeout)
    if int.from_bytes(data[:4], "big", signed=True) != correlation_id:
        raise ConnectionError("response correlation id does not match the request")
    return data[skip_tagged_fields(data, 4) :]


class _Body:
    """A reader of a flexible-version body."""

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.pos = 0

    def fixed(self, size: int) -> int:
        if self.pos + size > len(self.data):
            raise ConnectionError("malformed response: truncated")
        value = int.from_bytes(self.data[self.pos : self.pos + size], "big", signed=True)
        self.pos += size
        return value

    def uvarint(self) -> int:
        value, self.pos = read_uvarint(self.data, self.pos)
        return value

    def string(self) -> str:
        size = self.uvarint() - 1
        if size < 0:
            return ""
        if self.pos + size > len(self.data):
            raise ConnectionError("malformed response: truncated string")
        text = self.data[self.pos : self.pos + size].decode("utf-8", "replace")
        self.pos += size
        return text

    def count(self) -> int:
        return max(self.uvarint() - 1, 0)

    def tags(self) -> None:
        self.pos = skip_tagged_fields(self.data, self.pos)


def decode_describe_transactions(data: bytes) -> list[_DescribedState]:
    body = _Body(data)
    body.fixed(4)  # throttle time
    out = []
    for _ in range(body.count()):
        error = ErrorCode(body.fixed(2))
        transactional_id = body.string()
        state = body.string()
        timeout_ms = body.fixed(4)
        start_time_ms = body.fixed(8)
        producer_id = body.fixed(8)
        producer_epoch = body.fixed(2)
        partitions: list[TopicPartition] = []
        for _ in range(body.count()):
            topic = body.string()
            partitions += [(topic, body.fixed(4)) for _ in range(body.count())]
            body.tags()
        body.tags()
        out.append(
            _DescribedState(
                error,
                transactional_id,
                state,
                timeout_ms,
                start_time_ms,
                producer_id,
                producer_epoch,
                tuple(sorted(partitions)),
            )
        )
    return out


async def describe_producers(
    client: AdminClient, partitions: Sequence[TopicPartition], broker_id: int | None = None
) -> dict[TopicPartition, list[ProducerState]]:
    """The active producers of each partition, asked of its leader (or of `broker_id`)."""
    if broker_id is not None:
        node = await _node(client, broker_id)
        by_node: dict[Node, list[TopicPartition]] = {node: list(partitions)}
    else:
        found = await leaders(client, [t for t, _ in partitions])
        by_node = {}
        for tp in partitions:
            if tp not in found:
                raise KafkaError(ErrorCode.unknown_topic_or_partition, f"{tp[0]}-{tp[1]}")
            by_node.setdefault(found[tp], []).append(tp)
    out: dict[TopicPartition, list[ProducerState]] = {}
    for node, tps in by_node.items():
        by_topic: dict[str, list[int]] = {}
        for topic, partition in sorted(tps):
            by_topic.setdefault(topic, []).append(partition)

        def make(m: ModuleType, _version: int, by_topic: dict = by_topic) -> Any:  # type: ignore[type-arg]
            return m.DescribeProducersRequest(
                topics=tuple(
                    m.TopicRequest(name=t, partition_indexes=tuple(ps))
                    for t, ps in by_topic.items()
                )
            )

        response, _ = await call(await client.client_for(node), DESCRIBE_PRODUCERS, make)
        for t in response.topics:
            for p in t.partitions:
                if p.error_code != ErrorCode.none:
                    raise KafkaError(
                        p.error_code, p.error_message or f"{t.name}-{p.partition_index}"
                    )
                out[(t.name, int(p.partition_index))] = [
                    ProducerState(
                        int(s.producer_id),
                        int(s.producer_epoch),
                        int(s.coordinator_epoch),
                        int(s.last_sequence),
                        _ms(s.last_timestamp),
                        int(s.current_txn_start_offset),
                    )
                    for s in p.active_producers
                ]
    return out
