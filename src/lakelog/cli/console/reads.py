"""What the console's pages read from the cluster: Kafka admin requests only, so each page
shows what the console's principal may see, on Lakelog or on Apache Kafka."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from kio.index import load_payload_module
from kio.static.constants import EntityType

from lakelog.admin.client import AdminClient
from lakelog.admin.group_offsets import OffsetRow, offset_rows
from lakelog.admin.results import (
    ConfigValue,
    GroupDescription,
    ListedGroup,
    Node,
    TopicDescription,
    TopicPartition,
)
from lakelog.admin.share_client import (
    ShareGroupDescription,
    ShareOffset,
    describe_share_group,
    share_offsets,
)
from lakelog.admin.tools import ListedTransaction, TransactionDescription
from lakelog.admin.tools import describe_transaction as _describe_transaction
from lakelog.admin.tools import list_transactions as _list_transactions
from lakelog.admin.wire import EARLIEST, LATEST, KafkaError
from lakelog.cli.cost import METRICS_LISTEN
from lakelog.log.protocol.kio_build import build
from lakelog.mirror.client import MirrorClient
from lakelog.util.errors import ErrorCode

DESCRIBE_LOG_DIRS = 35
LOG_DIRS_VERSIONS = (1, 4)
MAX_GROUPS_LISTED = 100
"""Groups whose lag the groups page computes; more are listed without lag."""


class NotFound(Exception):
    """The topic, group, mirror or transaction a page names does not exist (404)."""


@dataclass(frozen=True, slots=True)
class BrokerRow:
    node: Node
    epoch: str
    controller: bool
    metrics_listen: str | None
    healthy: bool
    problem: str = ""


@dataclass(frozen=True, slots=True)
class PartitionRow:
    partition: int
    leader: int
    log_start: int | None
    log_end: int | None
    size_bytes: int | None

    @property
    def records(self) -> int | None:
        if self.log_start is None or self.log_end is None:
            return None
        return self.log_end - self.log_start


@dataclass(frozen=True, slots=True)
class TopicRow:
    name: str
    partitions: int
    records: int | None
    size_bytes: int | None
    internal: bool


@dataclass(frozen=True, slots=True)
class TopicDetail:
    description: TopicDescription
    partitions: list[PartitionRow]
    configs: list[ConfigValue]


@dataclass(frozen=True, slots=True)
class GroupRow:
    group_id: str
    protocol_type: str
    state: str
    lag: int | None


@dataclass(frozen=True, slots=True)
class GroupDetail:
    group: GroupDescription
    rows: list[OffsetRow]

    @property
    def total_lag(self) -> int:
        return sum(r.lag or 0 for r in self.rows)


async def cluster(client: AdminClient) -> list[BrokerRow]:
    """Every broker with its zone, epoch, /metrics address and whether it answered."""
    controller = await client.controller_id()
    rows = []
    for node in await client.brokers():
        try:
            configs = {c.name: c.value for c in await client.describe_broker_configs(node)}
        except (KafkaError, OSError, TimeoutError) as exc:
            rows.append(BrokerRow(node, "?", node.node_id == controller, None, False, str(exc)))
            continue
        rows.append(
            BrokerRow(
                node,
                configs.get("broker.epoch") or "-",
                node.node_id == controller,
                configs.get(METRICS_LISTEN),
                True,
            )
        )
    return rows


async def log_sizes(
    client: AdminClient, topics: Mapping[str, Sequence[int]] | None
) -> dict[TopicPartition, int]:
    """Bytes per partition (of every topic with None) from DescribeLogDirs (Lakelog: the
    coordinator's byte sizes); empty when the broker does not serve it or refuses it."""
    try:
        version = client.version_for(DESCRIBE_LOG_DIRS, LOG_DIRS_VERSIONS)
    except KafkaError:
        return {}

    m = load_payload_module(DESCRIBE_LOG_DIRS, version, EntityType.request)
    wanted = None
    if topics is not None:
        wanted = tuple(
            build(m.DescribableLogDirTopic, topic=t, partitions=tuple(ps))
            for t, ps in topics.items()
        )
    request = build(m.DescribeLogDirsRequest, topics=wanted)
    try:
        response = await client._roundtrip(DESCRIBE_LOG_DIRS, version, request)
    except KafkaError:
        return {}
    sizes: dict[TopicPartition, int] = {}
    for result in response.results:
        if result.error_code != ErrorCode.none:
            continue
        for topic in result.topics:
            for p in topic.partitions:
                tp = (topic.name, int(p.partition_index))
                sizes[tp] = max(sizes.get(tp, 0), int(p.partition_size))
    return sizes


async def offsets(
    client: AdminClient, partitions: Sequence[TopicPartition]
) -> tuple[dict[TopicPartition, int], dict[TopicPartition, int]]:
    """(log start, log end) offsets of `partitions`; partitions that answer an error are
    left out."""
    if not partitions:
        return {}, {}
    starts = await client.list_offsets({tp: EARLIEST for tp in partitions})
    ends = await client.list_offsets({tp: LATEST for tp in partitions})
    ok = ErrorCode.none
    return (
        {tp: r.offset for tp, r in starts.items() if r.error == ok},
        {tp: r.offset for tp, r in ends.items() if r.error == ok},
    )


async def topics(client: AdminClient) -> list[TopicRow]:
    described = await client.describe_topics(None)
    parts = [(t.name, p.partition) for t in described for p in t.partitions]
    starts, ends = await offsets(client, parts)
    sizes = await log_sizes(client, None)
    rows = []
    for t in described:
        tps = [(t.name, p.partition) for p in t.partitions]
        records = None
        if all(tp in starts and tp in ends for tp in tps):
            records = sum(ends[tp] - starts[tp] for tp in tps)
        size = sum(sizes[tp] for tp in tps) if all(tp in sizes for tp in tps) else None
        rows.append(TopicRow(t.name, len(t.partitions), records, size, t.is_internal))
    return rows


def legal_topic_name(name: str) -> bool:
    """Kafka's rule: 1 to 249 of [a-zA-Z0-9._-], and not "." or ".."."""
    return (
        0 < len(name) <= 249
        and name not in (".", "..")
        and all(c.isascii() and (c.isalnum() or c in "._-") for c in name)
    )


async def topic(client: AdminClient, name: str) -> TopicDetail:
    if not legal_topic_name(name):
        raise NotFound(f"no topic named {name!r} (not a legal topic name)")
    try:
        (description,) = await client.describe_topics([name])
    except KafkaError as exc:
        if exc.error in (ErrorCode.unknown_topic_or_partition, ErrorCode.invalid_topic_exception):
            raise NotFound(f"no topic named {name!r}") from exc
        raise
    tps = [(name, p.partition) for p in description.partitions]
    starts, ends = await offsets(client, tps)
    sizes = await log_sizes(client, {name: [p.partition for p in description.partitions]})
    rows = [
        PartitionRow(
            p.partition,
            p.leader,
            starts.get((name, p.partition)),
            ends.get((name, p.partition)),
            sizes.get((name, p.partition)),
        )
        for p in description.partitions
    ]
    try:
        configs = await client.describe_topic_configs(name)
    except KafkaError:
        configs = []
    return TopicDetail(description, rows, sorted(configs, key=lambda c: c.name))


async def groups(client: AdminClient) -> list[GroupRow]:
    """Every group the principal may see, of every protocol type, with its total lag."""
    listed: list[ListedGroup] = sorted(await client.list_groups(), key=lambda g: g.group_id)
    rows = []
    for index, g in enumerate(listed):
        lag = None
        if index < MAX_GROUPS_LISTED:
            try:
                lag = await total_lag(client, g.group_id)
            except (KafkaError, OSError, TimeoutError):
                lag = None
        rows.append(GroupRow(g.group_id, g.protocol_type, g.state, lag))
    return rows


async def log_ends(
    client: AdminClient, partitions: Sequence[TopicPartition]
) -> dict[TopicPartition, int]:
    """Log end offsets of `partitions`; partitions that answer an error are left out."""
    if not partitions:
        return {}
    ends = await client.list_offsets({tp: LATEST for tp in partitions})
    return {tp: r.offset for tp, r in ends.items() if r.error == ErrorCode.none}


async def group_lags(client: AdminClient, group_id: str) -> dict[TopicPartition, int]:
    """Lag per partition with a committed offset: log end minus committed offset."""
    committed = await client.committed_offsets(group_id)
    ends = await log_ends(client, sorted(committed))
    return {tp: max(0, ends[tp] - off) for tp, off in committed.items() if tp in ends}


async def total_lag(client: AdminClient, group_id: str) -> int:
    return sum((await group_lags(client, group_id)).values())


async def group(client: AdminClient, group_id: str) -> GroupDetail:
    if not group_id:
        raise NotFound("no group named ''")
    try:
        described = await client.describe_group(group_id)
    except KafkaError as exc:
        if exc.error in (ErrorCode.group_id_not_found, ErrorCode.invalid_group_id):
            raise NotFound(f"no group named {group_id!r}") from exc
        raise
    if described.state.lower() == "dead":
        raise NotFound(f"no group named {group_id!r}")
    committed = await client.committed_offsets(group_id)
    partitions = set(committed) | {tp for m in described.members for tp in m.partitions()}
    ends = await log_ends(client, sorted(partitions))
    known: dict[TopicPartition, int | None] = {tp: ends.get(tp) for tp in partitions}
    return GroupDetail(described, offset_rows(described, committed, known))


@dataclass(frozen=True, slots=True)
class ShareGroupDetail:
    group: ShareGroupDescription
    offsets: list[ShareOffset]

    @property
    def total_lag(self) -> int:
        return sum(o.lag for o in self.offsets if o.lag > 0)


async def share_group(client: AdminClient, group_id: str) -> ShareGroupDetail | None:
    """The share group of that id, or None when it is not one (ShareGroupDescribe)."""
    if not group_id:
        return None
    try:
        described = await describe_share_group(client, group_id)
    except KafkaError as exc:
        if exc.error in (
            ErrorCode.group_id_not_found,
            ErrorCode.invalid_group_id,
            ErrorCode.unsupported_version,
        ):
            return None
        raise
    offsets = await share_offsets(client, group_id)
    return ShareGroupDetail(described, sorted(offsets, key=lambda o: (o.topic, o.partition)))


async def transactions(client: AdminClient) -> list[ListedTransaction]:
    return await _list_transactions(client)


async def transaction(client: AdminClient, transactional_id: str) -> TransactionDescription:
    if not transactional_id:
        raise NotFound("no transaction ''")
    try:
        return await _describe_transaction(client, transactional_id)
    except KafkaError as exc:
        if exc.error in (ErrorCode.transactional_id_not_found, ErrorCode.coordinator_not_available):
            raise NotFound(f"no transaction {transactional_id!r}") from exc
        raise


async def mirrors(client: AdminClient) -> dict[str, dict[str, Any]]:
    """Mirrors of a Lakelog cluster; empty on a cluster that has no mirror resource."""
    if not isinstance(client, MirrorClient):
        return {}
    return await client.list_mirrors()


async def mirror(client: AdminClient, name: str) -> tuple[dict[str, str], list[dict[str, Any]]]:
    if not isinstance(client, MirrorClient):
        raise NotFound(f"no mirror named {name!r}")
    if name not in await client.list_mirrors():
        raise NotFound(f"no mirror named {name!r}")
    return await client.describe(name)
