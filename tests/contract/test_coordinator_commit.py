"""commit_file: dense offsets in list order, per-batch errors, LogAppendTime, the file row,
broker-epoch fencing."""

from __future__ import annotations

import time
import uuid

from contract_support import batch, commit, log_info, new_key, new_topic, placed, read_all

from lakelog.coordinator import BatchCoordinator, CommitBatch, PartitionKey, TimestampType
from lakelog.coordinator.txn_types import InitTxnProducerRequest, TxnRef
from lakelog.util.errors import ErrorCode


async def test_offsets_are_dense_in_list_order(coordinator: BatchCoordinator) -> None:
    t = await new_topic(coordinator, partitions=2)
    first = await commit(
        coordinator,
        [batch(t, 0, records=3), batch(t, 1, records=2), batch(t, 0, records=1)],
    )
    assert [(r.error, r.base_offset) for r in first] == [
        (ErrorCode.none, 0),
        (ErrorCode.none, 0),
        (ErrorCode.none, 3),
    ]
    assert all(r.log_start_offset == 0 and not r.is_duplicate for r in first)
    second = await commit(coordinator, [batch(t, 0, records=5), batch(t, 1, records=1)])
    assert [r.base_offset for r in second] == [4, 2]

    info0, info1 = await log_info(coordinator, t, 0), await log_info(coordinator, t, 1)
    assert (info0.high_watermark, info0.byte_size) == (9, 300)
    assert (info1.high_watermark, info1.byte_size) == (3, 200)
    assert [(b.base_offset, b.last_offset) for b in await read_all(coordinator, t, 0)] == [
        (0, 2),
        (3, 3),
        (4, 8),
    ]


async def test_bad_batches_fail_alone(coordinator: BatchCoordinator) -> None:
    t = await new_topic(coordinator, partitions=1)
    results = await commit(
        coordinator,
        [
            batch(t, 0, records=2),
            batch(t, 1),
            batch(uuid.uuid4(), 0),
            batch(t, 0, records=0),
            batch(t, 0, records=3),
        ],
    )
    assert [(r.error, r.base_offset) for r in results] == [
        (ErrorCode.none, 0),
        (ErrorCode.unknown_topic_or_partition, -1),
        (ErrorCode.unknown_topic_or_partition, -1),
        (ErrorCode.corrupt_message, -1),
        (ErrorCode.none, 2),
    ]
    assert (await log_info(coordinator, t)).high_watermark == 5


async def test_byte_range_must_lie_inside_the_object(coordinator: BatchCoordinator) -> None:
    t = await new_topic(coordinator)
    inside = CommitBatch(t, 0, 0, 50, 1, 1, 1, TimestampType.CREATE_TIME)
    beyond = CommitBatch(t, 0, 60, 50, 1, 1, 1, TimestampType.CREATE_TIME)
    empty = CommitBatch(t, 0, 50, 0, 1, 1, 1, TimestampType.CREATE_TIME)
    results = await coordinator.commit_file(new_key(), 1, -1, 100, [inside, beyond, empty])
    assert [r.error for r in results] == [
        ErrorCode.none,
        ErrorCode.corrupt_message,
        ErrorCode.corrupt_message,
    ]


async def test_coordinates_round_trip(coordinator: BatchCoordinator) -> None:
    t = await new_topic(coordinator)
    key = new_key()
    # A transactional batch needs its transaction open (the commit barrier).
    init = await coordinator.init_transactional_producer(InitTxnProducerRequest("tx", 60_000), 0)
    txn = TxnRef("tx", init.producer_id, init.producer_epoch)
    assert await coordinator.add_partitions_to_txn(txn, [PartitionKey(t, 0)], 0, False) == [
        ErrorCode.none
    ]
    pid = init.producer_id
    b1 = batch(t, records=4, size=120, base_ts=10, max_ts=15, pid=pid + 1, epoch=2, seq=0)
    b2 = batch(
        t, records=1, size=80, base_ts=20, max_ts=20, transactional=True, pid=pid, epoch=0, seq=7
    )
    await commit(coordinator, [b1, b2], key=key)
    found = await read_all(coordinator, t)
    assert [
        (
            c.object_key,
            c.byte_offset,
            c.byte_size,
            c.base_offset,
            c.last_offset,
            c.base_timestamp,
            c.max_timestamp,
            c.timestamp_type,
            c.log_append_time,
            c.producer_id,
            c.producer_epoch,
            c.base_sequence,
            c.is_transactional,
        )
        for c in found
    ] == [
        (key, 0, 120, 0, 3, 10, 15, TimestampType.CREATE_TIME, -1, pid + 1, 2, 0, False),
        (key, 120, 80, 4, 4, 20, 20, TimestampType.CREATE_TIME, -1, pid, 0, 7, True),
    ]


async def test_log_append_time(coordinator: BatchCoordinator) -> None:
    t = await new_topic(coordinator)
    before = time.time_ns() // 1_000_000
    results = await commit(
        coordinator,
        [
            batch(t, base_ts=5, ts_type=TimestampType.LOG_APPEND_TIME),
            batch(t, base_ts=5, ts_type=TimestampType.CREATE_TIME),
            batch(t, base_ts=5, ts_type=TimestampType.LOG_APPEND_TIME),
        ],
    )
    after = time.time_ns() // 1_000_000
    append_time = results[0].log_append_time
    assert before <= append_time <= after
    assert results[1].log_append_time == -1
    assert results[2].log_append_time == append_time  # one commit, one time
    stored = await read_all(coordinator, t)
    assert [c.log_append_time for c in stored] == [append_time, -1, append_time]
    assert [c.max_timestamp for c in stored] == [5, 5, 5]


async def test_file_is_recorded_even_if_every_batch_fails(coordinator: BatchCoordinator) -> None:
    t = await new_topic(coordinator)
    good, bad = new_key(), new_key()
    await commit(coordinator, [batch(t)], key=good)
    before = time.time_ns() // 1_000_000
    [result] = await commit(coordinator, [batch(uuid.uuid4())], key=bad)
    assert result.error == ErrorCode.unknown_topic_or_partition
    assert sorted(await coordinator.list_files()) == sorted([good, bad])
    [marked] = await coordinator.files_to_delete(time.time_ns() // 1_000_000 + 1)
    assert marked.object_key == bad
    assert marked.size == 100
    assert marked.marked_at >= before


async def test_empty_commit_records_a_marked_file(coordinator: BatchCoordinator) -> None:
    key = new_key()
    assert await coordinator.commit_file(key, 1, -1, 0, []) == []
    assert await coordinator.list_files() == [key]
    assert [f.object_key for f in await coordinator.files_to_delete(1 << 60)] == [key]


async def test_known_object_key_changes_nothing(coordinator: BatchCoordinator) -> None:
    t = await new_topic(coordinator)
    key = new_key()
    await commit(coordinator, [batch(t, records=2)], key=key)
    again = await commit(coordinator, [batch(t, records=2), batch(t)], key=key)
    assert [r.error for r in again] == [ErrorCode.invalid_request] * 2
    assert (await log_info(coordinator, t)).high_watermark == 2
    assert await coordinator.list_files() == [key]


async def test_stale_broker_epoch_is_fenced(coordinator: BatchCoordinator) -> None:
    t = await new_topic(coordinator)
    old = await coordinator.register_broker(7, None, "127.0.0.1", 9092)
    current = await coordinator.register_broker(7, None, "127.0.0.1", 9092)
    assert current > old

    zombie_key = new_key()
    zombie = await commit(
        coordinator, [batch(t), batch(t)], key=zombie_key, broker_id=7, broker_epoch=old
    )
    assert [r.error for r in zombie] == [ErrorCode.stale_broker_epoch] * 2
    assert (await log_info(coordinator, t)).high_watermark == 0
    assert zombie_key in [f.object_key for f in await coordinator.files_to_delete(1 << 60)]

    live = await commit(coordinator, [batch(t)], broker_id=7, broker_epoch=current)
    unchecked = await commit(coordinator, [batch(t)], broker_id=7, broker_epoch=-1)
    unknown_broker = await commit(coordinator, [batch(t)], broker_id=8, broker_epoch=1)
    assert [r[0].base_offset for r in (live, unchecked, unknown_broker)] == [0, 1, 2]


async def test_commit_outcome_reads_back_what_a_commit_decided(
    coordinator: BatchCoordinator,
) -> None:
    """A commit whose answer was lost is looked up, not repeated: an unknown key means no
    commit happened; a known one gives each accepted batch the result the commit gave it,
    batches inside a run of one row included."""
    t = await new_topic(coordinator, partitions=2)
    assert await coordinator.commit_outcome(new_key()) is None
    key = new_key()
    batches = [
        batch(t, 0, records=2),
        batch(t, 0, records=3),  # joins the row of the batch before it
        batch(uuid.uuid4(), 0),  # refused: unknown topic
        batch(t, 1),
        batch(t, 0, records=3),
        batch(t, 0, records=4),  # joins again
    ]
    results = await commit(coordinator, batches, key=key)
    outcome = await coordinator.commit_outcome(key)
    assert outcome is not None
    found = outcome.results(placed(batches))
    assert found[2] is None
    for i in (0, 1, 3, 4, 5):
        got, original = found[i], results[i]
        assert got is not None and got.error == ErrorCode.none
        assert (got.base_offset, got.log_start_offset) == (
            original.base_offset,
            original.log_start_offset,
        )
    assert [found[i].base_offset for i in (0, 1, 4, 5)] == [0, 2, 5, 8]  # type: ignore[union-attr]
    # An object whose every batch was refused is known, with nothing accepted.
    refused = new_key()
    await commit(coordinator, [batch(uuid.uuid4(), 0)], key=refused)
    nothing = await coordinator.commit_outcome(refused)
    assert nothing is not None
    assert nothing.results(placed([batch(uuid.uuid4(), 0)])) == [None]
