"""The offset commit queue (`groups.offset_commits`) on a real SQLite coordinator, behind a
fault-injection wrapper that can hold a write in flight or fail one: commits that arrive
meanwhile go into the next write together, in arrival order (a later commit of a partition
wins), nobody is answered before their write returns, the queue is bounded, and one bad
request does not fail the others of its batch."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from lakelog.coordinator import open_coordinator
from lakelog.coordinator.group_types import GroupOffsetCommit, OffsetCommit
from lakelog.coordinator.interface import BatchCoordinator
from lakelog.coordinator.topic_types import CreateTopicRequest
from lakelog.groups.offset_commits import QUEUED_BATCHES, OffsetCommitQueue
from lakelog.util.errors import ErrorCode


class Gated:
    """The coordinator's `commit_offset_batch`, held at `gate` while it is closed, and
    failing a batch that holds a poisoned group (not an outage: a bug's exception)."""

    def __init__(self, inner: BatchCoordinator) -> None:
        self.inner = inner
        self.gate = asyncio.Event()
        self.gate.set()
        self.entered = asyncio.Event()
        self.batches: list[list[str]] = []
        self.poison = "poison"

    async def commit_offset_batch(self, items: Sequence[Any], now_ms: int) -> Any:
        self.batches.append([item.group_id for item in items])
        self.entered.set()
        await self.gate.wait()
        if any(item.group_id == self.poison for item in items):
            raise ValueError("a poisoned request")
        return await self.inner.commit_offset_batch(items, now_ms)


@pytest.fixture
async def gated(tmp_path: Path) -> AsyncIterator[Gated]:
    coord = open_coordinator(f"sqlite:///{tmp_path}/c.sqlite3")
    await coord.start()
    await coord.create_topics([CreateTopicRequest("in", 1, 1, {})])
    yield Gated(coord)
    await coord.close()


def commit(group: str, offset: int) -> GroupOffsetCommit:
    return GroupOffsetCommit(group, [OffsetCommit("in", 0, offset)])


async def committed(gated: Gated, group: str) -> int:
    [found] = await gated.inner.fetch_offsets(group, [("in", 0)])
    return found.offset


async def test_commits_arriving_during_a_write_go_together_into_the_next(gated: Gated) -> None:
    queue = OffsetCommitQueue(gated, 100)  # type: ignore[arg-type]
    gated.gate.clear()
    first = await queue.submit(commit("g", 1))
    await gated.entered.wait()
    later = [await queue.submit(commit("g", offset)) for offset in (5, 3, 4)]
    await asyncio.sleep(0.01)
    assert not first.done() and not any(f.done() for f in later)  # nothing durable yet
    gated.gate.set()
    assert await first == [ErrorCode.none]
    assert [await f for f in later] == [[ErrorCode.none]] * 3
    assert gated.batches == [["g"], ["g", "g", "g"]]
    assert await committed(gated, "g") == 4  # the last one sent, though lower


async def test_a_batch_stops_at_the_offset_limit(gated: Gated) -> None:
    queue = OffsetCommitQueue(gated, 2)  # type: ignore[arg-type]
    gated.gate.clear()
    answers = [await queue.submit(commit(f"g{i}", i)) for i in range(5)]
    gated.gate.set()
    await asyncio.gather(*answers)
    assert [len(b) for b in gated.batches] == [2, 2, 1]
    await queue.flush()


async def test_the_queue_is_bounded(gated: Gated) -> None:
    queue = OffsetCommitQueue(gated, 1)  # type: ignore[arg-type]
    gated.gate.clear()
    await queue.submit(commit("g", 0))  # in flight
    await gated.entered.wait()
    for i in range(QUEUED_BATCHES):
        await queue.submit(commit("g", i + 1))
    waiting = asyncio.ensure_future(queue.submit(commit("g", 99)))
    await asyncio.sleep(0.01)
    assert not waiting.done()  # no room: it waits
    gated.gate.set()
    await (await waiting)
    await queue.flush()
    assert await committed(gated, "g") == 99


async def test_one_bad_request_does_not_fail_its_batch(gated: Gated) -> None:
    queue = OffsetCommitQueue(gated, 100)  # type: ignore[arg-type]
    gated.gate.clear()
    await queue.submit(commit("a", 1))
    await gated.entered.wait()
    good = await queue.submit(commit("b", 2))
    bad = await queue.submit(commit("poison", 3))
    also_good = await queue.submit(commit("c", 4))
    gated.gate.set()
    assert await good == [ErrorCode.none]
    assert await also_good == [ErrorCode.none]
    with pytest.raises(ValueError):
        await bad
    assert [await committed(gated, g) for g in "abc"] == [1, 2, 4]
    assert gated.batches[1:] == [["b", "poison", "c"], ["b"], ["poison"], ["c"]]
