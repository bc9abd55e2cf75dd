"""Object storage that also serves inline files (issue 32).

An inline file is a small WAL object whose bytes the batch coordinator holds (committed
with its batch rows in one transaction) instead of the store. Its key, `inline/<uuid7>`,
sits in batch coordinates like any object key, so every reader works unchanged if the
storage it reads through resolves those keys: `InlineAwareStorage` serves reads of inline
keys from the coordinator and passes every other call to the store. Deletes of inline keys
are no-ops here: the bytes go with the file row (`BatchCoordinator.delete_files`).

Inline files never change, so their bytes are kept in a small LRU (bounded by bytes): a
fetch that misses the produce-time cache costs one coordinator read per file, not one per
range. A key the coordinator no longer knows reads as a missing object, exactly as a
deleted object does."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence
from typing import TYPE_CHECKING, Protocol

from lakelog.log.storage.keys import is_inline_key
from lakelog.log.storage.store import ObjectInfo, ObjectNotFoundError, ObjectStorage

if TYPE_CHECKING:
    from obstore import Bytes

CACHE_MAX_BYTES = 16 * 1024 * 1024
"""Inline files' bytes kept in memory at most (they are small: tens of KiB each)."""


class InlineSource(Protocol):
    """Where inline files' bytes come from (the coordinator is one)."""

    async def inline_file(self, object_key: str) -> bytes | None: ...


class InlineAwareStorage(ObjectStorage):
    """`ObjectStorage` whose reads of `inline/` keys come from an `InlineSource`."""

    def __init__(
        self, base: ObjectStorage, source: InlineSource, cache_max_bytes: int = CACHE_MAX_BYTES
    ) -> None:
        super().__init__(base.store, base.url, fsync=base.fsyncs)
        self.inline_source = source
        self._cache: OrderedDict[str, bytes] = OrderedDict()
        self._cached_bytes = 0
        self._cache_max = cache_max_bytes

    async def _inline(self, key: str) -> bytes:
        data = self._cache.get(key)
        if data is not None:
            self._cache.move_to_end(key)
            return data
        data = await self.inline_source.inline_file(key)
        if data is None:
            raise ObjectNotFoundError(f"get {key}: inline file not found")
        if len(data) <= self._cache_max:
            self._cache[key] = data
            self._cached_bytes += len(data)
            while self._cached_bytes > self._cache_max:
                _, old = self._cache.popitem(last=False)
                self._cached_bytes -= len(old)
        return data

    def forget(self, key: str) -> None:
        """Drop a deleted inline file's bytes from memory."""
        data = self._cache.pop(key, None)
        if data is not None:
            self._cached_bytes -= len(data)

    async def get(self, key: str) -> Bytes | bytes:  # type: ignore[override]
        if is_inline_key(key):
            return await self._inline(key)
        return await super().get(key)

    async def get_range(self, key: str, start: int, end: int) -> Bytes | bytes:
        if is_inline_key(key):
            if start < 0 or end < start:
                raise ValueError(f"bad byte range [{start}, {end})")
            return (await self._inline(key))[start:end] if end > start else b""
        return await super().get_range(key, start, end)

    async def get_ranges(
        self,
        key: str,
        starts: Sequence[int],
        ends: Sequence[int],
        *,
        coalesce: int = 1024 * 1024,
    ) -> list[Bytes | bytes]:
        if is_inline_key(key):
            if len(starts) != len(ends):
                raise ValueError("starts and ends differ in length")
            for start, end in zip(starts, ends, strict=True):
                if start < 0 or end < start:
                    raise ValueError(f"bad byte range [{start}, {end})")
            data = memoryview(await self._inline(key))
            return [bytes(data[s:e]) for s, e in zip(starts, ends, strict=True)]
        return await super().get_ranges(key, starts, ends, coalesce=coalesce)

    async def get_tail(self, key: str, length: int) -> tuple[Bytes | bytes, int]:  # type: ignore[override]
        if is_inline_key(key):
            if length <= 0:
                raise ValueError(f"tail length must be positive, got {length}")
            data = await self._inline(key)
            return data[-length:], len(data)
        return await super().get_tail(key, length)

    async def head(self, key: str) -> ObjectInfo:
        if is_inline_key(key):
            return ObjectInfo(key, len(await self._inline(key)), 0)
        return await super().head(key)

    async def delete(self, key: str) -> None:
        if is_inline_key(key):
            self.forget(key)
            return
        await super().delete(key)

    async def delete_many(self, keys: Sequence[str]) -> None:
        stored = []
        for key in keys:
            if is_inline_key(key):
                self.forget(key)
            else:
                stored.append(key)
        await super().delete_many(stored)
