"""The read side of transactions: the last stable offset, read_committed batch lookups and
their aborted transactions, marker rows as coordinates, ListOffsets by isolation level, and
deletion coping with markers (which have no file)."""

from __future__ import annotations

from uuid import UUID

from contract_support import BIG, batch, commit, log_info, new_topic

from lakelog.coordinator import (
    BatchCoordinator,
    CommitBatch,
    DeleteRecordsRequest,
    FindBatchesRequest,
    FindBatchesResult,
    ListOffsetsRequest,
    PartitionKey,
    RetentionPolicy,
)
from lakelog.coordinator.log_types import LATEST_TIMESTAMP, MAX_TIMESTAMP
from lakelog.coordinator.txn_types import (
    CONTROL_ABORT,
    CONTROL_COMMIT,
    NO_CONTROL,
    AbortedTxn,
    InitTxnProducerRequest,
    TxnRef,
)
from lakelog.util.errors import ErrorCode

NOW = 1_000_000


class Txn:
    """A transactional producer writing to partition 0 of one topic."""

    def __init__(self, coordinator: BatchCoordinator, topic: UUID, ref: TxnRef) -> None:
        self.c = coordinator
        self.topic = topic
        self.ref = ref
        self.seq = 0

    @classmethod
    async def start(cls, c: BatchCoordinator, topic: UUID, tid: str) -> Txn:
        result = await c.init_transactional_producer(InitTxnProducerRequest(tid, 60_000), NOW)
        assert result.error == ErrorCode.none, result
        return cls(c, topic, TxnRef(tid, result.producer_id, result.producer_epoch))

    @property
    def pid(self) -> int:
        return self.ref.producer_id

    async def begin(self) -> None:
        errors = await self.c.add_partitions_to_txn(
            self.ref, [PartitionKey(self.topic, 0)], NOW, False
        )
        assert errors == [ErrorCode.none]

    def batch(self, records: int = 1, ts: int = 1_000) -> CommitBatch:
        made = batch(
            self.topic,
            records=records,
            base_ts=ts,
            pid=self.pid,
            epoch=self.ref.producer_epoch,
            seq=self.seq,
            transactional=True,
        )
        self.seq += records
        return made

    async def send(self, records: int = 1, ts: int = 1_000) -> int:
        [result] = await commit(self.c, [self.batch(records, ts)])
        assert result.error == ErrorCode.none, result
        return result.base_offset

    async def end(self, commit_: bool) -> None:
        assert await self.c.end_txn(self.ref, commit_, NOW + 5) == ErrorCode.none


async def plain(c: BatchCoordinator, t: UUID, records: int = 1, ts: int = 1_000) -> int:
    [result] = await commit(c, [batch(t, records=records, base_ts=ts)])
    assert result.error == ErrorCode.none
    return result.base_offset


async def find(
    c: BatchCoordinator, t: UUID, offset: int, committed: bool = True, max_bytes: int = BIG
) -> FindBatchesResult:
    [result] = await c.find_batches([FindBatchesRequest(t, 0, offset, max_bytes, committed)])
    return result


def spans(result: FindBatchesResult) -> list[tuple[int, int]]:
    return [(b.base_offset, b.last_offset) for b in result.batches]


async def latest(c: BatchCoordinator, t: UUID, committed: bool) -> int:
    [result] = await c.list_offsets([ListOffsetsRequest(t, 0, LATEST_TIMESTAMP, committed)])
    assert result.error == ErrorCode.none
    return result.offset


async def test_without_transactions_the_lso_is_the_high_watermark(
    coordinator: BatchCoordinator,
) -> None:
    t = await new_topic(coordinator)
    empty = await find(coordinator, t, 0)
    assert (empty.error, empty.high_watermark, empty.last_stable_offset) == (ErrorCode.none, 0, 0)
    await plain(coordinator, t, records=3)
    for committed in (False, True):
        found = await find(coordinator, t, 0, committed)
        assert (spans(found), found.last_stable_offset, list(found.aborted)) == ([(0, 2)], 3, [])
        assert await latest(coordinator, t, committed) == 3
    beyond = await find(coordinator, t, 9)
    assert (beyond.error, beyond.high_watermark, beyond.last_stable_offset) == (
        ErrorCode.offset_out_of_range,
        3,
        3,
    )
    assert (await log_info(coordinator, t)).last_stable_offset == 3


async def test_an_open_transaction_bounds_read_committed(coordinator: BatchCoordinator) -> None:
    t = await new_topic(coordinator)
    txn = await Txn.start(coordinator, t, "tx")
    await txn.begin()
    await plain(coordinator, t, records=2)  # 0-1: registered, nothing written yet
    assert (await log_info(coordinator, t)).last_stable_offset == 2
    assert await txn.send(records=3) == 2  # 2-4: the transaction's first offset
    await plain(coordinator, t)  # 5
    info = await log_info(coordinator, t)
    assert (info.high_watermark, info.last_stable_offset) == (6, 2)

    uncommitted = await find(coordinator, t, 0, committed=False)
    assert spans(uncommitted) == [(0, 1), (2, 4), (5, 5)]
    assert uncommitted.last_stable_offset == 2
    committed = await find(coordinator, t, 0)
    assert (spans(committed), committed.high_watermark, committed.last_stable_offset) == (
        [(0, 1)],
        6,
        2,
    )
    # At or past the LSO (but within the log) read_committed gets nothing, and no error.
    for offset in (2, 5, 6):
        at = await find(coordinator, t, offset)
        assert (at.error, list(at.batches), at.last_stable_offset) == (ErrorCode.none, [], 2)
    assert (await latest(coordinator, t, True), await latest(coordinator, t, False)) == (2, 6)

    await txn.end(commit_=True)
    done = await find(coordinator, t, 0)
    assert spans(done) == [(0, 1), (2, 4), (5, 5), (6, 6)]
    assert (done.high_watermark, done.last_stable_offset, list(done.aborted)) == (7, 7, [])
    assert await latest(coordinator, t, True) == 7


async def test_markers_come_back_as_control_coordinates(coordinator: BatchCoordinator) -> None:
    t = await new_topic(coordinator)
    txn = await Txn.start(coordinator, t, "tx")
    await txn.begin()
    await txn.send(records=2)
    await txn.end(commit_=True)
    await txn.begin()
    await txn.send()
    await txn.end(commit_=False)
    data, commit_marker, data2, abort_marker = (await find(coordinator, t, 0)).batches
    assert data.control_type == data2.control_type == NO_CONTROL
    assert data.object_key and data.is_transactional
    for marker, control in ((commit_marker, CONTROL_COMMIT), (abort_marker, CONTROL_ABORT)):
        assert marker.control_type == control
        assert (marker.object_key, marker.byte_size) == ("", 0)
        assert marker.base_offset == marker.last_offset
        assert (marker.producer_id, marker.producer_epoch) == (txn.pid, txn.ref.producer_epoch)
        assert marker.is_transactional
        assert marker.max_timestamp == NOW + 5
    assert (commit_marker.base_offset, abort_marker.base_offset) == (2, 4)


async def test_aborted_transactions_of_the_returned_range(coordinator: BatchCoordinator) -> None:
    t = await new_topic(coordinator)
    txn = await Txn.start(coordinator, t, "tx")
    await plain(coordinator, t)  # 0
    await txn.begin()
    await txn.send(records=2)  # 1-2
    await txn.end(commit_=False)  # marker 3
    await plain(coordinator, t)  # 4
    await txn.begin()
    await txn.send()  # 5
    await txn.end(commit_=False)  # marker 6
    await plain(coordinator, t)  # 7
    first, second = AbortedTxn(txn.pid, 1), AbortedTxn(txn.pid, 5)

    everything = await find(coordinator, t, 0)
    assert spans(everything)[-1] == (7, 7)
    assert list(everything.aborted) == [first, second]
    # read_uncommitted never lists them.
    assert list((await find(coordinator, t, 0, committed=False)).aborted) == []
    # The marker at or after the fetch offset...
    assert list((await find(coordinator, t, 3)).aborted) == [first, second]
    assert list((await find(coordinator, t, 4)).aborted) == [second]
    assert list((await find(coordinator, t, 7)).aborted) == []
    # ...and the first offset at or before the last batch returned.
    only_first_batch = await find(coordinator, t, 0, max_bytes=1)
    assert (spans(only_first_batch), list(only_first_batch.aborted)) == ([(0, 0)], [])
    up_to_data = await find(coordinator, t, 0, max_bytes=200)
    assert (spans(up_to_data), list(up_to_data.aborted)) == ([(0, 0), (1, 2)], [first])
    # Nothing returned (at the end): nothing listed.
    assert list((await find(coordinator, t, 8)).aborted) == []


async def test_the_oldest_open_transaction_sets_the_lso(coordinator: BatchCoordinator) -> None:
    t = await new_topic(coordinator)
    a = await Txn.start(coordinator, t, "a")
    b = await Txn.start(coordinator, t, "b")
    await a.begin()
    await b.begin()
    await plain(coordinator, t)  # 0
    await a.send()  # 1
    await b.send()  # 2
    await a.send()  # 3
    assert (await log_info(coordinator, t)).last_stable_offset == 1
    await a.end(commit_=False)  # marker 4; b still open from 2
    found = await find(coordinator, t, 0)
    assert (spans(found), found.last_stable_offset) == ([(0, 0), (1, 1)], 2)
    assert list(found.aborted) == [AbortedTxn(a.pid, 1)]
    await b.end(commit_=True)  # marker 5
    found = await find(coordinator, t, 0)
    assert found.last_stable_offset == found.high_watermark == 6
    assert [c.control_type for c in found.batches] == [
        -1,
        -1,
        -1,
        -1,
        CONTROL_ABORT,
        CONTROL_COMMIT,
    ]
    assert list(found.aborted) == [AbortedTxn(a.pid, 1)]


async def test_batched_requests_keep_their_own_isolation(coordinator: BatchCoordinator) -> None:
    t = await new_topic(coordinator)
    other = await new_topic(coordinator)
    txn = await Txn.start(coordinator, t, "tx")
    await txn.begin()
    await txn.send(records=2)
    await plain(coordinator, other)
    results = await coordinator.find_batches(
        [
            FindBatchesRequest(t, 0, 0, BIG, True),
            FindBatchesRequest(t, 0, 0, BIG, False),
            FindBatchesRequest(other, 0, 0, BIG, True),
        ]
    )
    assert [spans(r) for r in results] == [[], [(0, 1)], [(0, 0)]]
    assert [r.last_stable_offset for r in results] == [0, 0, 1]
    infos = await coordinator.log_info([PartitionKey(t, 0), PartitionKey(other, 0)])
    assert [i.last_stable_offset for i in infos] == [0, 1]


async def test_time_lookups_stay_below_the_lso(coordinator: BatchCoordinator) -> None:
    t = await new_topic(coordinator)
    txn = await Txn.start(coordinator, t, "tx")
    await plain(coordinator, t, ts=1_000)  # 0
    await txn.begin()
    await txn.send(ts=5_000)  # 1, open

    async def lookup(timestamp: int, committed: bool) -> int:
        [result] = await coordinator.list_offsets([ListOffsetsRequest(t, 0, timestamp, committed)])
        assert result.error == ErrorCode.none
        return result.offset

    assert (await lookup(2_000, False), await lookup(2_000, True)) == (1, -1)
    assert (await lookup(MAX_TIMESTAMP, False), await lookup(MAX_TIMESTAMP, True)) == (1, -1)
    assert await lookup(500, True) == 0
    await txn.end(commit_=True)
    assert await lookup(2_000, True) == 1


async def test_deletion_copes_with_markers(coordinator: BatchCoordinator) -> None:
    t = await new_topic(coordinator)
    txn = await Txn.start(coordinator, t, "tx")
    await txn.begin()
    await txn.send(records=2)  # 0-1
    await txn.end(commit_=False)  # marker 2
    await txn.begin()
    await txn.send()  # 3
    await txn.end(commit_=False)  # marker 4
    await plain(coordinator, t)  # 5
    # The log start inside the first aborted range keeps it listed.
    [deleted] = await coordinator.delete_records([DeleteRecordsRequest(t, 0, 1)])
    assert (deleted.error, deleted.low_watermark) == (ErrorCode.none, 1)
    assert list((await find(coordinator, t, 1)).aborted) == [
        AbortedTxn(txn.pid, 0),
        AbortedTxn(txn.pid, 3),
    ]
    # Past the first marker: the data and the marker go, the rest stays readable.
    [deleted] = await coordinator.delete_records([DeleteRecordsRequest(t, 0, 3)])
    assert deleted.low_watermark == 3
    found = await find(coordinator, t, 3)
    assert (spans(found), list(found.aborted)) == (
        [(3, 3), (4, 4), (5, 5)],
        [AbortedTxn(txn.pid, 3)],
    )
    # Retention drops markers like batches (they have no bytes and no file).
    [kept] = await coordinator.enforce_retention(
        [RetentionPolicy(t, 0, retention_ms=0, retention_bytes=-1)], NOW * 10
    )
    assert (kept.error, kept.log_start_offset, kept.batches_deleted) == (ErrorCode.none, 6, 3)
    assert list((await find(coordinator, t, 6)).batches) == []
    assert len(await coordinator.files_to_delete(2**62)) == 3  # every file emptied


async def test_deleting_a_topic_with_an_open_transaction(coordinator: BatchCoordinator) -> None:
    t = await new_topic(coordinator, name="doomed")
    txn = await Txn.start(coordinator, t, "tx")
    await txn.begin()
    await txn.send()
    await txn.end(commit_=False)
    await txn.begin()
    await txn.send()
    [gone] = await coordinator.delete_topics(["doomed"])
    assert gone.error == ErrorCode.none
    # The transaction ends with nothing left to mark; a new topic of the same name starts
    # clean, with no open transaction holding its LSO.
    assert await coordinator.end_txn(txn.ref, True, NOW) == ErrorCode.none
    again = await new_topic(coordinator, name="doomed")
    await plain(coordinator, again)
    found = await find(coordinator, again, 0)
    assert (spans(found), found.last_stable_offset, list(found.aborted)) == ([(0, 0)], 1, [])
