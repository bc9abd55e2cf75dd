"""The read_committed filter: Kafka's consumer rule for aborted transactions, as a pure
function over batch coordinates."""

from __future__ import annotations

from dataclasses import dataclass

from lakelog.spark.aborted import AbortedFilter, committed_batches


@dataclass(frozen=True)
class Batch:
    base_offset: int
    last_offset: int
    producer_id: int = -1
    is_transactional: bool = False
    control_type: int = -1


@dataclass(frozen=True)
class Aborted:
    producer_id: int
    first_offset: int


def data(base: int, last: int, pid: int = -1) -> Batch:
    return Batch(base, last, pid, pid >= 0)


def abort(offset: int, pid: int) -> Batch:
    return Batch(offset, offset, pid, True, 0)


def commit(offset: int, pid: int) -> Batch:
    return Batch(offset, offset, pid, True, 1)


def test_aborted_transaction_records_and_all_markers_are_dropped() -> None:
    log = [
        data(0, 4, pid=7),  # committed txn of 7
        commit(5, 7),
        data(6, 9, pid=7),  # aborted txn of 7
        data(10, 12),  # plain producer, interleaved
        data(13, 14, pid=8),  # committed txn of 8, interleaved with 7's aborted one
        data(15, 16, pid=7),  # still 7's aborted txn
        abort(17, 7),
        commit(18, 8),
        data(19, 20, pid=7),  # 7's next txn, committed
        commit(21, 7),
    ]
    kept = committed_batches(log, [Aborted(7, 6)])
    assert [b.base_offset for b in kept] == [0, 10, 13, 19]


def test_no_aborted_transactions_keeps_every_data_batch() -> None:
    log = [data(0, 1, pid=3), commit(2, 3), data(3, 5)]
    assert committed_batches(log, []) == [log[0], log[2]]


def test_two_aborted_transactions_of_one_producer() -> None:
    log = [
        data(0, 1, pid=5),
        abort(2, 5),
        data(3, 4, pid=5),
        commit(5, 5),
        data(6, 6, pid=5),
        abort(7, 5),
    ]
    kept = committed_batches(log, [Aborted(5, 6), Aborted(5, 0)])
    assert [b.base_offset for b in kept] == [3]


def test_transaction_begun_before_the_read_range_is_still_filtered() -> None:
    # Reading from offset 10; the aborted transaction of 4 began at 2.
    log = [data(10, 11, pid=4), data(12, 12), abort(13, 4)]
    assert [b.base_offset for b in committed_batches(log, [Aborted(4, 2)])] == [12]


def test_state_carries_over_pages_and_repeats_are_ignored() -> None:
    keep = AbortedFilter()
    # page 1: the aborted transaction starts; its marker is in a later page
    keep.add([Aborted(9, 0)])
    assert [keep.keep(b) for b in (data(0, 1, pid=9), data(2, 3))] == [False, True]
    # page 2 reports the same transaction again, then its marker and a new committed one
    keep.add([Aborted(9, 0)])
    page = [data(4, 5, pid=9), abort(6, 9), data(7, 8, pid=9), commit(9, 9)]
    assert [keep.keep(b) for b in page] == [False, False, True, False]
    # page 3: the repeat must not re-open the finished transaction
    keep.add([Aborted(9, 0)])
    assert keep.keep(data(10, 11, pid=9)) is True


def test_non_transactional_batches_of_an_aborting_producer_id_are_kept() -> None:
    # An idempotent (non-transactional) batch is never part of a transaction.
    log = [Batch(0, 1, 6, False), abort(2, 6)]
    assert committed_batches(log, [Aborted(6, 0)]) == [log[0]]
