"""Kafka transactions: the transaction coordinator's state next to the batches, so an end
(markers, aborted ranges, staged offsets) and the commit barrier are each one database
transaction. The decisions are `txn_rules`'; this module reads and writes rows.

Locking (PostgreSQL): a request locks its transaction's row first, so requests for one
transactional id serialize; an end then locks its partitions in (topic, partition) order,
the order `commit_file` uses, before writing markers. `commit_file` reads the transaction
after taking its partition locks, so a batch either commits before the marker or sees the
transaction ended: the commit barrier. SQLite's one writer gives the same order."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from lakelog.coordinator import txn_rules
from lakelog.coordinator.engine import Session
from lakelog.coordinator.group_types import OffsetCommit
from lakelog.coordinator.log_types import PartitionKey
from lakelog.coordinator.ops.cluster import allocate_producer_id
from lakelog.coordinator.ops.groups import commit_offsets
from lakelog.coordinator.ops.rows import find_partitions
from lakelog.coordinator.txn_rules import TXN_COLUMNS, OngoingTxn, TxnRow
from lakelog.coordinator.txn_types import (
    CONTROL_ABORT,
    CONTROL_COMMIT,
    MAX_PRODUCER_EPOCH,
    DescribeProducersResult,
    InitTxnProducerRequest,
    InitTxnProducerResult,
    TransactionInfo,
    TxnOffsetCommitRequest,
    TxnRef,
    TxnState,
)
from lakelog.util.errors import ErrorCode

_MARKERS = (("topic_id", "bigint"), ("partition", "int"), ("off", "bigint"), ("high", "bigint"))
"""A marker per partition: where it goes, its offset and its timestamp."""


async def load_txn(s: Session, transactional_id: str, lock: bool = False) -> TxnRow | None:
    row = await s.fetchone(
        f"SELECT {TXN_COLUMNS} FROM transactions WHERE transactional_id = ?"
        + (s.dialect.for_update if lock else ""),
        (transactional_id,),
    )
    return None if row is None else TxnRow.from_values(row)


async def load_ongoing(s: Session, producer_ids: Iterable[int]) -> dict[int, OngoingTxn]:
    """The commit barrier's view of the given producers' transactions (absent: none), in
    one query. Call it after the partition locks are taken."""
    pids = sorted(set(producer_ids))
    if not pids:
        return {}
    keys, params = s.dialect.keyset("k", (("pid", "bigint"),), [(pid,) for pid in pids])
    rows = await s.fetchall(
        "SELECT t.producer_id, t.transactional_id, t.producer_epoch, t.state,"
        " tp.topic_id, tp.partition, tp.first_offset"
        " FROM transactions t LEFT JOIN txn_partitions tp"
        " ON tp.transactional_id = t.transactional_id"
        f" WHERE t.producer_id IN (SELECT k.pid FROM {keys})",
        params,
    )
    found: dict[int, OngoingTxn] = {}
    for pid, tid, epoch, state, topic_id, partition, first in rows:
        txn = found.get(pid)
        if txn is None:
            txn = found[pid] = OngoingTxn(tid, epoch, TxnState(state))
        if topic_id is not None:
            txn.first_offsets[(topic_id, partition)] = first
    return found


async def record_first_offsets(s: Session, firsts: Sequence[tuple[str, int, int, int]]) -> None:
    """(transactional id, topic row id, partition, offset) of transactions' first batches."""
    if not firsts:
        return
    keys, params = s.dialect.keyset(
        "k",
        (("tid", "text"), ("topic_id", "bigint"), ("partition", "int"), ("first", "bigint")),
        firsts,
    )
    await s.execute(
        f"UPDATE txn_partitions AS tp SET first_offset = k.first FROM {keys}"
        " WHERE tp.transactional_id = k.tid AND tp.topic_id = k.topic_id"
        " AND tp.partition = k.partition AND tp.first_offset < 0",
        params,
    )


# ---------------------------------------------------------------- InitProducerId


async def init_transactional_producer(
    s: Session, request: InitTxnProducerRequest, now_ms: int
) -> InitTxnProducerResult:
    row = await load_txn(s, request.transactional_id, lock=True)
    if row is None:
        if request.producer_id >= 0:
            return InitTxnProducerResult(ErrorCode.producer_fenced)
        pid = await allocate_producer_id(s)
        created = await s.fetchone(
            f"INSERT INTO transactions ({TXN_COLUMNS}, updated_at)"
            " VALUES (?, ?, 0, -1, ?, ?, -1, ?) ON CONFLICT DO NOTHING RETURNING 1",
            (request.transactional_id, pid, TxnState.EMPTY, request.transaction_timeout_ms, now_ms),
        )
        if created is None:
            # Another broker created it meanwhile: the caller retries on this error.
            return InitTxnProducerResult(ErrorCode.concurrent_transactions)
        return InitTxnProducerResult(ErrorCode.none, pid, 0)
    plan = txn_rules.plan_init(row, request)
    if plan.error != ErrorCode.none:
        return InitTxnProducerResult(plan.error)
    if plan.unchanged:
        return InitTxnProducerResult(ErrorCode.none, row.producer_id, row.producer_epoch)
    pid, epoch = row.producer_id, plan.producer_epoch
    if plan.abort_ongoing:
        # The markers carry the epoch that fences the old producer (the current one when
        # the id rotates: the old id is then retired for good).
        marker_epoch = row.producer_epoch if plan.new_producer_id else epoch
        await _end(s, row, False, marker_epoch, now_ms)
    if plan.new_producer_id:
        pid = await allocate_producer_id(s)
    await s.execute(
        "UPDATE transactions SET producer_id = ?, producer_epoch = ?, last_producer_epoch = ?,"
        " state = ?, timeout_ms = ?, start_time = -1, updated_at = ? WHERE transactional_id = ?",
        (
            pid,
            epoch,
            plan.last_producer_epoch,
            TxnState.EMPTY,
            request.transaction_timeout_ms,
            now_ms,
            request.transactional_id,
        ),
    )
    return InitTxnProducerResult(ErrorCode.none, pid, epoch)


# ---------------------------------------------------------------- adding to a transaction


async def _begin(s: Session, row: TxnRow, now_ms: int) -> None:
    if row.state != TxnState.ONGOING:
        await s.execute(
            "UPDATE transactions SET state = ?, start_time = ?, updated_at = ?"
            " WHERE transactional_id = ?",
            (TxnState.ONGOING, now_ms, now_ms, row.transactional_id),
        )


async def add_partitions_to_txn(
    s: Session,
    txn: TxnRef,
    partitions: Sequence[PartitionKey],
    now_ms: int,
    verify_only: bool,
) -> list[ErrorCode]:
    row = await load_txn(s, txn.transactional_id, lock=not verify_only)
    error = txn_rules.check_producer(row, txn)
    if error != ErrorCode.none:
        return [error] * len(partitions)
    assert row is not None
    found = await find_partitions(s, ((p.topic_id, p.partition) for p in partitions))
    parts = [found.get((p.topic_id, p.partition)) for p in partitions]
    if any(part is None for part in parts):
        return [
            ErrorCode.unknown_topic_or_partition
            if part is None
            else ErrorCode.operation_not_attempted
            for part in parts
        ]
    keys = [(part.topic_id, part.partition) for part in parts if part is not None]
    if verify_only:
        rows = await s.fetchall(
            "SELECT topic_id, partition FROM txn_partitions WHERE transactional_id = ?",
            (row.transactional_id,),
        )
        added = {(t, p) for t, p in rows}
        ongoing = row.state == TxnState.ONGOING
        return [
            ErrorCode.none if ongoing and key in added else ErrorCode.invalid_txn_state
            for key in keys
        ]
    await _begin(s, row, now_ms)
    keyset, params = s.dialect.keyset("k", (("topic_id", "bigint"), ("partition", "int")), keys)
    # WHERE true: SQLite needs it to parse ON CONFLICT after INSERT ... SELECT.
    await s.execute(
        "INSERT INTO txn_partitions (transactional_id, topic_id, partition)"
        f" SELECT ?, k.topic_id, k.partition FROM {keyset} WHERE true ON CONFLICT DO NOTHING",
        [row.transactional_id, *params],
    )
    return [ErrorCode.none] * len(partitions)


async def add_offsets_to_txn(s: Session, txn: TxnRef, group_id: str, now_ms: int) -> ErrorCode:
    row = await load_txn(s, txn.transactional_id, lock=True)
    error = txn_rules.check_producer(row, txn)
    if error != ErrorCode.none:
        return error
    assert row is not None
    await _begin(s, row, now_ms)
    await s.execute(
        "INSERT INTO txn_groups (transactional_id, group_id) VALUES (?, ?) ON CONFLICT DO NOTHING",
        (row.transactional_id, group_id),
    )
    return ErrorCode.none


async def txn_offset_commit(
    s: Session, request: TxnOffsetCommitRequest, now_ms: int
) -> list[ErrorCode]:
    del now_ms  # the commit time is the transaction's commit
    row = await load_txn(s, request.txn.transactional_id, lock=True)
    error = txn_rules.check_producer(row, request.txn)
    if error == ErrorCode.none:
        assert row is not None
        added = await s.fetchone(
            "SELECT 1 FROM txn_groups WHERE transactional_id = ? AND group_id = ?",
            (row.transactional_id, request.group_id),
        )
        if row.state != TxnState.ONGOING or added is None:
            error = ErrorCode.invalid_txn_state
    if error != ErrorCode.none:
        return [error] * len(request.offsets)
    await stage_txn_offsets(
        s, [(request.txn.transactional_id, request.group_id, o) for o in request.offsets]
    )
    return [ErrorCode.none] * len(request.offsets)


_STAGED_OFFSETS = (
    ("x", "text"),
    ("g", "text"),
    ("t", "text"),
    ("p", "int"),
    ("o", "bigint"),
    ("e", "int"),
    ("m", "text"),
)


async def stage_txn_offsets(s: Session, offsets: Sequence[tuple[str, str, OffsetCommit]]) -> None:
    """Stage (replace) offsets of (transactional id, group) pairs in one statement: a
    partition given twice keeps its later offset; rows in key order (see
    `groups.write_offsets`)."""
    latest: dict[tuple[str, str, str, int], OffsetCommit] = {}
    for tid, group_id, o in offsets:
        latest[(tid, group_id, o.topic, o.partition)] = o
    if not latest:
        return
    rows = [
        (*key, o.offset, o.leader_epoch, o.metadata)
        for key, o in sorted(latest.items(), key=lambda kv: kv[0])
    ]
    keys, params = s.dialect.keyset("k", _STAGED_OFFSETS, rows)
    await s.execute(
        "INSERT INTO txn_offsets (transactional_id, group_id, topic, partition,"
        " committed_offset, leader_epoch, metadata)"
        f" SELECT k.x, k.g, k.t, k.p, k.o, k.e, k.m FROM {keys} WHERE true"
        " ON CONFLICT (transactional_id, group_id, topic, partition) DO UPDATE SET"
        " committed_offset = excluded.committed_offset, leader_epoch = excluded.leader_epoch,"
        " metadata = excluded.metadata",
        params,
    )


# ---------------------------------------------------------------- ending


async def end_txn(s: Session, txn: TxnRef, commit: bool, now_ms: int) -> ErrorCode:
    row = await load_txn(s, txn.transactional_id, lock=True)
    error, write = txn_rules.check_end(row, txn, commit)
    if write:
        assert row is not None
        await _end(s, row, commit, row.producer_epoch, now_ms)
        await s.execute(
            "UPDATE transactions SET state = ?, start_time = -1, updated_at = ?"
            " WHERE transactional_id = ?",
            (
                TxnState.COMPLETE_COMMIT if commit else TxnState.COMPLETE_ABORT,
                now_ms,
                row.transactional_id,
            ),
        )
    return error


async def expired_transactions(s: Session, now_ms: int) -> list[str]:
    """Candidates for `abort_if_expired` (each re-checked there, under its row lock)."""
    rows = await s.fetchall(
        "SELECT transactional_id FROM transactions WHERE state = ?"
        " AND start_time + timeout_ms < ? ORDER BY transactional_id",
        (TxnState.ONGOING, now_ms),
    )
    return [tid for (tid,) in rows]


async def abort_if_expired(s: Session, transactional_id: str, now_ms: int) -> bool:
    """Abort one expired transaction, in a database transaction of its own: aborts on
    several brokers never hold each other's partition locks, and the re-check under the
    row lock makes the abort happen once."""
    row = await load_txn(s, transactional_id, lock=True)
    if row is None or not txn_rules.expired(row, now_ms):
        return False
    # Fence the producer that abandoned it: its epoch is bumped and it cannot bump back
    # (last epoch -1); at the epoch limit the markers keep the current epoch.
    epoch = min(row.producer_epoch + 1, MAX_PRODUCER_EPOCH)
    await _end(s, row, False, epoch, now_ms)
    await s.execute(
        "UPDATE transactions SET producer_epoch = ?, last_producer_epoch = -1, state = ?,"
        " start_time = -1, updated_at = ? WHERE transactional_id = ?",
        (epoch, TxnState.COMPLETE_ABORT, now_ms, transactional_id),
    )
    return True


async def _end(s: Session, row: TxnRow, commit: bool, epoch: int, now_ms: int) -> None:
    """Write a marker in every partition of the transaction (locked in the writers'
    order), record the aborted ranges, apply or drop the staged offsets, and forget the
    transaction's sets."""
    d = s.dialect
    tid = row.transactional_id
    control = CONTROL_COMMIT if commit else CONTROL_ABORT
    parts = await s.fetchall(
        "SELECT p.topic_id, p.partition, tp.first_offset, p.high_watermark, p.max_timestamp"
        " FROM txn_partitions tp JOIN partitions p"
        " ON p.topic_id = tp.topic_id AND p.partition = tp.partition"
        " WHERE tp.transactional_id = ? ORDER BY p.topic_id, p.partition"
        + (d.for_update + " OF p" if d.for_update else ""),
        (tid,),
    )
    if parts:
        markers, params = d.keyset(
            "k", _MARKERS, [(t, p, off, max(high, now_ms)) for t, p, _, off, high in parts]
        )
        await s.execute(
            "INSERT INTO batches (topic_id, partition, base_offset, last_offset, file_id,"
            " byte_offset, byte_size, base_timestamp, max_timestamp, timestamp_type,"
            " log_append_time, timestamp_high, producer_id, producer_epoch, base_sequence,"
            " is_transactional, control_type)"
            " SELECT k.topic_id, k.partition, k.off, k.off, NULL, 0, 0, ?, ?, 0, -1, k.high,"
            f" ?, ?, -1, TRUE, ? FROM {markers}",
            [now_ms, now_ms, row.producer_id, epoch, control, *params],
        )
        await s.execute(
            "UPDATE partitions AS p SET high_watermark = k.off + 1, max_timestamp = k.high"
            f" FROM {markers} WHERE p.topic_id = k.topic_id AND p.partition = k.partition",
            params,
        )
        aborted = [(t, p, off, first) for t, p, first, off, _ in parts if first >= 0]
        if aborted and not commit:
            ranges, params = d.keyset(
                "k",
                (
                    ("topic_id", "bigint"),
                    ("partition", "int"),
                    ("off", "bigint"),
                    ("first", "bigint"),
                ),
                aborted,
            )
            await s.execute(
                "INSERT INTO aborted_txns (topic_id, partition, marker_offset, producer_id,"
                f" first_offset) SELECT k.topic_id, k.partition, k.off, ?, k.first FROM {ranges}",
                [row.producer_id, *params],
            )
    if commit:
        staged = await s.fetchall(
            "SELECT group_id, topic, partition, committed_offset, leader_epoch, metadata"
            " FROM txn_offsets WHERE transactional_id = ? ORDER BY group_id",
            (tid,),
        )
        by_group: dict[str, list[OffsetCommit]] = {}
        for group_id, topic, partition, offset, leader_epoch, metadata in staged:
            by_group.setdefault(group_id, []).append(
                OffsetCommit(topic, partition, offset, leader_epoch, metadata)
            )
        for group_id, offsets in by_group.items():
            await commit_offsets(s, group_id, offsets, now_ms)
    for table in ("txn_offsets", "txn_groups", "txn_partitions"):
        await s.execute(f"DELETE FROM {table} WHERE transactional_id = ?", (tid,))


# ---------------------------------------------------------------- describing


async def describe_transactions(
    s: Session, transactional_ids: Sequence[str]
) -> list[TransactionInfo | None]:
    answers: list[TransactionInfo | None] = []
    for tid in transactional_ids:
        row = await load_txn(s, tid)
        if row is None:
            answers.append(None)
            continue
        partitions = await s.send(
            "SELECT t.topic_uuid, tp.partition FROM txn_partitions tp"
            " JOIN topics t ON t.id = tp.topic_id WHERE tp.transactional_id = ?"
            " ORDER BY t.name, tp.partition",
            (tid,),
        )
        groups = await s.send(
            "SELECT group_id FROM txn_groups WHERE transactional_id = ? ORDER BY group_id",
            (tid,),
        )
        keys = [
            PartitionKey(s.dialect.to_uuid(topic), partition)
            for topic, partition in await partitions.fetchall()
        ]
        answers.append(row.info(keys, [g for (g,) in await groups.fetchall()]))
    return answers


async def list_transactions(s: Session) -> list[TransactionInfo]:
    rows = await s.fetchall(f"SELECT {TXN_COLUMNS} FROM transactions ORDER BY transactional_id")
    return [TxnRow.from_values(values).info([], []) for values in rows]


async def describe_producers(
    s: Session, partitions: Sequence[PartitionKey]
) -> list[DescribeProducersResult]:
    found = await find_partitions(s, ((p.topic_id, p.partition) for p in partitions))
    results: list[DescribeProducersResult] = []
    for key in partitions:
        part = found.get((key.topic_id, key.partition))
        if part is None:
            results.append(DescribeProducersResult(ErrorCode.unknown_topic_or_partition))
            continue
        where = (part.topic_id, part.partition)
        # The newest remembered batch of each producer, with its batch's timestamp.
        states = await s.send(
            "SELECT s.producer_id, s.producer_epoch, s.last_sequence, b.max_timestamp"
            " FROM producer_state s LEFT JOIN batches b ON b.topic_id = s.topic_id"
            " AND b.partition = s.partition AND b.last_offset = s.last_offset"
            " WHERE s.topic_id = ? AND s.partition = ? AND s.base_offset = ("
            "  SELECT MAX(base_offset) FROM producer_state x WHERE x.topic_id = s.topic_id"
            "  AND x.partition = s.partition AND x.producer_id = s.producer_id)"
            " ORDER BY s.producer_id",
            where,
        )
        starts = await s.send(
            "SELECT t.producer_id, tp.first_offset FROM txn_partitions tp"
            " JOIN transactions t ON t.transactional_id = tp.transactional_id"
            " WHERE tp.topic_id = ? AND tp.partition = ? AND tp.first_offset >= 0",
            where,
        )
        rows = await states.fetchall()
        results.append(
            txn_rules.producer_states(rows, {pid: first for pid, first in await starts.fetchall()})
        )
    return results


async def pending_txn_offsets(s: Session, group_id: str) -> set[tuple[str, int]]:
    rows = await s.fetchall(
        "SELECT topic, partition FROM txn_offsets WHERE group_id = ?", (group_id,)
    )
    return {(topic, partition) for topic, partition in rows}
