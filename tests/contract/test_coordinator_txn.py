"""Transactions in the batch coordinator: producer ids and epochs, adding partitions and
groups, ending with markers, staged offsets, timeouts, and the commit barrier."""

from __future__ import annotations

from uuid import UUID

from contract_support import batch, commit, log_info, new_topic

from lakelog.coordinator import BatchCoordinator, CommitBatch, PartitionKey
from lakelog.coordinator.group_types import OffsetCommit
from lakelog.coordinator.txn_types import (
    InitTxnProducerRequest,
    TxnOffsetCommitRequest,
    TxnRef,
    TxnState,
)
from lakelog.util.errors import ErrorCode

NOW = 1_000_000


async def init(
    c: BatchCoordinator, tid: str = "tx", timeout_ms: int = 60_000, pid: int = -1, epoch: int = -1
) -> TxnRef:
    result = await c.init_transactional_producer(
        InitTxnProducerRequest(tid, timeout_ms, pid, epoch), NOW
    )
    assert result.error == ErrorCode.none, result
    return TxnRef(tid, result.producer_id, result.producer_epoch)


def tbatch(t: UUID, ref: TxnRef, seq: int, records: int = 1, partition: int = 0) -> CommitBatch:
    return batch(
        t,
        partition,
        records=records,
        pid=ref.producer_id,
        epoch=ref.producer_epoch,
        seq=seq,
        transactional=True,
    )


async def begin(c: BatchCoordinator, ref: TxnRef, t: UUID, *partitions: int) -> None:
    errors = await c.add_partitions_to_txn(
        ref, [PartitionKey(t, p) for p in partitions or (0,)], NOW, False
    )
    assert errors == [ErrorCode.none] * len(partitions or (0,))


async def test_init_allocates_and_bumps_epoch(coordinator: BatchCoordinator) -> None:
    first = await init(coordinator)
    assert first.producer_epoch == 0
    again = await init(coordinator)
    assert (again.producer_id, again.producer_epoch) == (first.producer_id, 1)
    other = await init(coordinator, "other")
    assert other.producer_id != first.producer_id


async def test_kip360_bump_and_retry(coordinator: BatchCoordinator) -> None:
    ref = await init(coordinator)
    bumped = await init(coordinator, pid=ref.producer_id, epoch=ref.producer_epoch)
    assert bumped.producer_epoch == ref.producer_epoch + 1
    # The same request again (its answer was lost): the same answer, no second bump.
    retry = await init(coordinator, pid=ref.producer_id, epoch=ref.producer_epoch)
    assert retry == bumped
    stale = await coordinator.init_transactional_producer(
        InitTxnProducerRequest("tx", 60_000, ref.producer_id, 7), NOW
    )
    assert stale.error == ErrorCode.producer_fenced


async def test_commit_writes_markers_and_moves_high_watermark(
    coordinator: BatchCoordinator,
) -> None:
    t = await new_topic(coordinator, partitions=2)
    ref = await init(coordinator)
    await begin(coordinator, ref, t, 0, 1)
    [r] = await commit(coordinator, [tbatch(t, ref, 0, records=3)])
    assert r.error == ErrorCode.none and r.base_offset == 0
    info = await coordinator.describe_transactions(["tx"])
    assert info[0] is not None and info[0].state == TxnState.ONGOING
    assert {p.partition for p in info[0].partitions} == {0, 1}
    assert await coordinator.end_txn(ref, True, NOW) == ErrorCode.none
    assert (await log_info(coordinator, t, 0)).high_watermark == 4  # 3 records + marker
    assert (await log_info(coordinator, t, 1)).high_watermark == 1  # marker only
    # A retried EndTxn is answered NONE; the other outcome is refused.
    assert await coordinator.end_txn(ref, True, NOW) == ErrorCode.none
    assert await coordinator.end_txn(ref, False, NOW) == ErrorCode.invalid_txn_state
    [done] = await coordinator.describe_transactions(["tx"])
    assert done is not None and done.state == TxnState.COMPLETE_COMMIT
    assert done.partitions == []


async def test_producer_checks(coordinator: BatchCoordinator) -> None:
    t = await new_topic(coordinator)
    ref = await init(coordinator)
    unknown = TxnRef("nope", ref.producer_id, 0)
    assert await coordinator.add_partitions_to_txn(unknown, [PartitionKey(t, 0)], NOW, False) == [
        ErrorCode.invalid_producer_id_mapping
    ]
    stale = TxnRef("tx", ref.producer_id, ref.producer_epoch + 5)
    assert await coordinator.add_partitions_to_txn(stale, [PartitionKey(t, 0)], NOW, False) == [
        ErrorCode.producer_fenced
    ]
    missing = await coordinator.add_partitions_to_txn(
        ref, [PartitionKey(t, 0), PartitionKey(t, 9)], NOW, False
    )
    assert missing == [ErrorCode.operation_not_attempted, ErrorCode.unknown_topic_or_partition]
    assert await coordinator.end_txn(ref, True, NOW) == ErrorCode.invalid_txn_state  # Empty


async def test_verify_only_reports_partitions_not_added(coordinator: BatchCoordinator) -> None:
    t = await new_topic(coordinator, partitions=2)
    ref = await init(coordinator)
    await begin(coordinator, ref, t, 0)
    verdict = await coordinator.add_partitions_to_txn(
        ref, [PartitionKey(t, 0), PartitionKey(t, 1)], NOW, True
    )
    assert verdict == [ErrorCode.none, ErrorCode.invalid_txn_state]
    [info] = await coordinator.describe_transactions(["tx"])
    assert info is not None and len(info.partitions) == 1


async def test_commit_barrier(coordinator: BatchCoordinator) -> None:
    t = await new_topic(coordinator, partitions=2)
    ref = await init(coordinator)
    # No ongoing transaction.
    [r] = await commit(coordinator, [tbatch(t, ref, 0)])
    assert r.error == ErrorCode.invalid_txn_state
    await begin(coordinator, ref, t, 0)
    # A partition the transaction did not add.
    [r] = await commit(coordinator, [tbatch(t, ref, 0, partition=1)])
    assert r.error == ErrorCode.invalid_txn_state
    [r] = await commit(coordinator, [tbatch(t, ref, 0)])
    assert r.error == ErrorCode.none
    assert await coordinator.end_txn(ref, False, NOW) == ErrorCode.none
    # Late batch of the ended transaction: refused, never written after the marker.
    hw = (await log_info(coordinator, t)).high_watermark
    [r] = await commit(coordinator, [tbatch(t, ref, 1)])
    assert r.error == ErrorCode.invalid_txn_state
    assert (await log_info(coordinator, t)).high_watermark == hw


async def test_fenced_producer_is_refused(coordinator: BatchCoordinator) -> None:
    t = await new_topic(coordinator)
    old = await init(coordinator)
    await begin(coordinator, old, t)
    [r] = await commit(coordinator, [tbatch(t, old, 0)])
    assert r.error == ErrorCode.none
    new = await init(coordinator)  # a new instance: aborts the open transaction, fences
    assert new.producer_epoch == old.producer_epoch + 1
    assert (await log_info(coordinator, t)).high_watermark == 2  # batch + abort marker
    [r] = await commit(coordinator, [tbatch(t, old, 1)])
    assert r.error == ErrorCode.invalid_producer_epoch
    assert await coordinator.end_txn(old, True, NOW) == ErrorCode.producer_fenced
    errors = await coordinator.add_partitions_to_txn(old, [PartitionKey(t, 0)], NOW, False)
    assert errors == [ErrorCode.producer_fenced]
    # The fenced instance cannot bump its way back (KIP-360 with an old epoch).
    back = await coordinator.init_transactional_producer(
        InitTxnProducerRequest("tx", 60_000, old.producer_id, old.producer_epoch), NOW
    )
    assert back.error == ErrorCode.producer_fenced


async def test_timeout_aborts_and_fences(coordinator: BatchCoordinator) -> None:
    t = await new_topic(coordinator)
    ref = await init(coordinator, timeout_ms=1_000)
    await begin(coordinator, ref, t)
    [r] = await commit(coordinator, [tbatch(t, ref, 0, records=2)])
    assert r.error == ErrorCode.none
    assert await coordinator.abort_expired_transactions(NOW + 500) == []
    assert await coordinator.abort_expired_transactions(NOW + 1_001) == ["tx"]
    assert await coordinator.abort_expired_transactions(NOW + 1_002) == []
    [info] = await coordinator.describe_transactions(["tx"])
    assert info is not None and info.state == TxnState.COMPLETE_ABORT
    assert info.producer_epoch == ref.producer_epoch + 1
    assert (await log_info(coordinator, t)).high_watermark == 3
    [r] = await commit(coordinator, [tbatch(t, ref, 2)])
    assert r.error == ErrorCode.invalid_producer_epoch
    assert await coordinator.end_txn(ref, False, NOW) == ErrorCode.producer_fenced


async def test_offsets_visible_only_on_commit(coordinator: BatchCoordinator) -> None:
    t = await new_topic(coordinator, name="input")
    del t
    ref = await init(coordinator)
    offsets = [OffsetCommit("input", 0, 42)]
    refused = await coordinator.txn_offset_commit(TxnOffsetCommitRequest(ref, "g", offsets), NOW)
    assert refused == [ErrorCode.invalid_txn_state]  # group not added
    assert await coordinator.add_offsets_to_txn(ref, "g", NOW) == ErrorCode.none
    staged = await coordinator.txn_offset_commit(TxnOffsetCommitRequest(ref, "g", offsets), NOW)
    assert staged == [ErrorCode.none]
    assert await coordinator.pending_txn_offsets("g") == {("input", 0)}
    [before] = await coordinator.fetch_offsets("g", [("input", 0)])
    assert before.offset == -1
    assert await coordinator.end_txn(ref, True, NOW) == ErrorCode.none
    [after] = await coordinator.fetch_offsets("g", [("input", 0)])
    assert after.offset == 42
    assert await coordinator.pending_txn_offsets("g") == set()
    # An aborted transaction's offsets never land.
    assert await coordinator.add_offsets_to_txn(ref, "g", NOW) == ErrorCode.none
    await coordinator.txn_offset_commit(
        TxnOffsetCommitRequest(ref, "g", [OffsetCommit("input", 0, 99)]), NOW
    )
    assert await coordinator.end_txn(ref, False, NOW) == ErrorCode.none
    [kept] = await coordinator.fetch_offsets("g", [("input", 0)])
    assert kept.offset == 42


async def test_list_and_describe_producers(coordinator: BatchCoordinator) -> None:
    t = await new_topic(coordinator)
    ref = await init(coordinator)
    await begin(coordinator, ref, t)
    await commit(coordinator, [batch(t, records=5)])
    [r] = await commit(coordinator, [tbatch(t, ref, 0, records=2)])
    assert r.base_offset == 5
    listed = await coordinator.list_transactions()
    assert [(i.transactional_id, i.state) for i in listed] == [("tx", TxnState.ONGOING)]
    [described] = await coordinator.describe_producers([PartitionKey(t, 0)])
    assert described.error == ErrorCode.none
    [producer] = described.producers
    assert producer.producer_id == ref.producer_id
    assert producer.last_sequence == 1
    assert producer.current_txn_start_offset == 5
    [missing] = await coordinator.describe_producers([PartitionKey(t, 3)])
    assert missing.error == ErrorCode.unknown_topic_or_partition
