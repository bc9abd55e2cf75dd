"""find_batches and log_info: where a fetch starts, how much it gets, its bounds."""

from __future__ import annotations

import uuid
from uuid import UUID

from contract_support import batch, commit, new_topic

from lakelog.coordinator import (
    BatchCoordinator,
    DeleteRecordsRequest,
    FindBatchesRequest,
    FindBatchesResult,
    PartitionKey,
)
from lakelog.util.errors import ErrorCode


async def find(
    coordinator: BatchCoordinator, t: UUID, offset: int, max_bytes: int = 1 << 30
) -> FindBatchesResult:
    [result] = await coordinator.find_batches([FindBatchesRequest(t, 0, offset, max_bytes)])
    return result


async def five_batches(coordinator: BatchCoordinator) -> UUID:
    """Offsets 0-1, 2-4, 5, 6-9, 10 with sizes 100, 200, 300, 400, 500."""
    t = await new_topic(coordinator)
    await commit(
        coordinator, [batch(t, records=2, size=100), batch(t, records=3, size=200)], spaced=True
    )
    await commit(coordinator, [batch(t, records=1, size=300)])
    await commit(
        coordinator, [batch(t, records=4, size=400), batch(t, records=1, size=500)], spaced=True
    )
    return t


def spans(result: FindBatchesResult) -> list[tuple[int, int]]:
    return [(b.base_offset, b.last_offset) for b in result.batches]


async def test_starts_at_the_batch_holding_the_offset(coordinator: BatchCoordinator) -> None:
    t = await five_batches(coordinator)
    everything = await find(coordinator, t, 0)
    assert spans(everything) == [(0, 1), (2, 4), (5, 5), (6, 9), (10, 10)]
    assert (everything.error, everything.log_start_offset, everything.high_watermark) == (
        ErrorCode.none,
        0,
        11,
    )
    assert spans(await find(coordinator, t, 3)) == [(2, 4), (5, 5), (6, 9), (10, 10)]
    assert spans(await find(coordinator, t, 4)) == [(2, 4), (5, 5), (6, 9), (10, 10)]
    assert spans(await find(coordinator, t, 10)) == [(10, 10)]


async def test_max_bytes(coordinator: BatchCoordinator) -> None:
    t = await five_batches(coordinator)
    # Stop once the sizes reach max_bytes; the first batch always comes.
    assert spans(await find(coordinator, t, 0, 300)) == [(0, 1), (2, 4)]
    assert spans(await find(coordinator, t, 0, 301)) == [(0, 1), (2, 4), (5, 5)]
    assert spans(await find(coordinator, t, 6, 1)) == [(6, 9)]
    assert spans(await find(coordinator, t, 2, 0)) == [(2, 4)]


async def test_offset_at_high_watermark_is_empty(coordinator: BatchCoordinator) -> None:
    t = await five_batches(coordinator)
    at_end = await find(coordinator, t, 11)
    assert (at_end.error, list(at_end.batches), at_end.high_watermark) == (ErrorCode.none, [], 11)
    empty = await new_topic(coordinator)
    nothing = await find(coordinator, empty, 0)
    assert (nothing.error, list(nothing.batches), nothing.high_watermark) == (
        ErrorCode.none,
        [],
        0,
    )


async def test_out_of_range(coordinator: BatchCoordinator) -> None:
    t = await five_batches(coordinator)
    beyond = await find(coordinator, t, 12)
    assert (beyond.error, list(beyond.batches)) == (ErrorCode.offset_out_of_range, [])
    assert (beyond.log_start_offset, beyond.high_watermark) == (0, 11)
    assert (await find(coordinator, t, -1)).error == ErrorCode.offset_out_of_range

    await coordinator.delete_records([DeleteRecordsRequest(t, 0, 3)])
    below = await find(coordinator, t, 2)
    assert (below.error, below.log_start_offset, below.high_watermark) == (
        ErrorCode.offset_out_of_range,
        3,
        11,
    )
    # The log start falls inside a batch: that batch is still served whole.
    at_start = await find(coordinator, t, 3)
    assert spans(at_start)[0] == (2, 4)


async def test_unknown_partition(coordinator: BatchCoordinator) -> None:
    t = await new_topic(coordinator)
    results = await coordinator.find_batches(
        [FindBatchesRequest(t, 1, 0, 100), FindBatchesRequest(uuid.uuid4(), 0, 0, 100)]
    )
    assert [r.error for r in results] == [ErrorCode.unknown_topic_or_partition] * 2


async def test_log_info(coordinator: BatchCoordinator) -> None:
    t = await five_batches(coordinator)
    infos = await coordinator.log_info([PartitionKey(t, 0), PartitionKey(t, 1)])
    assert [(i.error, i.log_start_offset, i.high_watermark, i.byte_size) for i in infos] == [
        (ErrorCode.none, 0, 11, 1500),
        (ErrorCode.unknown_topic_or_partition, -1, -1, 0),
    ]
