"""Reading batches out of objects and running async storage work inside Spark tasks.

Executors are plain Python processes: each task opens the store from its URL and runs one
event loop for its work. Batches may live in inline files (issue 32), whose bytes the
coordinator holds: a task's storage opens the coordinator itself, on its first read of an
inline key (most tasks never read one), and `close_task_storage` closes it when the work
ends. Reads are grouped per object (one ranged request per object, neighbouring ranges
coalesced by obstore) and run a bounded number at a time."""

from __future__ import annotations

import asyncio
from collections import defaultdict
from collections.abc import Coroutine, Sequence
from typing import Any, NamedTuple, TypeVar

from lakelog.coordinator import BatchCoordinator, open_coordinator
from lakelog.log.storage.inline_store import InlineAwareStorage
from lakelog.log.storage.store import ObjectStorage

T = TypeVar("T")

READ_CONCURRENCY = 16
"""Objects read at once by one task."""


class ByteRange(NamedTuple):
    object_key: str
    byte_offset: int
    byte_size: int


class LazyInlineSource:
    """Reads inline files through a coordinator opened on first use (in the task's loop)."""

    def __init__(self, coordinator_url: str) -> None:
        self._url = coordinator_url
        self._coordinator: BatchCoordinator | None = None

    async def inline_file(self, object_key: str) -> bytes | None:
        if self._coordinator is None:
            coordinator = open_coordinator(self._url)
            await coordinator.start()
            self._coordinator = coordinator
        return await self._coordinator.inline_file(object_key)

    async def close(self) -> None:
        coordinator, self._coordinator = self._coordinator, None
        if coordinator is not None:
            await coordinator.close()


def task_storage(storage_url: str, coordinator_url: str | None) -> ObjectStorage:
    """A task's storage: inline keys resolved through the coordinator when its URL is
    given (pass the result to `close_task_storage` at the end of the task's loop)."""
    storage = ObjectStorage.from_url(storage_url)
    if coordinator_url is None:
        return storage
    return InlineAwareStorage(storage, LazyInlineSource(coordinator_url))


async def close_task_storage(storage: ObjectStorage) -> None:
    if isinstance(storage, InlineAwareStorage) and isinstance(
        storage.inline_source, LazyInlineSource
    ):
        await storage.inline_source.close()


def run_async(coro: Coroutine[Any, Any, T]) -> T:
    """Run a task's async storage work to completion on a fresh event loop."""
    return asyncio.run(coro)


async def read_ranges(
    storage: ObjectStorage, ranges: Sequence[ByteRange], concurrency: int = READ_CONCURRENCY
) -> list[memoryview]:
    """The bytes of every range, answer i for range i; ValueError if an object is shorter
    than a range says (the coordinates and the object disagree)."""
    by_object: defaultdict[str, list[int]] = defaultdict(list)
    for i, r in enumerate(ranges):
        by_object[r.object_key].append(i)
    out: list[memoryview | None] = [None] * len(ranges)
    limit = asyncio.Semaphore(max(concurrency, 1))

    async def read_object(key: str, indexes: list[int]) -> None:
        starts = [ranges[i].byte_offset for i in indexes]
        ends = [ranges[i].byte_offset + ranges[i].byte_size for i in indexes]
        async with limit:
            got = await storage.get_ranges(key, starts, ends)
        for i, data in zip(indexes, got, strict=True):
            view = memoryview(data)
            if len(view) != ranges[i].byte_size:
                raise ValueError(
                    f"{key}: {len(view)} bytes at {ranges[i].byte_offset}, "
                    f"coordinates say {ranges[i].byte_size}"
                )
            out[i] = view

    await asyncio.gather(*(read_object(key, idx) for key, idx in by_object.items()))
    return [view for view in out if view is not None]
