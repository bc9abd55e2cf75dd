"""What the admin client's operations answer: topics, configs, brokers, groups and offsets
as frozen dataclasses, and the consumer-protocol assignment decoder `describe_group` uses."""

from __future__ import annotations

from dataclasses import dataclass, field
from uuid import UUID

from kio.index import load_entity_schema
from kio.serial import entity_reader
from kio.serial.errors import DecodeError
from kio.static.constants import EntityType

from lakelog.util.errors import ErrorCode

ASSIGNMENT_MAX_VERSION = 3
TopicPartition = tuple[str, int]


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
