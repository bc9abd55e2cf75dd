"""Listing the store in parallel, for gc: the key space is cut into ranges that Spark
tasks list independently.

`wal/` keys are UUIDv7s, so their text order is time order: on remote stores (S3, GCS,
Azure list pages of 1000 keys, one request after another) the WAL prefix is cut into time
ranges, each listed from its start key (`offset`, S3's StartAfter) until its end key. A
local directory is listed whole (no listing API seeks there). Segment objects are listed
per topic directory. Keys outside the layout are never listed, so never deleted."""

from __future__ import annotations

import uuid
from dataclasses import dataclass

import obstore

from lakelog.log.storage.keys import SEGMENT_PREFIX, WAL_PREFIX
from lakelog.log.storage.store import ObjectStorage
from lakelog.pipeline.planning import ListedObject

LIST_CHUNK = 1000


@dataclass(frozen=True, slots=True)
class ListRange:
    """Keys under `prefix`, after `start_after` (None: from the first) and before
    `end_before` (None: to the last)."""

    prefix: str
    start_after: str | None = None
    end_before: str | None = None


def time_key(prefix: str, time_ms: int) -> str:
    """A key below every UUIDv7 key of `prefix` made at or after `time_ms` and above every
    earlier one (its version and variant bits are zero)."""
    return f"{prefix}/{uuid.UUID(int=(time_ms & 0xFFFF_FFFF_FFFF) << 80)}"


def wal_ranges(first_ms: int, now_ms: int, count: int) -> list[ListRange]:
    """`count` ranges covering every WAL key: cut between the oldest key's time and now
    (the first range also takes anything older, the last anything newer)."""
    if count <= 1 or now_ms <= first_ms:
        return [ListRange(WAL_PREFIX)]
    step = max((now_ms - first_ms) // count, 1)
    cuts = [time_key(WAL_PREFIX, first_ms + step * i) for i in range(1, count)]
    bounds: list[str | None] = [None, *cuts, None]
    return [ListRange(WAL_PREFIX, bounds[i], bounds[i + 1]) for i in range(len(bounds) - 1)]


def is_local(storage_url: str) -> bool:
    return storage_url.startswith(("file:", "memory:"))


def plan_listing(
    storage: ObjectStorage, storage_url: str, now_ms: int, slots: int
) -> list[ListRange]:
    """The ranges to list: WAL time ranges (one on a local store) and one per topic
    directory under `seg/`."""
    store = storage.store
    ranges = [ListRange(WAL_PREFIX)]
    if not is_local(storage_url):
        first = _first_key(storage, WAL_PREFIX)
        if first is not None:
            first_ms = _uuid7_ms(first)
            if first_ms is not None:
                ranges = wal_ranges(first_ms, now_ms, slots)
    result = obstore.list_with_delimiter(store, SEGMENT_PREFIX)
    ranges += [ListRange(prefix.rstrip("/")) for prefix in result["common_prefixes"]]
    return ranges


def _first_key(storage: ObjectStorage, prefix: str) -> str | None:
    for chunk in obstore.list(storage.store, prefix, chunk_size=1):
        for meta in chunk:
            return str(meta["path"])
    return None


def _uuid7_ms(key: str) -> int | None:
    try:
        value = uuid.UUID(key.rsplit("/", 1)[-1])
    except ValueError:
        return None
    return value.int >> 80 if value.version == 7 else None


def list_range(storage: ObjectStorage, key_range: ListRange) -> list[ListedObject]:
    """Every object in the range (synchronous: runs in a Spark task)."""
    found: list[ListedObject] = []
    stream = obstore.list(
        storage.store, key_range.prefix, offset=key_range.start_after, chunk_size=LIST_CHUNK
    )
    for chunk in stream:
        for meta in chunk:
            key = str(meta["path"])
            if key_range.end_before is not None and key >= key_range.end_before:
                if not is_local(storage.url):
                    return found  # remote listings come in key order: the range is done
                continue
            modified = int(meta["last_modified"].timestamp() * 1000)
            found.append(ListedObject(key, int(meta["size"]), modified))
    return found


def list_ranges(storage_url: str, ranges: list[ListRange]) -> list[ListedObject]:
    """Spark task: list the given ranges."""
    storage = ObjectStorage.from_url(storage_url)
    return [obj for key_range in ranges for obj in list_range(storage, key_range)]
