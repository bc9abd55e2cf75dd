"""Flow control for mirror fetchers: a byte budget that caps the fetch buffers held at once,
and a byte-rate throttle.

The budget answers the thundering-herd point of the KIP-1279 review (VK1): a fetcher
reserves its buffer *before* it sends a Fetch and gives it back only once the batches are
committed, so however many partitions wake up together, the broker never holds more than
the cap (plus, rarely, one oversized batch: a source may answer with a first batch larger
than asked, KIP-74, which is forced past the cap rather than refused). The throttle only
paces bytes per second; it does not bound memory, the budget does."""

from __future__ import annotations

import asyncio
import collections
import time

from lakelog.util import metrics


class ByteBudget:
    """FIFO reservations of bytes against a fixed capacity."""

    def __init__(self, capacity: int) -> None:
        if capacity < 1:
            raise ValueError("the budget needs a positive capacity")
        self.capacity = capacity
        self.used = 0
        self.peak = 0
        self._waiters: collections.deque[tuple[int, asyncio.Future[None]]] = collections.deque()

    async def acquire(self, size: int) -> int:
        """Reserve `size` bytes (at most the capacity), waiting in line; returns what was
        reserved."""
        size = max(0, min(size, self.capacity))
        if not self._waiters and self.used + size <= self.capacity:
            self._take(size)
            return size
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        entry = (size, future)
        self._waiters.append(entry)
        try:
            await future
        except BaseException:
            if future.done() and not future.cancelled():
                self.release(size)  # granted just as we were cancelled
            else:
                self._waiters.remove(entry)
            raise
        return size

    def force(self, size: int) -> None:
        """Reserve without waiting: for bytes already on their way (an oversized answer)."""
        self._take(max(0, size))

    def release(self, size: int) -> None:
        self.used -= size
        metrics.mirror_buffer_bytes.set(self.used)
        while self._waiters:
            size_wanted, future = self._waiters[0]
            if future.cancelled():
                self._waiters.popleft()
                continue
            if self.used + size_wanted > self.capacity:
                break
            self._waiters.popleft()
            self._take(size_wanted)
            future.set_result(None)

    def _take(self, size: int) -> None:
        self.used += size
        if self.used > self.peak:
            self.peak = self.used
            metrics.mirror_buffer_peak_bytes.set(self.peak)
        metrics.mirror_buffer_bytes.set(self.used)


class Throttle:
    """A token bucket of `rate` bytes per second with a one-second burst; rate 0: off."""

    def __init__(self, rate: int) -> None:
        self.rate = rate
        self._tokens = float(rate)
        self._stamp = time.monotonic()

    async def consume(self, size: int) -> None:
        if self.rate <= 0:
            return
        now = time.monotonic()
        self._tokens = min(float(self.rate), self._tokens + (now - self._stamp) * self.rate)
        self._stamp = now
        self._tokens -= size
        if self._tokens < 0:
            await asyncio.sleep(-self._tokens / self.rate)
