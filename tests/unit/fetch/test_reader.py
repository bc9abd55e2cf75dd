"""Read planning, the batch cache and the reader over a real memory store."""

from __future__ import annotations

from lakelog.coordinator.log_types import BatchCoordinate, TimestampType
from lakelog.log.fetch.cache import BatchCache
from lakelog.log.fetch.reader import COALESCE_GAP, BatchReader, plan_ranges
from lakelog.log.storage.store import ObjectStorage


def _coord(key: str, start: int, size: int, base: int = 0) -> BatchCoordinate:
    return BatchCoordinate(
        key, start, size, base, base, 0, 0, TimestampType.CREATE_TIME, -1, -1, -1, -1, False
    )


def test_neighbouring_ranges_coalesce_and_far_ones_do_not() -> None:
    coords = [
        _coord("a", 0, 10),
        _coord("a", 10, 5),
        _coord("a", 15 + COALESCE_GAP + 1, 3),
        _coord("b", 100, 7),
    ]
    assert plan_ranges(coords) == {
        "a": [(0, 15), (15 + COALESCE_GAP + 1, 15 + COALESCE_GAP + 4)],
        "b": [(100, 107)],
    }


def test_cache_is_bounded_and_lru() -> None:
    cache = BatchCache(max_bytes=10)
    cache.put(("a", 0), b"12345")
    cache.put(("a", 5), b"12345")
    assert cache.get(("a", 0)) == b"12345"  # now most recent
    cache.put(("b", 0), b"123")
    assert cache.size <= 10
    assert cache.get(("a", 5)) is None and cache.get(("a", 0)) is not None
    cache.put(("c", 0), b"x" * 11)  # larger than the whole cache: not kept
    assert cache.get(("c", 0)) is None
    cache.discard_object("a")
    assert cache.get(("a", 0)) is None


async def test_reader_serves_misses_from_store_then_from_cache() -> None:
    storage = ObjectStorage.from_url("memory://")
    await storage.put("wal/x", [b"aaaa", b"bbbbbb", b"cc"])
    cache = BatchCache(1 << 20)
    reader = BatchReader(storage, cache)
    coords = [_coord("wal/x", 4, 6), _coord("wal/x", 0, 4), _coord("wal/x", 10, 2)]
    assert [joined(d) for d in await reader.read(coords)] == [b"bbbbbb", b"aaaa", b"cc"]
    await storage.delete("wal/x")
    assert [joined(d) for d in await reader.read(coords[:1])] == [b"bbbbbb"]  # cached


def joined(pieces: list[memoryview | bytes]) -> bytes:
    return b"".join(bytes(p) for p in pieces)


async def test_a_run_is_served_from_the_entries_that_tile_it() -> None:
    """The broker caches a WAL object's batches one by one as it commits them; a row
    holding a run of them is served as those entries, without a copy. A run with a part
    missing is read whole from the store and cached as one entry."""
    storage = ObjectStorage.from_url("memory://")
    await storage.put("wal/x", [b"aaaa", b"bbbbbb", b"cc", b"dddd"])
    cache = BatchCache(1 << 20)
    cached = [memoryview(b"aaaa"), memoryview(b"bbbbbb"), memoryview(b"cc")]
    for start, data in zip((0, 4, 10), cached, strict=True):
        cache.put(("wal/x", start), data)
    reader = BatchReader(storage, cache)
    [run] = await reader.read([_coord("wal/x", 0, 12)])
    assert [p.obj for p in run] == [p.obj for p in cached]  # the cached buffers themselves
    [inner] = await reader.read([_coord("wal/x", 4, 8)])
    assert joined(inner) == b"bbbbbbcc"
    assert await reader.read_whole([_coord("wal/x", 0, 12)]) == [b"aaaabbbbbbcc"]

    [longer] = await reader.read([_coord("wal/x", 4, 12)])  # "dddd" is not cached
    assert len(longer) == 1 and bytes(longer[0]) == b"bbbbbbccdddd"
    await storage.delete("wal/x")
    [again] = await reader.read([_coord("wal/x", 4, 12)])
    assert joined(again) == b"bbbbbbccdddd"
    # An entry running past the row's end does not serve it (never more than the row).
    assert cache.get_range("wal/x", 4, 10) is None
