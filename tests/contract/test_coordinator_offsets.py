"""list_offsets: earliest, latest, max timestamp, and by time."""

from __future__ import annotations

import uuid
from uuid import UUID

from contract_support import batch, commit, new_topic

from lakelog.coordinator import (
    EARLIEST_TIMESTAMP,
    LATEST_TIMESTAMP,
    MAX_TIMESTAMP,
    BatchCoordinator,
    DeleteRecordsRequest,
    ListOffsetsRequest,
    ListOffsetsResult,
    TimestampType,
)
from lakelog.util.errors import ErrorCode


async def offsets_for(coordinator: BatchCoordinator, t: UUID, timestamp: int) -> ListOffsetsResult:
    [result] = await coordinator.list_offsets([ListOffsetsRequest(t, 0, timestamp)])
    assert result.error == ErrorCode.none, result
    return result


def answer(result: ListOffsetsResult) -> tuple[int, int]:
    return result.offset, result.timestamp


async def unordered_topic(coordinator: BatchCoordinator) -> UUID:
    """Batches (offsets: max timestamp): 0-1: 100, 2-4: 300, 5: 200, 6-7: 300, 8: 250."""
    t = await new_topic(coordinator)
    await commit(
        coordinator,
        [
            batch(t, records=2, base_ts=90, max_ts=100),
            batch(t, records=3, base_ts=150, max_ts=300),
            batch(t, records=1, base_ts=200, max_ts=200),
        ],
        spaced=True,
    )
    await commit(
        coordinator,
        [batch(t, records=2, base_ts=300, max_ts=300), batch(t, records=1, base_ts=250)],
        spaced=True,
    )
    return t


async def test_earliest_and_latest(coordinator: BatchCoordinator) -> None:
    t = await unordered_topic(coordinator)
    earliest = await offsets_for(coordinator, t, EARLIEST_TIMESTAMP)
    latest = await offsets_for(coordinator, t, LATEST_TIMESTAMP)
    assert (answer(earliest), answer(latest)) == ((0, -1), (9, -1))
    assert earliest.batch is None and latest.batch is None
    await coordinator.delete_records([DeleteRecordsRequest(t, 0, 3)])
    assert answer(await offsets_for(coordinator, t, EARLIEST_TIMESTAMP)) == (3, -1)
    empty = await new_topic(coordinator)
    assert answer(await offsets_for(coordinator, empty, EARLIEST_TIMESTAMP)) == (0, -1)
    assert answer(await offsets_for(coordinator, empty, LATEST_TIMESTAMP)) == (0, -1)


async def test_max_timestamp(coordinator: BatchCoordinator) -> None:
    t = await unordered_topic(coordinator)
    # The first batch holding the largest timestamp (2-4, not 6-7); its last offset.
    result = await offsets_for(coordinator, t, MAX_TIMESTAMP)
    assert answer(result) == (4, 300)
    assert result.batch is not None
    assert (result.batch.base_offset, result.batch.last_offset) == (2, 4)
    empty = await new_topic(coordinator)
    assert answer(await offsets_for(coordinator, empty, MAX_TIMESTAMP)) == (-1, -1)


async def test_max_timestamp_after_its_batch_is_deleted(coordinator: BatchCoordinator) -> None:
    t = await new_topic(coordinator)
    await commit(
        coordinator,
        [
            batch(t, base_ts=500),
            batch(t, base_ts=100),
            batch(t, base_ts=300),
            batch(t, base_ts=300),
        ],
        spaced=True,
    )
    await coordinator.delete_records([DeleteRecordsRequest(t, 0, 1)])
    assert answer(await offsets_for(coordinator, t, MAX_TIMESTAMP)) == (2, 300)
    await coordinator.delete_records([DeleteRecordsRequest(t, 0, -1)])
    assert answer(await offsets_for(coordinator, t, MAX_TIMESTAMP)) == (-1, -1)


async def test_by_timestamp(coordinator: BatchCoordinator) -> None:
    t = await unordered_topic(coordinator)
    cases = {0: (0, 100), 100: (0, 100), 101: (2, 300), 200: (2, 300), 300: (2, 300)}
    for timestamp, expected in cases.items():
        result = await offsets_for(coordinator, t, timestamp)
        assert answer(result) == expected, timestamp
        assert result.batch is not None
        assert result.batch.base_offset == expected[0]
    late = await offsets_for(coordinator, t, 301)
    assert (late.offset, late.timestamp, late.batch) == (-1, -1, None)


async def test_by_timestamp_respects_the_log_start(coordinator: BatchCoordinator) -> None:
    t = await unordered_topic(coordinator)
    await coordinator.delete_records([DeleteRecordsRequest(t, 0, 3)])
    # Batch 2-4 still holds offset 3: it answers, but never below the log start.
    result = await offsets_for(coordinator, t, 0)
    assert answer(result) == (3, 300)
    assert result.batch is not None and result.batch.base_offset == 2

    await coordinator.delete_records([DeleteRecordsRequest(t, 0, 5)])
    # 2-4 (300) is gone; the first live batch reaching 250 is 6-7.
    assert answer(await offsets_for(coordinator, t, 250)) == (6, 300)
    assert answer(await offsets_for(coordinator, t, 150)) == (5, 200)


async def test_log_append_time_counts_as_the_timestamp(coordinator: BatchCoordinator) -> None:
    t = await new_topic(coordinator)
    [created] = await commit(coordinator, [batch(t, base_ts=10**15)])
    [appended] = await commit(
        coordinator, [batch(t, base_ts=1, ts_type=TimestampType.LOG_APPEND_TIME)]
    )
    now = appended.log_append_time
    assert answer(await offsets_for(coordinator, t, now)) == (0, 10**15)
    await coordinator.delete_records([DeleteRecordsRequest(t, 0, 1)])
    assert answer(await offsets_for(coordinator, t, 2)) == (1, now)
    assert answer(await offsets_for(coordinator, t, MAX_TIMESTAMP)) == (1, now)
    assert created.base_offset == 0


async def test_unknown_partition(coordinator: BatchCoordinator) -> None:
    results = await coordinator.list_offsets(
        [ListOffsetsRequest(uuid.uuid4(), 0, LATEST_TIMESTAMP)]
    )
    assert results[0].error == ErrorCode.unknown_topic_or_partition
