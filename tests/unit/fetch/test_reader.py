"""Read planning, the batch cache and the reader over a real memory store."""

from __future__ import annotations

from lakelog.coordinator.interface import BatchCoordinate, TimestampType
from lakelog.fetch.cache import BatchCache
from lakelog.fetch.reader import COALESCE_GAP, BatchReader, plan_ranges
from lakelog.storage.store import ObjectStorage


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
    assert [bytes(d) for d in await reader.read(coords)] == [b"bbbbbb", b"aaaa", b"cc"]
    await storage.delete("wal/x")
    assert [bytes(d) for d in await reader.read(coords[:1])] == [b"bbbbbb"]  # cached
