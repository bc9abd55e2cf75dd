"""Runs: a producer's batches that lie back to back in one object and go to one partition
share one row (`commit_plan`). Which batches join and which do not, what the row says,
and how deletion, retention, lookups and transactions treat a row that holds several
batches. Results stay one per batch."""

from __future__ import annotations

from uuid import UUID

from contract_support import batch, commit, log_info, new_topic, read_all
from test_coordinator_read_committed import Txn, find, spans

from lakelog.coordinator import (
    MAX_TIMESTAMP,
    BatchCoordinate,
    BatchCoordinator,
    DeleteRecordsRequest,
    ListOffsetsRequest,
    RetentionPolicy,
    TimestampType,
)
from lakelog.coordinator.commit_plan import RUN_MAX_BATCHES, RUN_MAX_BYTES
from lakelog.coordinator.txn_types import AbortedTxn
from lakelog.util.errors import ErrorCode


def rows(coords: list[BatchCoordinate]) -> list[tuple[int, int, int, int]]:
    """(base offset, last offset, byte offset, byte size) of each row."""
    return [(c.base_offset, c.last_offset, c.byte_offset, c.byte_size) for c in coords]


async def test_which_batches_share_a_row(coordinator: BatchCoordinator) -> None:
    t = await new_topic(coordinator, partitions=2)
    lat = TimestampType.LOG_APPEND_TIME
    batches = [
        batch(t, 0, records=2, size=10, base_ts=50, max_ts=70),  # 0-1  row A
        batch(t, 0, records=3, size=20, base_ts=60, max_ts=90),  # 2-4  joins A
        batch(t, 0, records=1, size=30, base_ts=80, max_ts=80),  # 5    joins A
        batch(t, 0, size=10, pid=7, epoch=0, seq=0),  # 6: another producer: row B
        batch(t, 0, size=10, pid=7, epoch=0, seq=1),  # 7: joins B
        batch(t, 0, size=10, pid=7, epoch=1, seq=0),  # 8: a new epoch: row C
        batch(t, 0, size=10, pid=7, epoch=1, seq=5),  # refused (a gap)
        batch(t, 0, size=10, pid=7, epoch=1, seq=1),  # 9: after a refused one: row D
        batch(t, 1, size=10),  # p1 0: row E
        batch(t, 0, size=10),  # 10: not next to 9's bytes: row F
        batch(t, 0, size=10, ts_type=lat),  # 11: LogAppendTime: row G
        batch(t, 0, size=10, ts_type=lat),  # 12: joins G
    ]
    results = await commit(coordinator, batches)
    assert [(r.error, r.base_offset) for r in results] == [
        (ErrorCode.none, 0),
        (ErrorCode.none, 2),
        (ErrorCode.none, 5),
        (ErrorCode.none, 6),
        (ErrorCode.none, 7),
        (ErrorCode.none, 8),
        (ErrorCode.out_of_order_sequence_number, -1),
        (ErrorCode.none, 9),
        (ErrorCode.none, 0),
        (ErrorCode.none, 10),
        (ErrorCode.none, 11),
        (ErrorCode.none, 12),
    ]
    stored = await read_all(coordinator, t, 0)
    assert rows(stored) == [
        (0, 5, 0, 60),
        (6, 7, 60, 20),
        (8, 8, 80, 10),
        (9, 9, 100, 10),
        (10, 10, 120, 10),
        (11, 12, 130, 20),
    ]
    run = stored[0]
    # The first batch's base timestamp and producer fields, the run's largest timestamp.
    assert (run.base_timestamp, run.max_timestamp, run.producer_id) == (50, 90, -1)
    assert (stored[1].producer_id, stored[1].producer_epoch, stored[1].base_sequence) == (7, 0, 0)
    assert stored[5].log_append_time == results[10].log_append_time > 0
    assert rows(await read_all(coordinator, t, 1)) == [(0, 0, 110, 10)]
    info = await log_info(coordinator, t, 0)
    assert (info.high_watermark, info.byte_size) == (13, 130)


async def test_a_run_stops_growing_at_its_size_cap(coordinator: BatchCoordinator) -> None:
    t = await new_topic(coordinator)
    third = RUN_MAX_BYTES // 3
    results = await commit(coordinator, [batch(t, size=third)] * 5)
    assert [r.base_offset for r in results] == [0, 1, 2, 3, 4]
    assert rows(await read_all(coordinator, t)) == [
        (0, 2, 0, 3 * third),
        (3, 4, 3 * third, 2 * third),
    ]


async def test_a_run_stops_growing_at_its_batch_cap(coordinator: BatchCoordinator) -> None:
    t = await new_topic(coordinator)
    results = await commit(coordinator, [batch(t, size=61)] * (RUN_MAX_BATCHES + 3))
    assert [r.base_offset for r in results] == list(range(RUN_MAX_BATCHES + 3))
    assert rows(await read_all(coordinator, t)) == [
        (0, RUN_MAX_BATCHES - 1, 0, 61 * RUN_MAX_BATCHES),
        (RUN_MAX_BATCHES, RUN_MAX_BATCHES + 2, 61 * RUN_MAX_BATCHES, 61 * 3),
    ]


async def test_retried_batches_of_a_run_are_duplicates(coordinator: BatchCoordinator) -> None:
    """A broker that lost the answer sends the object's batches again in a new object:
    each one is recognised, those that were inside a run too."""
    t = await new_topic(coordinator)
    sent = [batch(t, records=2, pid=3, epoch=0, seq=2 * i) for i in range(4)]
    first = await commit(coordinator, sent)
    again = await commit(coordinator, sent)
    assert [(r.base_offset, r.is_duplicate) for r in again] == [
        (r.base_offset, True) for r in first
    ]
    assert rows(await read_all(coordinator, t)) == [(0, 7, 0, 400)]


async def test_deletion_and_retention_keep_a_run_while_it_holds_a_live_offset(
    coordinator: BatchCoordinator,
) -> None:
    t = await new_topic(coordinator)
    # Row 0-5 (batches @1000, @1000, @3000), row 6-7 (@2000, @4000).
    await commit(
        coordinator,
        [
            batch(t, records=2, base_ts=1000),
            batch(t, base_ts=1000),
            batch(t, records=3, base_ts=3000),
        ],
    )
    await commit(coordinator, [batch(t, base_ts=2000), batch(t, base_ts=4000)])
    assert rows(await read_all(coordinator, t)) == [(0, 5, 0, 300), (6, 7, 0, 200)]

    [deleted] = await coordinator.delete_records([DeleteRecordsRequest(t, 0, 4)])
    assert deleted.low_watermark == 4
    # The log start falls inside the first row: it stays, and a read from there gets it.
    assert spans(await find(coordinator, t, 4)) == [(0, 5), (6, 7)]
    assert (await log_info(coordinator, t)).byte_size == 500

    # A row expires with its newest batch: the second row's 2000 does not make it old.
    [kept] = await coordinator.enforce_retention([RetentionPolicy(t, 0, 1000, -1)], 3500)
    assert (kept.log_start_offset, kept.batches_deleted) == (4, 0)
    [gone] = await coordinator.enforce_retention([RetentionPolicy(t, 0, 1000, -1)], 4001)
    assert (gone.log_start_offset, gone.batches_deleted, gone.bytes_deleted) == (6, 1, 300)
    [rest] = await coordinator.enforce_retention([RetentionPolicy(t, 0, -1, 0)], 0)
    assert (rest.log_start_offset, rest.batches_deleted, rest.bytes_deleted) == (8, 1, 200)


async def _list(c: BatchCoordinator, t: UUID, timestamp: int) -> tuple[int, int, int]:
    [r] = await c.list_offsets([ListOffsetsRequest(t, 0, timestamp)])
    assert r.error == ErrorCode.none and r.batch is not None
    return r.offset, r.timestamp, r.batch.base_offset


async def test_time_lookups_answer_with_the_row(coordinator: BatchCoordinator) -> None:
    """The coordinator answers a time lookup with the first row that reaches the time (its
    largest timestamp); ListOffsets reads that row to find the record."""
    t = await new_topic(coordinator)
    await commit(coordinator, [batch(t, base_ts=100), batch(t, records=2, base_ts=300)])  # 0-2
    await commit(coordinator, [batch(t, base_ts=200), batch(t, base_ts=250)])  # 3-4
    assert await _list(coordinator, t, 150) == (0, 300, 0)
    assert await _list(coordinator, t, MAX_TIMESTAMP) == (2, 300, 0)
    await coordinator.delete_records([DeleteRecordsRequest(t, 0, 2)])
    assert await _list(coordinator, t, 150) == (2, 300, 0)  # never below the log start
    await coordinator.delete_records([DeleteRecordsRequest(t, 0, 3)])
    assert await _list(coordinator, t, 150) == (3, 250, 3)


async def test_a_transactions_batches_share_a_row(coordinator: BatchCoordinator) -> None:
    t = await new_topic(coordinator)
    txn = await Txn.start(coordinator, t, "tx")
    await txn.begin()
    results = await commit(coordinator, [txn.batch(2), txn.batch(), txn.batch()])
    assert [r.base_offset for r in results] == [0, 2, 3]
    # Open: read_committed stops before the row, read_uncommitted gets it whole.
    assert spans(await find(coordinator, t, 0)) == []
    assert spans(await find(coordinator, t, 0, committed=False)) == [(0, 3)]
    await txn.end(commit_=False)
    everything = await find(coordinator, t, 0)
    assert spans(everything) == [(0, 3), (4, 4)]
    assert list(everything.aborted) == [AbortedTxn(txn.pid, 0)]
    assert everything.batches[0].is_transactional
