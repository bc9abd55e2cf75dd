"""Idempotent producers: duplicates, gaps, epochs, wrap-around, checks within one object."""

from __future__ import annotations

from uuid import UUID

from contract_support import batch, commit, log_info, new_topic

from lakelog.coordinator import BatchCoordinator, CommitBatch, CommitBatchResult
from lakelog.util.errors import ErrorCode

PID = 4242


def pbatch(t: UUID, seq: int, records: int = 1, epoch: int = 0, partition: int = 0) -> CommitBatch:
    return batch(t, partition, records=records, pid=PID, epoch=epoch, seq=seq)


async def one(coordinator: BatchCoordinator, b: CommitBatch) -> CommitBatchResult:
    [result] = await commit(coordinator, [b])
    return result


async def test_in_sequence_batches_are_accepted(coordinator: BatchCoordinator) -> None:
    t = await new_topic(coordinator)
    assert (await one(coordinator, pbatch(t, 0, records=3))).base_offset == 0
    assert (await one(coordinator, pbatch(t, 3, records=2))).base_offset == 3
    assert (await one(coordinator, batch(t))).base_offset == 5  # no producer: no checks
    assert (await one(coordinator, pbatch(t, 5))).base_offset == 6


async def test_duplicate_returns_original_offset_and_changes_nothing(
    coordinator: BatchCoordinator,
) -> None:
    t = await new_topic(coordinator)
    await one(coordinator, batch(t, records=10))
    first = await one(coordinator, pbatch(t, 0, records=3))
    await one(coordinator, pbatch(t, 3, records=2))
    before = await log_info(coordinator, t)
    files_before = set(await coordinator.list_files())

    dup = await one(coordinator, pbatch(t, 0, records=3))
    assert (dup.error, dup.base_offset, dup.is_duplicate) == (
        ErrorCode.none,
        first.base_offset,
        True,
    )
    assert dup.log_start_offset == 0
    after = await log_info(coordinator, t)
    assert (after.high_watermark, after.byte_size) == (before.high_watermark, before.byte_size)
    # The duplicate's object holds no live batch: it is garbage.
    new_files = set(await coordinator.list_files()) - files_before
    marked = {f.object_key for f in await coordinator.files_to_delete(1 << 60)}
    assert new_files <= marked
    # The producer continues after its last real batch.
    assert (await one(coordinator, pbatch(t, 5))).base_offset == 15


async def test_only_the_last_five_batches_are_remembered(coordinator: BatchCoordinator) -> None:
    t = await new_topic(coordinator)
    offsets = [(await one(coordinator, pbatch(t, seq))).base_offset for seq in range(6)]
    assert offsets == list(range(6))
    for seq in range(1, 6):
        dup = await one(coordinator, pbatch(t, seq))
        assert (dup.is_duplicate, dup.base_offset) == (True, offsets[seq])
    forgotten = await one(coordinator, pbatch(t, 0))
    assert forgotten.error == ErrorCode.out_of_order_sequence_number
    # A batch must match a remembered one exactly (base and last sequence).
    overlapping = await one(coordinator, pbatch(t, 4, records=2))
    assert overlapping.error == ErrorCode.out_of_order_sequence_number


async def test_gap_is_out_of_order(coordinator: BatchCoordinator) -> None:
    t = await new_topic(coordinator)
    await one(coordinator, pbatch(t, 0, records=2))
    gap = await one(coordinator, pbatch(t, 3))
    assert (gap.error, gap.base_offset) == (ErrorCode.out_of_order_sequence_number, -1)
    assert (await log_info(coordinator, t)).high_watermark == 2
    assert (await one(coordinator, pbatch(t, 2))).base_offset == 2


async def test_unseen_producer_may_start_anywhere(coordinator: BatchCoordinator) -> None:
    t = await new_topic(coordinator, partitions=2)
    assert (await one(coordinator, pbatch(t, 1000))).error == ErrorCode.none
    # Producer state is per partition.
    assert (await one(coordinator, pbatch(t, 77, partition=1))).error == ErrorCode.none
    assert (await one(coordinator, pbatch(t, 1001))).error == ErrorCode.none
    assert (await one(coordinator, pbatch(t, 78, partition=1))).error == ErrorCode.none


async def test_epochs(coordinator: BatchCoordinator) -> None:
    t = await new_topic(coordinator)
    await one(coordinator, pbatch(t, 0, records=5, epoch=3))
    stale = await one(coordinator, pbatch(t, 5, epoch=2))
    assert stale.error == ErrorCode.invalid_producer_epoch
    stale_dup = await one(coordinator, pbatch(t, 0, records=5, epoch=2))
    assert stale_dup.error == ErrorCode.invalid_producer_epoch
    wrong_start = await one(coordinator, pbatch(t, 5, epoch=4))
    assert wrong_start.error == ErrorCode.out_of_order_sequence_number

    bumped = await one(coordinator, pbatch(t, 0, epoch=4))
    assert (bumped.error, bumped.base_offset, bumped.is_duplicate) == (ErrorCode.none, 5, False)
    # The old epoch's batches are forgotten; the new epoch continues from its own sequence.
    assert (await one(coordinator, pbatch(t, 1, epoch=4))).base_offset == 6
    assert (await one(coordinator, pbatch(t, 0, epoch=4))).is_duplicate
    assert (await one(coordinator, pbatch(t, 5, epoch=3))).error == (
        ErrorCode.invalid_producer_epoch
    )


async def test_sequence_wraps_at_2_pow_31(coordinator: BatchCoordinator) -> None:
    top = 2**31 - 1
    t = await new_topic(coordinator)
    await one(coordinator, pbatch(t, top - 1, records=2))  # ends exactly at the top
    assert (await one(coordinator, pbatch(t, 0, records=3))).base_offset == 2

    crossing = pbatch(t, top - 1, records=4)  # a batch may cross the wrap: top-1, top, 0, 1
    assert crossing.last_sequence == 1
    fresh = await new_topic(coordinator)
    await one(coordinator, pbatch(fresh, top - 2))
    assert (await one(coordinator, pbatch(fresh, top - 1, records=4))).error == ErrorCode.none
    after = await one(coordinator, pbatch(fresh, 2))
    assert (after.error, after.base_offset) == (ErrorCode.none, 5)
    assert (await one(coordinator, pbatch(fresh, top - 1, records=4))).is_duplicate


async def test_batches_in_one_object_are_checked_in_order(coordinator: BatchCoordinator) -> None:
    t = await new_topic(coordinator)
    results = await commit(
        coordinator,
        [
            pbatch(t, 0, records=2),
            pbatch(t, 2, records=2),
            pbatch(t, 0, records=2),  # duplicate of the first, same object
            pbatch(t, 9),  # gap
            pbatch(t, 4),
            pbatch(t, 0, epoch=1),  # new epoch
            pbatch(t, 1, epoch=0),  # now stale
            pbatch(t, 1, epoch=1),
        ],
    )
    assert [(r.error, r.base_offset, r.is_duplicate) for r in results] == [
        (ErrorCode.none, 0, False),
        (ErrorCode.none, 2, False),
        (ErrorCode.none, 0, True),
        (ErrorCode.out_of_order_sequence_number, -1, False),
        (ErrorCode.none, 4, False),
        (ErrorCode.none, 5, False),
        (ErrorCode.invalid_producer_epoch, -1, False),
        (ErrorCode.none, 6, False),
    ]
    assert (await log_info(coordinator, t)).high_watermark == 7
    # The state written at the end of the object is what the next object sees.
    assert (await one(coordinator, pbatch(t, 2, epoch=1))).base_offset == 7
    assert (await one(coordinator, pbatch(t, 1, epoch=1))).is_duplicate


async def test_producer_state_is_forgotten_below_the_log_start(
    coordinator: BatchCoordinator,
) -> None:
    from lakelog.coordinator import DeleteRecordsRequest

    t = await new_topic(coordinator)
    await one(coordinator, pbatch(t, 0, records=2))
    [deleted] = await coordinator.delete_records([DeleteRecordsRequest(t, 0, -1)])
    assert deleted.low_watermark == 2
    # As in Kafka, a producer whose batches all fell below the log start is unseen again.
    resumed = await one(coordinator, pbatch(t, 50))
    assert (resumed.error, resumed.base_offset) == (ErrorCode.none, 2)
