"""Long synchronous stretches of request handling, cut into pieces of a few milliseconds.

The broker serves every connection from one event loop: a request that builds or encodes
tens of thousands of entries in one go (DescribeGroups for 30,000 groups, DescribeConfigs
for 1,000 brokers) held every other client up for 150-350 ms under the fuzzer. A `Pacer`
yields to the loop whenever its budget of loop time has been used since the last yield.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterable
from time import perf_counter
from typing import TypeVar

T = TypeVar("T")

BUDGET_S = 0.005
"""Loop time a handler may hold before it lets the others run."""


class Pacer:
    __slots__ = ("_budget", "_since")

    def __init__(self, budget_s: float = BUDGET_S) -> None:
        self._budget = budget_s
        self._since = perf_counter()

    async def tick(self) -> None:
        """Yield to the loop if this stretch has held it for the budget."""
        if perf_counter() - self._since >= self._budget:
            await asyncio.sleep(0)
            self._since = perf_counter()


async def paced(items: Iterable[T], budget_s: float = BUDGET_S) -> AsyncIterator[T]:
    """`items`, yielding to the loop between them every `budget_s` of loop time."""
    pacer = Pacer(budget_s)
    for item in items:
        yield item
        await pacer.tick()
