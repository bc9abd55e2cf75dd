"""Turn batch coordinates into batch bytes: cache first, then one ranged read per run of
neighbouring coordinates in an object. Transaction markers live in no object: their
control batches are built here."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from lakelog.coordinator.log_types import BatchCoordinate
from lakelog.log.fetch.batches import Pieces
from lakelog.log.fetch.cache import BatchCache
from lakelog.log.protocol.control_batch import control_batch
from lakelog.log.storage.store import ObjectStorage

# Two batches closer than this in one object are read with one request.
COALESCE_GAP = 512 * 1024


def is_marker(coord: BatchCoordinate) -> bool:
    """A marker with no bytes of its own (a local transaction's); mirrored markers have
    real bytes in an object and are read like data."""
    return coord.control_type >= 0 and not coord.object_key


def marker_bytes(coord: BatchCoordinate) -> bytes:
    """The control batch of a marker coordinate."""
    return control_batch(
        coord.base_offset,
        coord.producer_id,
        coord.producer_epoch,
        coord.control_type,
        coord.max_timestamp,
    )


def plan_ranges(coords: Sequence[BatchCoordinate]) -> dict[str, list[tuple[int, int]]]:
    """Per object, merged [start, end) byte ranges covering the given batches."""
    by_object: dict[str, list[tuple[int, int]]] = {}
    for c in coords:
        by_object.setdefault(c.object_key, []).append((c.byte_offset, c.byte_offset + c.byte_size))
    merged: dict[str, list[tuple[int, int]]] = {}
    for key, spans in by_object.items():
        spans.sort()
        out: list[tuple[int, int]] = []
        for start, end in spans:
            if out and start - out[-1][1] <= COALESCE_GAP:
                out[-1] = (out[-1][0], max(out[-1][1], end))
            else:
                out.append((start, end))
        merged[key] = out
    return merged


async def read_spans(
    storage: ObjectStorage,
    object_key: str,
    spans: list[tuple[int, int]],
    wanted: Sequence[BatchCoordinate],
    limit: asyncio.Semaphore,
) -> list[tuple[BatchCoordinate, memoryview]]:
    """One ranged request for an object's spans (from `plan_ranges`, at most `limit` such
    requests at once), cut into the bytes of each of `wanted`'s batches in that object."""
    async with limit:
        chunks = await storage.get_ranges(object_key, [s for s, _ in spans], [e for _, e in spans])
    views = [(start, memoryview(chunk)) for (start, _), chunk in zip(spans, chunks, strict=True)]
    out: list[tuple[BatchCoordinate, memoryview]] = []
    for c in wanted:
        if c.object_key != object_key:
            continue
        for start, view in views:
            if start <= c.byte_offset < start + len(view):
                rel = c.byte_offset - start
                out.append((c, view[rel : rel + c.byte_size]))
                break
    return out


class BatchReader:
    def __init__(self, storage: ObjectStorage, cache: BatchCache, max_concurrent_reads: int = 16):
        self._storage = storage
        self._cache = cache
        self._reads = asyncio.Semaphore(max_concurrent_reads)

    async def read(self, coords: Sequence[BatchCoordinate]) -> list[Pieces]:
        """The bytes of each coordinate, in the order given, as consecutive pieces of whole
        batches: one piece read from storage, or the cached batches of a run (no copy)."""
        found: dict[tuple[str, int], Pieces] = {}
        missing = []
        for c in coords:
            if is_marker(c):
                continue
            pieces = self._cache.get_range(c.object_key, c.byte_offset, c.byte_size)
            if pieces is None:
                missing.append(c)
            else:
                found[(c.object_key, c.byte_offset)] = pieces
        if missing:
            await asyncio.gather(
                *(
                    self._read_object(key, spans, missing, found)
                    for key, spans in plan_ranges(missing).items()
                )
            )
        return [
            [marker_bytes(c)] if is_marker(c) else found[(c.object_key, c.byte_offset)]
            for c in coords
        ]

    async def read_whole(self, coords: Sequence[BatchCoordinate]) -> list[memoryview | bytes]:
        """`read`, each coordinate's bytes in one buffer (a run from the cache is joined)."""
        return [
            pieces[0] if len(pieces) == 1 else b"".join(pieces)
            for pieces in await self.read(coords)
        ]

    async def _read_object(
        self,
        object_key: str,
        spans: list[tuple[int, int]],
        wanted: Sequence[BatchCoordinate],
        found: dict[tuple[str, int], Pieces],
    ) -> None:
        for c, data in await read_spans(self._storage, object_key, spans, wanted, self._reads):
            found[(object_key, c.byte_offset)] = [data]
            self._cache.put((object_key, c.byte_offset), data)
