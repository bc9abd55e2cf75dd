"""A KIP-848 member seen through the classic consumer protocol's encodings, so that
DescribeGroups (and tools that only speak it) show consumer groups' members with their
subscriptions and partitions."""

from __future__ import annotations

import io
from collections.abc import Iterable, Mapping
from uuid import UUID

from kio.schema.consumer_protocol_assignment.v0 import data as assignment_v0
from kio.schema.consumer_protocol_subscription.v0 import data as subscription_v0
from kio.serial import entity_writer

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
