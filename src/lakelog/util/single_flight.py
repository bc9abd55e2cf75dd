"""One load at a time, shared by everyone who needs it.

Caches in front of the coordinator (topics, live brokers) reload when they age; under a
flood of requests while the database was slow, each request that found the view old queued
its own full query behind the others, and requests waited 300 ms for them. A `SingleFlight`
runs one load, and everyone who needs a load while it runs joins it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from typing import Any, Generic, TypeVar

T = TypeVar("T")


class SingleFlight(Generic[T]):
    def __init__(self, load: Callable[[], Coroutine[Any, Any, T]]) -> None:
        self._load = load
        self._task: asyncio.Task[T] | None = None

    def start(self) -> asyncio.Task[T]:
        """The running load, or a new one; its failure goes to whoever waits for it."""
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(self._load())
            self._task.add_done_callback(_retrieve)
        return self._task

    async def wait(self) -> T:
        """The result of the running load, or of a new one (a cancelled waiter does not
        cancel the load the others wait for)."""
        return await asyncio.shield(self.start())

    def forget(self) -> None:
        """The next `start` begins a new load even if one is running (its result is
        stale: the caller must also ignore what the old load writes)."""
        self._task = None


def _retrieve(task: asyncio.Task[Any]) -> None:
    if not task.cancelled():
        task.exception()  # marks a background failure retrieved (asyncio would log it)
