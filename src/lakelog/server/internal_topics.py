"""Kafka's internal topics that Lakelog serves from coordinator tables rather than from
client-written batches: today `__consumer_offsets` (`coordinator/offsets_topic_records`).

It is listed and readable like any topic (Metadata says `is_internal`), never writable by
clients, and not in the topics table: the handlers that meet a topic name ask here."""

from __future__ import annotations

from uuid import UUID

from lakelog.coordinator.offsets_topic_records import OFFSETS_TOPIC, OFFSETS_TOPIC_PARTITIONS
from lakelog.coordinator.topic_types import TopicInfo

OFFSETS_TOPIC_ID = UUID("1a4e2b9c-0c5f-4d51-9a0e-6b1f5f2a7c31")
"""Fixed, so clients that name topics by id (Fetch v13+, Metadata v10+) keep finding it
across brokers and restarts."""
OFFSETS_TOPIC_REPLICATION = 3
"""Kafka's default `offsets.topic.replication.factor`; like every Lakelog topic, its data
is as durable as the coordinator's database."""

OFFSETS_TOPIC_INFO = TopicInfo(
    OFFSETS_TOPIC_ID,
    OFFSETS_TOPIC,
    OFFSETS_TOPIC_PARTITIONS,
    OFFSETS_TOPIC_REPLICATION,
    {"cleanup.policy": "compact", "compression.type": "producer"},
)

INTERNAL_TOPICS = {OFFSETS_TOPIC: OFFSETS_TOPIC_INFO}
_BY_ID = {t.topic_id: t for t in INTERNAL_TOPICS.values()}


def internal_topic(name: str | None) -> TopicInfo | None:
    return INTERNAL_TOPICS.get(name) if name is not None else None


def internal_topic_by_id(topic_id: UUID | None) -> TopicInfo | None:
    return _BY_ID.get(topic_id) if topic_id is not None else None


def is_internal(name: str | None) -> bool:
    return name in INTERNAL_TOPICS


def is_internal_id(topic_id: UUID) -> bool:
    return topic_id in _BY_ID
