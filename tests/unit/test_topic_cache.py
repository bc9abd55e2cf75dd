"""The topic cache against a real SQLite coordinator behind a gate (the fault wrapper): one
load however many requests find the view old, the old view served while it reloads, and an
invalidation by this broker's own admin change never served stale."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from lakelog.coordinator import BatchCoordinator, open_coordinator
from lakelog.coordinator.topic_types import CreateTopicRequest
from lakelog.server.topics import TopicCache


class Gated:
    """The coordinator, with get_topics counted and held while `gate` is clear."""

    def __init__(self, inner: BatchCoordinator) -> None:
        self.inner = inner
        self.gate = asyncio.Event()
        self.gate.set()
        self.loads = 0

    async def get_topics(self, names: Any) -> Any:
        self.loads += 1
        await self.gate.wait()
        return await self.inner.get_topics(names)


@pytest.fixture
async def coordinator(tmp_path: Path) -> AsyncIterator[BatchCoordinator]:
    instance = open_coordinator(f"sqlite:///{tmp_path / 'c.sqlite3'}")
    await instance.start()
    await instance.create_topics([CreateTopicRequest("orders", 1, 1)])
    yield instance
    await instance.close()


async def test_many_requests_on_an_old_view_make_one_load(coordinator: BatchCoordinator) -> None:
    gated = Gated(coordinator)
    cache = TopicCache(gated, ttl_s=60)  # type: ignore[arg-type]
    gated.gate.clear()
    waiters = [asyncio.ensure_future(cache.get("orders")) for _ in range(50)]
    await asyncio.sleep(0.05)
    gated.gate.set()
    found = await asyncio.gather(*waiters)
    assert all(t is not None and t.name == "orders" for t in found)
    assert gated.loads == 1


async def test_past_its_ttl_the_view_is_served_while_it_reloads(
    coordinator: BatchCoordinator,
) -> None:
    gated = Gated(coordinator)
    cache = TopicCache(gated, ttl_s=0.05)  # type: ignore[arg-type]
    assert await cache.get("orders") is not None
    await coordinator.create_topics([CreateTopicRequest("payments", 1, 1)])  # another broker
    await asyncio.sleep(0.1)
    gated.gate.clear()  # the database is slow now
    # Served at once from the old view (a load starts behind it).
    assert await asyncio.wait_for(cache.get("orders"), 1) is not None
    assert gated.loads == 2
    gated.gate.set()
    await asyncio.sleep(0.05)
    assert [t.name for t in await cache.all()] == ["orders", "payments"]


async def test_an_invalidated_view_is_never_served(coordinator: BatchCoordinator) -> None:
    gated = Gated(coordinator)
    cache = TopicCache(gated, ttl_s=60)  # type: ignore[arg-type]
    assert {t.name for t in await cache.all()} == {"orders"}
    gated.gate.clear()
    started = asyncio.ensure_future(cache.get("orders"))  # no load: the view is fresh
    assert (await asyncio.wait_for(started, 1)) is not None
    # A load begun before an admin change must not satisfy a request after it.
    cache.invalidate()
    before = asyncio.ensure_future(cache.all())
    await asyncio.sleep(0.02)
    await coordinator.create_topics([CreateTopicRequest("refunds", 1, 1)])
    cache.invalidate()  # this broker created it
    after = asyncio.ensure_future(cache.all())
    await asyncio.sleep(0.02)
    assert not before.done() and not after.done()
    gated.gate.set()
    assert "refunds" in {t.name for t in await asyncio.wait_for(after, 5)}
    await before
