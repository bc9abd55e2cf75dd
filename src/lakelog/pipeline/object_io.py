"""Reading batches out of objects and running async storage work inside Spark tasks.

Executors are plain Python processes: each task opens the store from its URL and runs one
event loop for its work. Reads are grouped per object (one ranged request per object,
neighbouring ranges coalesced by obstore) and run a bounded number at a time."""

from __future__ import annotations

import asyncio
from collections import defaultdict
from collections.abc import Coroutine, Sequence
from typing import Any, NamedTuple, TypeVar

from lakelog.log.storage.store import ObjectStorage

T = TypeVar("T")

READ_CONCURRENCY = 16
"""Objects read at once by one task."""


class ByteRange(NamedTuple):
    object_key: str
    byte_offset: int
    byte_size: int


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
