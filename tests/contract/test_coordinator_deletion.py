"""DeleteRecords, retention, topic deletion, and the file lifecycle they drive: files lose
live batches, get marked for deletion, and are forgotten after the cleaner ran."""

from __future__ import annotations

import time
import uuid
from uuid import UUID

from contract_support import batch, commit, log_info, new_key, new_topic, read_all

from lakelog.coordinator import (
    BatchCoordinator,
    DeleteRecordsRequest,
    RetentionPolicy,
    RetentionResult,
    TimestampType,
)
from lakelog.util.errors import ErrorCode

FOREVER = 1 << 60


async def marked(coordinator: BatchCoordinator) -> set[str]:
    return {f.object_key for f in await coordinator.files_to_delete(FOREVER)}


async def test_delete_records(coordinator: BatchCoordinator) -> None:
    t = await new_topic(coordinator)
    a, b = new_key(), new_key()
    # 0-2, 3-5
    await commit(coordinator, [batch(t, records=3), batch(t, records=3)], key=a, spaced=True)
    await commit(coordinator, [batch(t, records=3)], key=b)  # 6-8

    results = await coordinator.delete_records(
        [
            DeleteRecordsRequest(t, 0, 10),
            DeleteRecordsRequest(t, 0, -2),
            DeleteRecordsRequest(t, 1, 0),
            DeleteRecordsRequest(uuid.uuid4(), 0, 0),
        ]
    )
    assert [r.error for r in results] == [
        ErrorCode.offset_out_of_range,
        ErrorCode.offset_out_of_range,
        ErrorCode.unknown_topic_or_partition,
        ErrorCode.unknown_topic_or_partition,
    ]

    [r] = await coordinator.delete_records([DeleteRecordsRequest(t, 0, 4)])
    assert (r.error, r.low_watermark) == (ErrorCode.none, 4)
    # 0-2 is dropped; 3-5 holds the log start and stays.
    assert [c.base_offset for c in await read_all(coordinator, t)] == [3, 6]
    info = await log_info(coordinator, t)
    assert (info.log_start_offset, info.high_watermark, info.byte_size) == (4, 9, 200)
    assert await marked(coordinator) == set()

    [r] = await coordinator.delete_records([DeleteRecordsRequest(t, 0, 2)])
    assert (r.error, r.low_watermark) == (ErrorCode.none, 4)  # never lowered

    [r] = await coordinator.delete_records([DeleteRecordsRequest(t, 0, 6)])
    assert r.low_watermark == 6
    assert await marked(coordinator) == {a}

    [r] = await coordinator.delete_records([DeleteRecordsRequest(t, 0, -1)])
    assert r.low_watermark == 9
    assert await marked(coordinator) == {a, b}
    info = await log_info(coordinator, t)
    assert (info.log_start_offset, info.high_watermark, info.byte_size) == (9, 9, 0)
    assert await read_all(coordinator, t) == []

    # Producing continues at the high watermark.
    [after] = await commit(coordinator, [batch(t)])
    assert (after.base_offset, after.log_start_offset) == (9, 9)


async def test_shared_file_is_marked_only_when_all_its_batches_are_gone(
    coordinator: BatchCoordinator,
) -> None:
    t1, t2 = await new_topic(coordinator, name="one"), await new_topic(coordinator, name="two")
    shared = new_key()
    await commit(coordinator, [batch(t1), batch(t2), batch(t1)], key=shared)
    await coordinator.delete_records([DeleteRecordsRequest(t1, 0, -1)])
    assert await marked(coordinator) == set()
    [deleted] = await coordinator.delete_topics(["two"])
    assert deleted.error == ErrorCode.none
    assert await marked(coordinator) == {shared}


async def test_delete_topic_marks_its_files(coordinator: BatchCoordinator) -> None:
    t = await new_topic(coordinator, partitions=2, name="gone")
    other = await new_topic(coordinator, name="kept")
    only_gone, mixed = new_key(), new_key()
    await commit(coordinator, [batch(t, 0), batch(t, 1)], key=only_gone)
    await commit(coordinator, [batch(t, 1), batch(other)], key=mixed)
    before = time.time_ns() // 1_000_000
    await coordinator.delete_topics(["gone"])
    files = await coordinator.files_to_delete(FOREVER)
    assert [f.object_key for f in files] == [only_gone]
    assert files[0].marked_at >= before
    assert [c.object_key for c in await read_all(coordinator, other)] == [mixed]


async def test_files_to_delete_and_delete_files(coordinator: BatchCoordinator) -> None:
    t = await new_topic(coordinator)
    first, second, live = new_key(), new_key(), new_key()
    await commit(coordinator, [batch(t, size=10)], key=first)
    await commit(coordinator, [batch(t, size=20)], key=second)
    await coordinator.delete_records([DeleteRecordsRequest(t, 0, 1)])
    time.sleep(0.005)
    between = time.time_ns() // 1_000_000
    time.sleep(0.005)
    await coordinator.delete_records([DeleteRecordsRequest(t, 0, 2)])
    await commit(coordinator, [batch(t, size=30)], key=live)

    assert [(f.object_key, f.size) for f in await coordinator.files_to_delete(between)] == [
        (first, 10)
    ]
    everything = await coordinator.files_to_delete(FOREVER)
    assert [f.object_key for f in everything] == [first, second]
    assert everything[0].marked_at < between < everything[1].marked_at

    # Only marked files are forgotten; unknown keys are ignored.
    await coordinator.delete_files([first, live, "wal/unknown"])
    assert sorted(await coordinator.list_files()) == sorted([second, live])
    assert [f.object_key for f in await coordinator.files_to_delete(FOREVER)] == [second]
    await coordinator.delete_files([second])
    assert await coordinator.list_files() == [live]
    assert [c.object_key for c in await read_all(coordinator, t)] == [live]


async def retain(
    coordinator: BatchCoordinator, t: UUID, now: int, ms: int = -1, size: int = -1
) -> RetentionResult:
    [result] = await coordinator.enforce_retention([RetentionPolicy(t, 0, ms, size)], now)
    assert result.error == ErrorCode.none, result
    return result


async def aged_topic(coordinator: BatchCoordinator) -> UUID:
    """Offsets 0-1 @1000 100B, 2 @3000 100B, 3-5 @2000 100B, 6 @4000 100B."""
    t = await new_topic(coordinator)
    await commit(
        coordinator, [batch(t, records=2, base_ts=1000), batch(t, base_ts=3000)], spaced=True
    )
    await commit(
        coordinator, [batch(t, records=3, base_ts=2000), batch(t, base_ts=4000)], spaced=True
    )
    return t


async def test_retention_by_time(coordinator: BatchCoordinator) -> None:
    t = await aged_topic(coordinator)
    unlimited = await retain(coordinator, t, now=10**9)
    assert (unlimited.log_start_offset, unlimited.batches_deleted) == (0, 0)
    # Expired: timestamp < now - retention.ms. Only leading batches go: 3-5 is older than
    # the cutoff but waits behind 2.
    result = await retain(coordinator, t, now=3500, ms=1000)
    assert (result.log_start_offset, result.batches_deleted, result.bytes_deleted) == (2, 1, 100)
    assert (await log_info(coordinator, t)).byte_size == 300
    result = await retain(coordinator, t, now=4001, ms=1000)
    assert (result.log_start_offset, result.batches_deleted) == (6, 2)
    result = await retain(coordinator, t, now=5001, ms=1000)
    assert (result.log_start_offset, result.batches_deleted, result.bytes_deleted) == (7, 1, 100)
    info = await log_info(coordinator, t)
    assert (info.log_start_offset, info.high_watermark, info.byte_size) == (7, 7, 0)
    assert len(await marked(coordinator)) == 2


async def test_retention_by_size(coordinator: BatchCoordinator) -> None:
    t = await aged_topic(coordinator)
    # 400 bytes; keep dropping while size - first batch >= retention.bytes.
    assert (await retain(coordinator, t, now=0, size=400)).batches_deleted == 0
    result = await retain(coordinator, t, now=0, size=250)
    assert (result.log_start_offset, result.batches_deleted, result.bytes_deleted) == (2, 1, 100)
    result = await retain(coordinator, t, now=0, size=100)
    assert (result.log_start_offset, result.batches_deleted, result.bytes_deleted) == (6, 2, 200)
    result = await retain(coordinator, t, now=0, size=0)
    assert (result.log_start_offset, result.batches_deleted) == (7, 1)


async def test_retention_never_lowers_the_log_start(coordinator: BatchCoordinator) -> None:
    t = await aged_topic(coordinator)
    await coordinator.delete_records([DeleteRecordsRequest(t, 0, 4)])  # inside 3-5
    result = await retain(coordinator, t, now=2500, ms=1000)  # nothing is old enough
    assert (result.log_start_offset, result.batches_deleted) == (4, 0)
    result = await retain(coordinator, t, now=3001, ms=1000)  # 3-5 expires
    assert (result.log_start_offset, result.batches_deleted) == (6, 1)


async def test_retention_uses_log_append_time(coordinator: BatchCoordinator) -> None:
    t = await new_topic(coordinator)
    [r] = await commit(coordinator, [batch(t, base_ts=1, ts_type=TimestampType.LOG_APPEND_TIME)])
    assert (await retain(coordinator, t, now=r.log_append_time + 10, ms=100)).batches_deleted == 0
    assert (await retain(coordinator, t, now=r.log_append_time + 101, ms=100)).batches_deleted == 1


async def test_retention_unknown_partition(coordinator: BatchCoordinator) -> None:
    [result] = await coordinator.enforce_retention([RetentionPolicy(uuid.uuid4(), 0, 1, 1)], 0)
    assert result.error == ErrorCode.unknown_topic_or_partition
