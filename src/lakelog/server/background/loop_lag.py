"""How long the broker's event loop is held by other work: the delay a request waits before
the broker even reads it. Every connection is served from this one loop, so a lag that grows
means the broker is CPU-bound (or one request holds the loop), which `lakelog_requests`
latencies alone do not show: they start when the request is read."""

from __future__ import annotations

import asyncio

from lakelog.util import metrics

INTERVAL_S = 0.1


async def watch_loop_lag() -> None:
    loop = asyncio.get_running_loop()
    while True:
        started = loop.time()
        await asyncio.sleep(INTERVAL_S)
        metrics.event_loop_lag_seconds.observe(max(0.0, loop.time() - started - INTERVAL_S))
