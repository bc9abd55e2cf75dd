"""Read the topics a consumer subscribes to from its JoinGroup metadata (the consumer
protocol's subscription), for OffsetDelete's GROUP_SUBSCRIBED_TO_TOPIC check."""

from __future__ import annotations

from functools import cache
from typing import Any

from kio.serial import entity_reader

MAX_KNOWN_VERSION = 3


@cache
def _reader(version: int) -> Any:
    module = __import__(
        f"kio.schema.consumer_protocol_subscription.v{version}.data",
        fromlist=["ConsumerProtocolSubscription"],
    )
    return entity_reader(module.ConsumerProtocolSubscription)


def subscribed_topics(metadata: bytes) -> set[str]:
    """Topic names in a consumer subscription; empty for anything unreadable."""
    if len(metadata) < 2:
        return set()
    version = min(int.from_bytes(metadata[:2], "big", signed=True), MAX_KNOWN_VERSION)
    if version < 0:
        return set()
    try:
        subscription, _ = _reader(version)(memoryview(metadata).toreadonly(), 2)
    except Exception:
        return set()
    return set(subscription.topics)
