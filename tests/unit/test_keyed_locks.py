"""KeyedLocks: mutual exclusion per key, and a table that empties when nobody holds or
awaits a key (it grew by one lock per group id ever named, hostile ones included)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from lakelog.util.keyed_locks import KeyedLocks


async def test_one_holder_per_key_and_the_table_empties() -> None:
    locks = KeyedLocks()
    inside: dict[str, int] = {"a": 0, "b": 0}
    most: dict[str, int] = {"a": 0, "b": 0}

    async def use(key: str) -> None:
        async with locks.hold(key):
            inside[key] += 1
            most[key] = max(most[key], inside[key])
            await asyncio.sleep(0.001)
            inside[key] -= 1

    await asyncio.gather(*(use("ab"[i % 2]) for i in range(40)))
    assert most == {"a": 1, "b": 1}
    assert len(locks) == 0


async def test_a_waiter_keeps_the_lock_of_its_key() -> None:
    """Dropped while someone still waits on it, a newcomer would get a second lock."""
    locks = KeyedLocks()
    order: list[str] = []
    first_in = asyncio.Event()
    release = asyncio.Event()

    async def first() -> None:
        async with locks.hold("g"):
            first_in.set()
            await release.wait()
            order.append("first")

    async def later(name: str) -> None:
        async with locks.hold("g"):
            order.append(name)

    holder = asyncio.create_task(first())
    await first_in.wait()
    waiter = asyncio.create_task(later("second"))
    await asyncio.sleep(0)
    release.set()
    await asyncio.sleep(0)  # first has released; second is woken but not yet running
    newcomer = asyncio.create_task(later("third"))
    await asyncio.gather(holder, waiter, newcomer)
    assert order == ["first", "second", "third"]
    assert len(locks) == 0


async def test_a_cancelled_waiter_leaves_nothing_behind() -> None:
    locks = KeyedLocks()
    held = asyncio.Event()
    done = asyncio.Event()

    async def holder() -> None:
        async with locks.hold("g"):
            held.set()
            await done.wait()

    async def waiter() -> None:
        async with locks.hold("g"):
            pass

    task = asyncio.create_task(holder())
    await held.wait()
    cancelled = asyncio.create_task(waiter())
    await asyncio.sleep(0)
    cancelled.cancel()
    with pytest.raises(asyncio.CancelledError):
        await cancelled
    done.set()
    await task
    assert len(locks) == 0


async def test_looking_up_made_up_groups_leaves_no_lock(tmp_path: Path) -> None:
    """The classic group coordinator, as DescribeGroups and OffsetFetch for unknown ids
    use it: nothing stays behind per id."""
    from lakelog.config import Settings
    from lakelog.server.broker import Broker

    broker = Broker(Settings(data_dir=tmp_path))
    await broker.coordinator.start()
    try:
        for i in range(300):
            assert await broker.groups.get(f"made-up-{i}", create=False) is None
        assert len(broker.groups._locks) == 0
    finally:
        await broker.coordinator.close()
