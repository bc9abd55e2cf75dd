"""Brokers and their epochs, producer ids, the change token."""

from __future__ import annotations

import asyncio
import time

from contract_support import OpenInstance, batch, commit, new_topic

from lakelog.coordinator import BatchCoordinator
from lakelog.util.errors import ErrorCode


async def test_register_and_heartbeat(coordinator: BatchCoordinator) -> None:
    before = time.time_ns() // 1_000_000
    e1 = await coordinator.register_broker(1, "az-a", "10.0.0.1", 9092)
    e2 = await coordinator.register_broker(2, None, "10.0.0.2", 9093)
    e1_again = await coordinator.register_broker(1, "az-b", "10.0.0.9", 9094)
    assert e1 < e2 < e1_again

    brokers = await coordinator.list_brokers(before)
    assert [(b.broker_id, b.broker_epoch, b.rack, b.host, b.port) for b in brokers] == [
        (1, e1_again, "az-b", "10.0.0.9", 9094),
        (2, e2, None, "10.0.0.2", 9093),
    ]
    assert all(b.last_heartbeat >= before for b in brokers)

    assert await coordinator.heartbeat_broker(1, e1_again) == ErrorCode.none
    assert await coordinator.heartbeat_broker(1, e1) == ErrorCode.stale_broker_epoch
    assert await coordinator.heartbeat_broker(3, 1) == ErrorCode.broker_id_not_registered


async def test_list_brokers_filters_on_last_heartbeat(coordinator: BatchCoordinator) -> None:
    e1 = await coordinator.register_broker(1, None, "h", 1)
    await coordinator.register_broker(2, None, "h", 2)
    time.sleep(0.005)
    cutoff = time.time_ns() // 1_000_000
    time.sleep(0.005)
    assert await coordinator.list_brokers(cutoff) == []
    await coordinator.heartbeat_broker(1, e1)
    [alive] = await coordinator.list_brokers(cutoff)
    assert alive.broker_id == 1
    assert alive.last_heartbeat >= cutoff


async def test_epochs_grow_across_instances(open_instance: OpenInstance) -> None:
    a, b = await open_instance(), await open_instance()
    epochs = [await (a if i % 2 else b).register_broker(5, None, "h", 1) for i in range(6)]
    assert epochs == sorted(set(epochs))
    assert await a.heartbeat_broker(5, epochs[-1]) == ErrorCode.none
    assert await b.heartbeat_broker(5, epochs[-2]) == ErrorCode.stale_broker_epoch


async def test_producer_ids_are_never_reused(open_instance: OpenInstance) -> None:
    a, b = await open_instance(), await open_instance()
    ids = await asyncio.gather(*(x.allocate_producer_id() for x in [a, b] * 20))
    assert len(set(ids)) == 40
    assert min(ids) >= 0


async def test_change_token(open_instance: OpenInstance) -> None:
    a, b = await open_instance(), await open_instance()
    t = await new_topic(a)
    token_a, token_b = await a.change_token(), await b.change_token()
    assert await a.change_token() == token_a  # reads change nothing
    await a.get_topics()
    assert await a.change_token() == token_a

    await commit(a, [batch(t)])
    assert await a.change_token() != token_a  # its own commit
    assert await b.change_token() != token_b  # another instance's commit
    token_a, token_b = await a.change_token(), await b.change_token()
    await commit(b, [batch(t)])
    assert await a.change_token() != token_a
    assert await b.change_token() != token_b


async def test_fencing_a_silent_broker_rejects_its_commits_and_heartbeats(
    coordinator: BatchCoordinator,
) -> None:
    from lakelog.coordinator.log_types import CommitBatch, TimestampType

    topic_id = await new_topic(coordinator, 1)
    epoch = await coordinator.register_broker(7, "z1", "127.0.0.1", 9999)
    now = int(time.time() * 1000)
    # Heard from recently: not fenced.
    assert not await coordinator.fence_broker(7, epoch, now - 60_000)
    assert await coordinator.fence_broker(7, epoch, now + 1_000)
    assert not await coordinator.fence_broker(7, epoch, now + 1_000)  # already fenced
    assert 7 not in [b.broker_id for b in await coordinator.list_brokers(0)]
    assert await coordinator.heartbeat_broker(7, epoch) == ErrorCode.stale_broker_epoch
    batch = CommitBatch(topic_id, 0, 0, 10, 1, 0, 0, TimestampType.CREATE_TIME)
    [result] = await coordinator.commit_file("wal/zombie", 7, epoch, 10, [batch])
    assert result.error == ErrorCode.stale_broker_epoch
    fresh = await coordinator.register_broker(7, "z1", "127.0.0.1", 9999)
    assert fresh > epoch
    assert await coordinator.heartbeat_broker(7, fresh) == ErrorCode.none
    [ok] = await coordinator.commit_file("wal/after", 7, fresh, 10, [batch])
    assert ok.error == ErrorCode.none and ok.base_offset == 0


async def test_a_fenced_broker_carries_its_fence_time_and_a_leaver_minus_one(
    coordinator: BatchCoordinator,
) -> None:
    """Brokers name a broker fenced for silence a little longer (its clients' in-flight
    requests must not be resent elsewhere); one that left is dropped at once."""
    silent = await coordinator.register_broker(8, "z1", "127.0.0.1", 9998)
    leaving = await coordinator.register_broker(9, "z1", "127.0.0.1", 9997)
    before = int(time.time() * 1000)
    assert await coordinator.fence_broker(8, silent, before + 1_000)
    assert await coordinator.fence_broker(9, leaving, before + 1_000, left=True)
    after = int(time.time() * 1000)
    assert {8, 9}.isdisjoint(b.broker_id for b in await coordinator.list_brokers(0))
    rows = {b.broker_id: b for b in await coordinator.list_brokers(-(1 << 62))}
    assert before <= -rows[8].last_heartbeat <= after
    assert rows[9].last_heartbeat == -1
