"""A KIP-848 member seen through the classic consumer protocol's encodings, so that
DescribeGroups (and tools that only speak it) show consumer groups' members with their
subscriptions and partitions."""

from __future__ import annotations

import importlib
import io
from collections.abc import Iterable, Mapping
from typing import Any
from uuid import UUID

from kio.schema.consumer_protocol_assignment.v0 import data as assignment_v0
from kio.schema.consumer_protocol_subscription.v0 import data as subscription_v0
from kio.serial import entity_reader, entity_writer

VERSION = b"\x00\x00"


def subscription(topics: Iterable[str]) -> bytes:
    """ConsumerProtocolSubscription v0 (version prefix included)."""
    out = io.BytesIO()
    out.write(VERSION)
    entity_writer(subscription_v0.ConsumerProtocolSubscription)(
        out, subscription_v0.ConsumerProtocolSubscription(topics=tuple(sorted(topics)))
    )
    return out.getvalue()


def assignment(partitions: Iterable[tuple[UUID, int]], names: Mapping[UUID, str]) -> bytes:
    """ConsumerProtocolAssignment v0 (version prefix included), topics by name."""
    by_topic: dict[str, list[int]] = {}
    for topic_id, partition in sorted(partitions):
        by_topic.setdefault(names.get(topic_id, str(topic_id)), []).append(partition)
    value = assignment_v0.ConsumerProtocolAssignment(
        assigned_partitions=tuple(
            assignment_v0.TopicPartition(topic=t, partitions=tuple(ps))
            for t, ps in sorted(by_topic.items())
        )
    )
    out = io.BytesIO()
    out.write(VERSION)
    entity_writer(assignment_v0.ConsumerProtocolAssignment)(out, value)
    return out.getvalue()


MAX_KNOWN_VERSION = 3


def _read(kind: str, cls: str, data: bytes) -> Any | None:
    """The decoded consumer-protocol struct in `data`, or None if unreadable."""
    if len(data) < 2:
        return None
    version = min(int.from_bytes(data[:2], "big", signed=True), MAX_KNOWN_VERSION)
    if version < 0:
        return None
    module = importlib.import_module(f"kio.schema.consumer_protocol_{kind}.v{version}.data")
    try:
        value, _ = entity_reader(getattr(module, cls))(memoryview(data).toreadonly(), 2)
    except Exception:
        return None
    return value


def owned_partitions(metadata: bytes) -> list[tuple[str, int]]:
    """The partitions a classic member says it owns (subscription v1+; none before)."""
    value = _read("subscription", "ConsumerProtocolSubscription", metadata)
    owned = getattr(value, "owned_partitions", ()) if value is not None else ()
    return [(tp.topic, p) for tp in owned for p in tp.partitions]


def assigned_partitions(data: bytes) -> list[tuple[str, int]]:
    """The partitions in a classic SyncGroup assignment."""
    value = _read("assignment", "ConsumerProtocolAssignment", data)
    if value is None:
        return []
    return [(tp.topic, p) for tp in value.assigned_partitions for p in tp.partitions]
