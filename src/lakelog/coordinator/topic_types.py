"""Topics and brokers as the batch coordinator stores them: the records its topic and
broker-registry methods take and return (see `coordinator.interface`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from uuid import UUID

from lakelog.util.errors import ErrorCode


@dataclass(frozen=True, slots=True)
class TopicInfo:
    topic_id: UUID
    name: str
    num_partitions: int
    replication_factor: int
    configs: Mapping[str, str]
    """Only the configs set on the topic (not broker defaults)."""


@dataclass(frozen=True, slots=True)
class CreateTopicRequest:
    name: str
    num_partitions: int
    replication_factor: int
    configs: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class CreateTopicResult:
    name: str
    error: ErrorCode
    topic_id: UUID | None = None
    message: str | None = None


@dataclass(frozen=True, slots=True)
class DeleteTopicResult:
    name: str
    error: ErrorCode
    topic_id: UUID | None = None


@dataclass(frozen=True, slots=True)
class CreatePartitionsRequest:
    name: str
    new_total: int


@dataclass(frozen=True, slots=True)
class TopicResult:
    """The outcome of a per-topic admin change."""

    name: str
    error: ErrorCode
    message: str | None = None


@dataclass(frozen=True, slots=True)
class AlterTopicConfigsRequest:
    name: str
    set_configs: Mapping[str, str] = field(default_factory=dict)
    delete_configs: Sequence[str] = ()
    replace: bool = False
    """True: the topic's configs become exactly `set_configs` (legacy AlterConfigs)."""


@dataclass(frozen=True, slots=True)
class BrokerInfo:
    broker_id: int
    broker_epoch: int
    rack: str | None
    host: str
    port: int
    last_heartbeat: int
