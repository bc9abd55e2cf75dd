"""The live-broker view around fencing: a broker another broker fenced first must leave the
view at once, or Metadata names a dead broker as a leader again and a client that sends
there waits for it until its timeout (seen in the kill-one-of-three chaos test)."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

from lakelog.config import Settings
from lakelog.server.broker import Broker

SESSION_MS = 300


async def _broker(tmp_path: Path) -> tuple[Broker, int]:
    """Broker 1 of a cluster with broker 2, which then falls silent past its session; and
    the wall time (ms) broker 2 last heartbeated by."""
    broker = Broker(
        Settings(
            data_dir=tmp_path,
            broker_id=1,
            broker_session_timeout_ms=SESSION_MS,
            broker_zone_failover_ms=0,
        )
    )
    coordinator = broker.coordinator
    await coordinator.start()
    broker.broker_epoch = await coordinator.register_broker(1, None, "127.0.0.1", 1)
    await coordinator.register_broker(2, None, "127.0.0.1", 2)
    silent_from = int(time.time() * 1000)
    broker._coordinator_ok_since = time.monotonic() - 3600  # our own view is trusted
    await asyncio.sleep(SESSION_MS / 1000 * 2)
    await coordinator.heartbeat_broker(1, broker.broker_epoch)
    return broker, silent_from


def _ids(brokers: list[Any]) -> list[int]:
    return [b.broker_id for b in brokers]


async def test_a_broker_fenced_by_another_first_leaves_the_view(tmp_path: Path) -> None:
    broker, _ = await _broker(tmp_path)
    coordinator = broker.coordinator
    real_fence = coordinator.fence_broker
    raced: list[int] = []

    async def another_broker_fences_first(
        broker_id: int, epoch: int, silent_since: int, *, left: bool = False
    ) -> bool:
        assert await real_fence(broker_id, epoch, silent_since)  # the other broker wins
        raced.append(broker_id)
        return await real_fence(broker_id, epoch, silent_since, left=left)

    coordinator.fence_broker = another_broker_fences_first  # type: ignore[method-assign]
    try:
        assert _ids(await broker.live_brokers()) == [1]
        assert raced == [2]
        assert _ids(broker.fenced_lately()) == [2]  # still named, leading nothing
    finally:
        await coordinator.close()


async def test_a_silent_broker_we_may_not_fence_yet_stays_live(tmp_path: Path) -> None:
    """Right after this broker starts (or loses the coordinator) it does not trust its own
    view of who is silent: the broker stays in the view, unfenced."""
    broker, silent_from = await _broker(tmp_path)
    broker._coordinator_ok_since = time.monotonic()  # not trusted for a session yet
    broker._doubt_since_ms = silent_from  # lost the coordinator as broker 2 fell silent
    try:
        assert _ids(await broker.live_brokers()) == [1, 2]
        assert broker.fenced_lately() == []
    finally:
        await broker.coordinator.close()


async def test_a_broker_this_one_fences_leaves_the_view(tmp_path: Path) -> None:
    broker, _ = await _broker(tmp_path)
    try:
        assert _ids(await broker.live_brokers()) == [1]
        assert _ids(broker.fenced_lately()) == [2]
    finally:
        await broker.coordinator.close()


async def test_fencing_from_the_heartbeat_loop_refreshes_the_view(tmp_path: Path) -> None:
    broker, _ = await _broker(tmp_path)
    broker.settings.broker_session_timeout_ms = 3_600_000  # the view keeps broker 2 ...
    try:
        assert _ids(await broker.live_brokers()) == [1, 2]
        broker.settings.broker_session_timeout_ms = SESSION_MS
        await broker._fence_silent_brokers()  # ... until the heartbeat loop fences it
        assert _ids(await broker.live_brokers()) == [1]
    finally:
        await broker.coordinator.close()
