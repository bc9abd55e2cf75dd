"""Inline files (issue 32): a small object's bytes committed in the coordinator with its
batch rows, read back by key, counted against the caps, moved out by commit_merge and
dropped with their file row."""

from __future__ import annotations

import uuid

from contract_support import batch, log_info, new_topic, placed, read_all

from lakelog.coordinator import BatchCoordinator
from lakelog.coordinator.pipeline_types import BatchMove, MergeCommit
from lakelog.util.errors import ErrorCode

FOREVER = 1 << 60


def inline_key() -> str:
    return f"inline/{uuid.uuid4()}"


async def commit_inline(
    coordinator: BatchCoordinator,
    key: str,
    data: bytes,
    batches: list,
    broker_id: int = 1,
    broker_epoch: int = -1,
) -> list:
    laid = placed(batches)
    return await coordinator.commit_file(key, broker_id, broker_epoch, len(data), laid, inline=data)


async def test_inline_commit_stores_bytes_with_the_rows(coordinator: BatchCoordinator) -> None:
    t = await new_topic(coordinator)
    key = inline_key()
    data = bytes(range(100)) + bytes(range(50))
    results = await commit_inline(
        coordinator, key, data, [batch(t, records=2, size=100), batch(t, size=50)]
    )
    assert [r.error for r in results] == [ErrorCode.none] * 2
    assert await coordinator.inline_file(key) == data
    coords = await read_all(coordinator, t)
    assert {c.object_key for c in coords} == {key}
    assert (await log_info(coordinator, t)).high_watermark == 3
    usage = await coordinator.inline_usage(1)
    assert (usage.files, usage.total_bytes, usage.broker_bytes) == (1, 150, 150)
    assert (await coordinator.inline_usage(2)).broker_bytes == 0
    [listed] = await coordinator.inline_files()
    assert (listed.object_key, listed.size, listed.uploader_broker_id) == (key, 150, 1)
    assert await coordinator.inline_file(inline_key()) is None


async def test_many_inline_files_read_in_one_call(coordinator: BatchCoordinator) -> None:
    """The mover's read: every known key's bytes (past one statement's worth of keys),
    unknown keys left out."""
    t = await new_topic(coordinator)
    keys = []
    for i in range(600):
        key = inline_key()
        await commit_inline(coordinator, key, bytes([i % 256]) * 10, [batch(t, size=10)])
        keys.append(key)
    unknown = inline_key()
    found = await coordinator.inline_files_data([*keys, unknown])
    assert set(found) == set(keys)
    assert all(found[k] == bytes([i % 256]) * 10 for i, k in enumerate(keys))
    assert await coordinator.inline_files_data([]) == {}


async def test_a_second_commit_of_a_key_leaves_the_first_bytes(
    coordinator: BatchCoordinator,
) -> None:
    t = await new_topic(coordinator)
    key = inline_key()
    await commit_inline(coordinator, key, b"a" * 10, [batch(t, size=10)])
    again = await commit_inline(coordinator, key, b"b" * 10, [batch(t, size=10)])
    assert [r.error for r in again] == [ErrorCode.invalid_request]
    assert await coordinator.inline_file(key) == b"a" * 10


async def test_fenced_inline_commit_is_deleted_with_its_row(coordinator: BatchCoordinator) -> None:
    t = await new_topic(coordinator)
    old = await coordinator.register_broker(7, None, "127.0.0.1", 9092)
    await coordinator.register_broker(7, None, "127.0.0.1", 9092)
    key = inline_key()
    refused = await commit_inline(coordinator, key, b"x" * 10, [batch(t, size=10)], 7, old)
    assert [r.error for r in refused] == [ErrorCode.stale_broker_epoch]
    assert await coordinator.inline_files() == []  # nothing to move
    marked = [f.object_key for f in await coordinator.files_to_delete(FOREVER)]
    assert marked == [key]
    await coordinator.delete_files([key])
    assert await coordinator.inline_file(key) is None
    assert key not in await coordinator.list_files()


async def test_moved_out_then_deleted(coordinator: BatchCoordinator) -> None:
    """commit_merge swaps the rows into an object; the emptied inline file is marked, and
    delete_files drops its bytes with its row (and nothing while it is live)."""
    t = await new_topic(coordinator, partitions=2)
    a, b = inline_key(), inline_key()
    await commit_inline(coordinator, a, b"a" * 30, [batch(t, 0, size=10), batch(t, 1, size=20)])
    await commit_inline(coordinator, b, b"b" * 5, [batch(t, 0, size=5)])
    await coordinator.delete_files([a, b])  # live: not deleted
    assert await coordinator.inline_file(a) == b"a" * 30

    rows = await coordinator.file_batches([a, b])
    moves, position = [], 0
    for r in rows:
        moves.append(BatchMove(r.topic_id, r.partition, (r.source,), position, r.byte_size))
        position += r.byte_size
    new = f"wal/{uuid.uuid4()}"
    [result] = await coordinator.commit_merge([MergeCommit(new, position, moves)], True)
    assert (result.error, result.moved) == (ErrorCode.none, 3)
    for p in (0, 1):
        assert {c.object_key for c in await read_all(coordinator, t, p)} == {new}
    assert await coordinator.inline_files() == []
    assert (await coordinator.inline_usage(1)).total_bytes == 35  # until deleted
    marked = {f.object_key for f in await coordinator.files_to_delete(FOREVER)}
    assert marked == {a, b}
    await coordinator.delete_files([a, b])
    assert await coordinator.inline_file(a) is None
    assert await coordinator.inline_file(b) is None
    usage = await coordinator.inline_usage(1)
    assert (usage.files, usage.total_bytes) == (0, 0)
    assert await coordinator.list_files() == [new]
