"""The broker's compaction leases: one broker at a time per partition, a dead holder's
lease expires, and the cleaned offset and tombstone due time travel with the lease."""

from __future__ import annotations

import asyncio
import uuid

from contract_support import OpenInstance, new_topic

from lakelog.coordinator import BatchCoordinator
from lakelog.coordinator.pipeline_types import CompactionLease

NOW = 1_700_000_000_000
TTL = 10_000


async def test_one_holder_at_a_time(coordinator: BatchCoordinator) -> None:
    topic = await new_topic(coordinator, partitions=2)
    assert await coordinator.claim_compaction(topic, 0, 1, NOW, TTL) == CompactionLease(0, 0)
    assert await coordinator.claim_compaction(topic, 0, 2, NOW + 1, TTL) is None
    # the holder renews; the other partition is free for another broker
    assert await coordinator.claim_compaction(topic, 0, 1, NOW + 2, TTL) == CompactionLease(0, 0)
    assert await coordinator.claim_compaction(topic, 1, 2, NOW + 2, TTL) == CompactionLease(0, 0)
    # renewing moved the expiry: still held just past the first expiry
    assert await coordinator.claim_compaction(topic, 0, 2, NOW + TTL + 1, TTL) is None


async def test_release_records_state_and_frees(coordinator: BatchCoordinator) -> None:
    topic = await new_topic(coordinator)
    await coordinator.claim_compaction(topic, 0, 1, NOW, TTL)
    assert await coordinator.release_compaction(topic, 0, 1, CompactionLease(40, NOW + 500))
    # released: another broker takes it at once and sees the state
    assert await coordinator.claim_compaction(topic, 0, 2, NOW + 1, TTL) == CompactionLease(
        40, NOW + 500
    )
    # the cleaned offset is never lowered; the due time is replaced
    assert await coordinator.release_compaction(topic, 0, 2, CompactionLease(10, 0))
    assert await coordinator.claim_compaction(topic, 0, 1, NOW + 2, TTL) == CompactionLease(40, 0)


async def test_a_dead_holders_lease_expires(coordinator: BatchCoordinator) -> None:
    topic = await new_topic(coordinator)
    await coordinator.claim_compaction(topic, 0, 1, NOW, TTL)
    assert await coordinator.claim_compaction(topic, 0, 2, NOW + TTL - 1, TTL) is None
    assert await coordinator.claim_compaction(topic, 0, 2, NOW + TTL + 1, TTL) is not None
    # the old holder lost it: its release records nothing
    assert not await coordinator.release_compaction(topic, 0, 1, CompactionLease(99, 0))
    assert await coordinator.release_compaction(topic, 0, 2, CompactionLease(5, 0))
    assert await coordinator.claim_compaction(topic, 0, 1, NOW + TTL + 2, TTL) == CompactionLease(
        5, 0
    )


async def test_unknown_and_deleted_topics(coordinator: BatchCoordinator) -> None:
    assert await coordinator.claim_compaction(uuid.uuid4(), 0, 1, NOW, TTL) is None
    name = f"gone-{uuid.uuid4().hex[:8]}"
    topic = await new_topic(coordinator, name=name)
    await coordinator.claim_compaction(topic, 0, 1, NOW, TTL)
    await coordinator.delete_topics([name])
    assert await coordinator.claim_compaction(topic, 0, 1, NOW + 1, TTL) is None
    assert not await coordinator.release_compaction(topic, 0, 1, CompactionLease(1, 0))


async def test_racing_claims_from_two_instances(
    coordinator: BatchCoordinator, open_instance: OpenInstance
) -> None:
    """Two coordinator instances on one database (two brokers) claim the same partitions
    at once: each partition goes to exactly one."""
    other = await open_instance()
    topic = await new_topic(coordinator, partitions=8)
    first = [coordinator.claim_compaction(topic, p, 1, NOW, TTL) for p in range(8)]
    second = [other.claim_compaction(topic, p, 2, NOW, TTL) for p in range(8)]
    results = await asyncio.gather(*first, *second)
    for p in range(8):
        held = [r is not None for r in (results[p], results[8 + p])]
        assert held.count(True) == 1, (p, results[p], results[8 + p])
