"""One process per broker id (server/cluster/identity.py): the id lock file, and the wait
on an earlier registration's heartbeat, which refuses a live twin, passes a crashed one at
once when its address refuses connections, and otherwise waits out the session."""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from lakelog.config import Settings
from lakelog.coordinator import BatchCoordinator, open_coordinator
from lakelog.server.cluster.identity import (
    BrokerIdInUseError,
    check_lock_free,
    hold_lock,
    lock_path,
    wait_until_id_free,
)

SESSION_MS = 1200
INTERVAL_MS = 100


def _settings(tmp_path: Path) -> Settings:
    return Settings(
        data_dir=tmp_path,
        broker_id=3,
        broker_session_timeout_ms=SESSION_MS,
        broker_heartbeat_interval_ms=INTERVAL_MS,
    )


def test_the_lock_is_per_id_beside_the_embedded_coordinator(tmp_path: Path) -> None:
    settings = _settings(tmp_path)
    path = lock_path(settings)
    assert path == tmp_path.absolute() / ".lock-broker-3"
    check_lock_free(path, 3)  # no file: nobody holds it, and nothing is created
    assert not path.exists()
    fd = hold_lock(path, 3)
    try:
        assert path.read_text().strip() == str(os.getpid())
        with pytest.raises(BrokerIdInUseError, match=f"pid {os.getpid()} holds"):
            hold_lock(path, 3)  # flock: another open of the file conflicts, also in-process
        with pytest.raises(BrokerIdInUseError, match="another --broker-id"):
            check_lock_free(path, 3)
        other = hold_lock(tmp_path / ".lock-broker-4", 4)  # another id: its own lock
        os.close(other)
    finally:
        os.close(fd)
    os.close(hold_lock(path, 3))  # released with its holder's file
    pg = settings.model_copy(update={"coordinator_url": "postgresql://u@h/db"})
    assert lock_path(pg) is None


@pytest.fixture
async def coordinator(tmp_path: Path) -> AsyncIterator[BatchCoordinator]:
    coordinator = open_coordinator(_settings(tmp_path).resolved_coordinator_url)
    await coordinator.start()
    try:
        yield coordinator
    finally:
        await coordinator.close()


async def _never_refused(host: str, port: int) -> bool:
    return False


async def _always_refused(host: str, port: int) -> bool:
    return True


async def test_a_free_or_left_id_starts_at_once(
    tmp_path: Path, coordinator: BatchCoordinator
) -> None:
    settings = _settings(tmp_path)
    await wait_until_id_free(coordinator, settings, _never_refused)  # never registered
    epoch = await coordinator.register_broker(3, None, "127.0.0.1", 9)
    assert await coordinator.fence_broker(3, epoch, 1 << 50, left=True)
    started = time.monotonic()
    await wait_until_id_free(coordinator, settings, _never_refused)
    assert time.monotonic() - started < 0.5


async def test_a_crashed_twin_whose_port_refuses_is_passed_at_once(
    tmp_path: Path, coordinator: BatchCoordinator
) -> None:
    await coordinator.register_broker(3, None, "127.0.0.1", 9)  # fresh heartbeat
    started = time.monotonic()
    await wait_until_id_free(coordinator, _settings(tmp_path), _always_refused)
    assert time.monotonic() - started < 0.5


async def test_a_heartbeating_twin_is_refused(
    tmp_path: Path, coordinator: BatchCoordinator
) -> None:
    epoch = await coordinator.register_broker(3, None, "127.0.0.1", 9)

    async def heartbeat() -> None:
        while True:
            await asyncio.sleep(INTERVAL_MS / 1000)
            await coordinator.heartbeat_broker(3, epoch)

    task = asyncio.create_task(heartbeat())
    try:
        with pytest.raises(BrokerIdInUseError, match=r"advertised at 127\.0\.0\.1:9"):
            await wait_until_id_free(coordinator, _settings(tmp_path), _never_refused)
    finally:
        task.cancel()


async def test_a_silent_twin_is_waited_out_for_the_session(
    tmp_path: Path, coordinator: BatchCoordinator, caplog: pytest.LogCaptureFixture
) -> None:
    await coordinator.register_broker(3, None, "127.0.0.1", 9)
    started = time.monotonic()
    await wait_until_id_free(coordinator, _settings(tmp_path), _never_refused)
    waited = time.monotonic() - started
    assert SESSION_MS / 1000 * 0.8 <= waited < SESSION_MS / 1000 + 5
    assert "waiting up to" in caplog.text
