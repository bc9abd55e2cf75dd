"""InlineAwareStorage: inline keys read from a real SQLite coordinator with the store's
own contract (ranges, tails, heads, missing keys), every other key from the store."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from lakelog.coordinator import CommitBatch, CreateTopicRequest, TimestampType, open_coordinator
from lakelog.coordinator.interface import BatchCoordinator
from lakelog.log.storage.inline_store import InlineAwareStorage
from lakelog.log.storage.store import ObjectNotFoundError, ObjectStorage


@pytest.fixture
async def coordinator(tmp_path: Path) -> AsyncIterator[BatchCoordinator]:
    coord = open_coordinator(f"sqlite:///{tmp_path}/c.sqlite3")
    await coord.start()
    yield coord
    await coord.close()


async def _inline(coordinator: BatchCoordinator, data: bytes) -> str:
    [topic] = await coordinator.create_topics([CreateTopicRequest(f"t{uuid.uuid4().hex}", 1, 1)])
    assert topic.topic_id is not None
    key = f"inline/{uuid.uuid4()}"
    batch = CommitBatch(
        topic.topic_id, 0, 0, len(data), 1, 0, 0, TimestampType.CREATE_TIME, -1, -1, -1, False
    )
    await coordinator.commit_file(key, 1, -1, len(data), [batch], inline=data)
    return key


async def test_inline_keys_read_like_objects(coordinator: BatchCoordinator) -> None:
    store = ObjectStorage.from_url("memory://")
    storage = InlineAwareStorage(store, coordinator, cache_max_bytes=40)
    data = bytes(range(32))
    key = await _inline(coordinator, data)
    assert bytes(await storage.get(key)) == data
    assert bytes(await storage.get_range(key, 4, 8)) == data[4:8]
    assert bytes(await storage.get_range(key, 30, 40)) == data[30:]  # shorter at the end
    assert await storage.get_range(key, 5, 5) == b""
    got = await storage.get_ranges(key, [0, 10, 3], [2, 10, 6])
    assert [bytes(g) for g in got] == [data[0:2], b"", data[3:6]]
    tail, size = await storage.get_tail(key, 4)
    assert (bytes(tail), size) == (data[-4:], 32)
    assert (await storage.head(key)).size == 32
    with pytest.raises(ValueError):
        await storage.get_range(key, 5, 4)
    with pytest.raises(ObjectNotFoundError):
        await storage.get(f"inline/{uuid.uuid4()}")
    # Another key goes to the store; the LRU stays under its bound.
    await storage.put("wal/x", [b"object"])
    assert bytes(await storage.get("wal/x")) == b"object"
    other = await _inline(coordinator, bytes(20))
    assert bytes(await storage.get(other)) == bytes(20)
    assert bytes(await storage.get(key)) == data
    # Deletes of inline keys never reach the store (the coordinator drops the bytes).
    await storage.delete_many([key, "wal/x"])
    assert await store.list() == []
    assert bytes(await storage.get(other)) == bytes(20)
