"""A paced loop lets other tasks run while it works (one big request must not hold every
other connection up)."""

from __future__ import annotations

import asyncio
import time

from lakelog.util.pacing import paced

ITEMS = 200


async def test_paced_loop_lets_others_run_every_few_milliseconds() -> None:
    others = 0
    done = False

    async def other() -> None:
        nonlocal others
        while not done:
            others += 1
            await asyncio.sleep(0)

    task = asyncio.get_running_loop().create_task(other())
    await asyncio.sleep(0)
    seen = []
    async for item in paced(range(ITEMS), budget_s=0.005):
        end = time.perf_counter() + 0.001  # a millisecond of work per item
        while time.perf_counter() < end:
            pass
        seen.append(item)
    done = True
    await task
    assert seen == list(range(ITEMS))
    # 200 ms of work in 5 ms stretches: the other task ran at least ~40 times (a slower
    # machine only makes the stretches hold fewer items).
    assert others >= ITEMS // 10
