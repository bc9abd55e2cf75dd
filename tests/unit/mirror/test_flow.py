"""The mirror's byte budget (FIFO reservations under a cap, forced overshoot, cancelled
waiters) and its byte-rate throttle."""

from __future__ import annotations

import asyncio
import time

import pytest

from lakelog.mirror.flow import ByteBudget, Throttle


async def test_reservations_wait_in_line_under_the_cap() -> None:
    budget = ByteBudget(100)
    assert await budget.acquire(60) == 60
    order: list[str] = []

    async def take(name: str, size: int) -> None:
        await budget.acquire(size)
        order.append(name)

    big = asyncio.create_task(take("big", 70))
    small = asyncio.create_task(take("small", 10))  # fits, but waits behind "big"
    await asyncio.sleep(0.01)
    assert order == [] and budget.used == 60
    budget.release(60)
    await asyncio.gather(big, small)
    assert order == ["big", "small"] and budget.used == 80
    assert budget.peak == 80
    budget.release(80)
    assert await budget.acquire(1000) == 100  # capped at the capacity
    budget.release(100)
    assert budget.used == 0


async def test_force_overshoots_and_cancelled_waiters_leave_the_line() -> None:
    budget = ByteBudget(10)
    await budget.acquire(10)
    budget.force(5)
    assert (budget.used, budget.peak) == (15, 15)
    waiter = asyncio.create_task(budget.acquire(5))
    await asyncio.sleep(0.01)
    waiter.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiter
    budget.release(15)
    assert budget.used == 0
    assert await asyncio.wait_for(budget.acquire(10), 1) == 10
    with pytest.raises(ValueError):
        ByteBudget(0)


async def test_the_throttle_paces_bytes_per_second() -> None:
    off = Throttle(0)
    started = time.monotonic()
    await off.consume(10**9)
    assert time.monotonic() - started < 0.05
    throttle = Throttle(1000)  # a one-second burst, then 1000 bytes/s
    await throttle.consume(1000)
    started = time.monotonic()
    await throttle.consume(200)
    assert 0.15 <= time.monotonic() - started < 0.5
