"""Transactions in PostgreSQL. Each body runs in the caller's READ COMMITTED transaction;
the transaction's row is locked FOR UPDATE first, so requests for one transactional id
serialize, and an end locks its partitions FOR UPDATE in (topic, partition) order, the order
`commit_file` uses, before writing markers. `commit_file` reads the transaction after
taking its partition locks, so a batch either commits before the marker or sees the
transaction ended: the commit barrier. Decisions are `txn_rules`'; SQL only here."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from uuid import UUID

from lakelog.coordinator import txn_rules
from lakelog.coordinator.interface import OffsetCommit, PartitionKey
from lakelog.coordinator.ops.cluster import allocate_producer_id
from lakelog.coordinator.ops.groups import commit_offsets
from lakelog.coordinator.postgres.engine import PostgresSession
from lakelog.coordinator.postgres.rows import Conn, find_partitions
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
from lakelog.errors import ErrorCode


async def load_txn(conn: Conn, transactional_id: str, lock: bool = False) -> TxnRow | None:
    cursor = await conn.execute(
        f"SELECT {TXN_COLUMNS} FROM transactions WHERE transactional_id = %s"
        + (" FOR UPDATE" if lock else ""),
        (transactional_id,),
    )
    row = await cursor.fetchone()
    return None if row is None else TxnRow.from_values(row)


async def load_ongoing(conn: Conn, producer_ids: Iterable[int]) -> dict[int, OngoingTxn]:
    """The commit barrier's view of the given producers' transactions, in one query. Call
    it after the partition locks are taken."""
    pids = sorted(set(producer_ids))
    if not pids:
        return {}
    cursor = await conn.execute(
        "SELECT t.producer_id, t.transactional_id, t.producer_epoch, t.state,"
        " tp.topic_id, tp.partition, tp.first_offset"
        " FROM transactions t LEFT JOIN txn_partitions tp"
        " ON tp.transactional_id = t.transactional_id"
        " WHERE t.producer_id = ANY(%s::bigint[])",
        (pids,),
    )
    found: dict[int, OngoingTxn] = {}
    for pid, tid, epoch, state, topic_id, partition, first in await cursor.fetchall():
        txn = found.get(pid)
        if txn is None:
            txn = found[pid] = OngoingTxn(tid, epoch, TxnState(state))
        if topic_id is not None:
            txn.first_offsets[(topic_id, partition)] = first
    return found


async def record_first_offsets(conn: Conn, firsts: Iterable[tuple[str, int, int, int]]) -> None:
    """(transactional id, topic row id, partition, offset) of transactions' first batches."""
    rows = list(firsts)
    if not rows:
        return
    await conn.execute(
        "UPDATE txn_partitions tp SET first_offset = k.first_offset"
        " FROM unnest(%s::text[], %s::bigint[], %s::int[], %s::bigint[])"
        " AS k (transactional_id, topic_id, partition, first_offset)"
        " WHERE tp.transactional_id = k.transactional_id AND tp.topic_id = k.topic_id"
        " AND tp.partition = k.partition AND tp.first_offset < 0",
        (
            [r[0] for r in rows],
            [r[1] for r in rows],
            [r[2] for r in rows],
            [r[3] for r in rows],
        ),
    )


# ---------------------------------------------------------------- InitProducerId


async def init_transactional_producer(
    conn: Conn, request: InitTxnProducerRequest, now_ms: int
) -> InitTxnProducerResult:
    row = await load_txn(conn, request.transactional_id, lock=True)
    if row is None:
        if request.producer_id >= 0:
            return InitTxnProducerResult(ErrorCode.producer_fenced)
        pid = await allocate_producer_id(PostgresSession(conn))
        cursor = await conn.execute(
            f"INSERT INTO transactions ({TXN_COLUMNS}, updated_at)"
            " VALUES (%s, %s, 0, -1, %s, %s, -1, %s) ON CONFLICT DO NOTHING RETURNING 1",
            (request.transactional_id, pid, TxnState.EMPTY, request.transaction_timeout_ms, now_ms),
        )
        if await cursor.fetchone() is None:
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
        marker_epoch = row.producer_epoch if plan.new_producer_id else epoch
        await _end(conn, row, False, marker_epoch, now_ms)
    if plan.new_producer_id:
        pid = await allocate_producer_id(PostgresSession(conn))
    await conn.execute(
        "UPDATE transactions SET producer_id = %s, producer_epoch = %s,"
        " last_producer_epoch = %s, state = %s, timeout_ms = %s, start_time = -1,"
        " updated_at = %s WHERE transactional_id = %s",
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


async def _begin(conn: Conn, row: TxnRow, now_ms: int) -> None:
    if row.state != TxnState.ONGOING:
        await conn.execute(
            "UPDATE transactions SET state = %s, start_time = %s, updated_at = %s"
            " WHERE transactional_id = %s",
            (TxnState.ONGOING, now_ms, now_ms, row.transactional_id),
        )


async def add_partitions_to_txn(
    conn: Conn,
    txn: TxnRef,
    partitions: Sequence[PartitionKey],
    now_ms: int,
    verify_only: bool,
) -> list[ErrorCode]:
    row = await load_txn(conn, txn.transactional_id, lock=not verify_only)
    error = txn_rules.check_producer(row, txn)
    if error != ErrorCode.none:
        return [error] * len(partitions)
    assert row is not None
    found = await find_partitions(conn, ((p.topic_id, p.partition) for p in partitions))
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
        cursor = await conn.execute(
            "SELECT topic_id, partition FROM txn_partitions WHERE transactional_id = %s",
            (row.transactional_id,),
        )
        added = {(t, p) for t, p in await cursor.fetchall()}
        ongoing = row.state == TxnState.ONGOING
        return [
            ErrorCode.none if ongoing and key in added else ErrorCode.invalid_txn_state
            for key in keys
        ]
    await _begin(conn, row, now_ms)
    await conn.execute(
        "INSERT INTO txn_partitions (transactional_id, topic_id, partition)"
        " SELECT %s, k.topic_id, k.partition FROM unnest(%s::bigint[], %s::int[])"
        " AS k (topic_id, partition) ON CONFLICT DO NOTHING",
        (row.transactional_id, [k[0] for k in keys], [k[1] for k in keys]),
    )
    return [ErrorCode.none] * len(partitions)


async def add_offsets_to_txn(conn: Conn, txn: TxnRef, group_id: str, now_ms: int) -> ErrorCode:
    row = await load_txn(conn, txn.transactional_id, lock=True)
    error = txn_rules.check_producer(row, txn)
    if error != ErrorCode.none:
        return error
    assert row is not None
    await _begin(conn, row, now_ms)
    await conn.execute(
        "INSERT INTO txn_groups (transactional_id, group_id) VALUES (%s, %s)"
        " ON CONFLICT DO NOTHING",
        (row.transactional_id, group_id),
    )
    return ErrorCode.none


async def txn_offset_commit(
    conn: Conn, request: TxnOffsetCommitRequest, now_ms: int
) -> list[ErrorCode]:
    del now_ms  # the commit time is the transaction's commit
    row = await load_txn(conn, request.txn.transactional_id, lock=True)
    error = txn_rules.check_producer(row, request.txn)
    if error == ErrorCode.none:
        assert row is not None
        cursor = await conn.execute(
            "SELECT 1 FROM txn_groups WHERE transactional_id = %s AND group_id = %s",
            (row.transactional_id, request.group_id),
        )
        if row.state != TxnState.ONGOING or await cursor.fetchone() is None:
            error = ErrorCode.invalid_txn_state
    if error != ErrorCode.none:
        return [error] * len(request.offsets)
    if request.offsets:
        async with conn.cursor() as cursor:
            await cursor.executemany(
                "INSERT INTO txn_offsets (transactional_id, group_id, topic, partition,"
                " committed_offset, leader_epoch, metadata) VALUES (%s, %s, %s, %s, %s, %s, %s)"
                " ON CONFLICT (transactional_id, group_id, topic, partition) DO UPDATE SET"
                " committed_offset = excluded.committed_offset,"
                " leader_epoch = excluded.leader_epoch, metadata = excluded.metadata",
                [
                    (
                        request.txn.transactional_id,
                        request.group_id,
                        o.topic,
                        o.partition,
                        o.offset,
                        o.leader_epoch,
                        o.metadata,
                    )
                    for o in request.offsets
                ],
            )
    return [ErrorCode.none] * len(request.offsets)


# ---------------------------------------------------------------- ending


async def end_txn(conn: Conn, txn: TxnRef, commit: bool, now_ms: int) -> ErrorCode:
    row = await load_txn(conn, txn.transactional_id, lock=True)
    error, write = txn_rules.check_end(row, txn, commit)
    if write:
        assert row is not None
        await _end(conn, row, commit, row.producer_epoch, now_ms)
        await conn.execute(
            "UPDATE transactions SET state = %s, start_time = -1, updated_at = %s"
            " WHERE transactional_id = %s",
            (
                TxnState.COMPLETE_COMMIT if commit else TxnState.COMPLETE_ABORT,
                now_ms,
                row.transactional_id,
            ),
        )
    return error


async def expired_transactions(conn: Conn, now_ms: int) -> list[str]:
    cursor = await conn.execute(
        "SELECT transactional_id FROM transactions WHERE state = %s"
        " AND start_time + timeout_ms < %s ORDER BY transactional_id",
        (TxnState.ONGOING, now_ms),
    )
    return [tid for (tid,) in await cursor.fetchall()]


async def abort_if_expired(conn: Conn, transactional_id: str, now_ms: int) -> bool:
    """One expired transaction per database transaction, so aborts on several brokers
    never hold each other's partition locks; the re-check under the row lock makes the
    abort happen once."""
    row = await load_txn(conn, transactional_id, lock=True)
    if row is None or not txn_rules.expired(row, now_ms):
        return False
    # Fence the producer that abandoned it: its epoch is bumped and it cannot bump back.
    epoch = min(row.producer_epoch + 1, MAX_PRODUCER_EPOCH)
    await _end(conn, row, False, epoch, now_ms)
    await conn.execute(
        "UPDATE transactions SET producer_epoch = %s, last_producer_epoch = -1, state = %s,"
        " start_time = -1, updated_at = %s WHERE transactional_id = %s",
        (epoch, TxnState.COMPLETE_ABORT, now_ms, transactional_id),
    )
    return True


async def _end(conn: Conn, row: TxnRow, commit: bool, epoch: int, now_ms: int) -> None:
    """Write a marker in every partition of the transaction (locked in the writers'
    order), record the aborted ranges, apply or drop the staged offsets, and forget the
    transaction's sets."""
    tid = row.transactional_id
    control = CONTROL_COMMIT if commit else CONTROL_ABORT
    cursor = await conn.execute(
        "SELECT p.topic_id, p.partition, tp.first_offset, p.high_watermark, p.max_timestamp"
        " FROM txn_partitions tp JOIN partitions p"
        " ON p.topic_id = tp.topic_id AND p.partition = tp.partition"
        " WHERE tp.transactional_id = %s ORDER BY p.topic_id, p.partition FOR UPDATE OF p",
        (tid,),
    )
    parts = await cursor.fetchall()
    if parts:
        topic_ids = [p[0] for p in parts]
        partition_ids = [p[1] for p in parts]
        offsets = [p[3] for p in parts]
        highs = [max(p[4], now_ms) for p in parts]
        await conn.execute(
            "INSERT INTO batches (topic_id, partition, base_offset, last_offset, file_id,"
            " byte_offset, byte_size, base_timestamp, max_timestamp, timestamp_type,"
            " log_append_time, timestamp_high, producer_id, producer_epoch, base_sequence,"
            " is_transactional, control_type)"
            " SELECT k.topic_id, k.partition, k.off, k.off, NULL, 0, 0, %s, %s, 0, -1, k.high,"
            " %s, %s, -1, TRUE, %s"
            " FROM unnest(%s::bigint[], %s::int[], %s::bigint[], %s::bigint[])"
            " AS k (topic_id, partition, off, high)",
            (
                now_ms,
                now_ms,
                row.producer_id,
                epoch,
                control,
                topic_ids,
                partition_ids,
                offsets,
                highs,
            ),
        )
        await conn.execute(
            "UPDATE partitions p SET high_watermark = k.off + 1, max_timestamp = k.high"
            " FROM unnest(%s::bigint[], %s::int[], %s::bigint[], %s::bigint[])"
            " AS k (topic_id, partition, off, high)"
            " WHERE p.topic_id = k.topic_id AND p.partition = k.partition",
            (topic_ids, partition_ids, offsets, highs),
        )
        aborted = [p for p in parts if not commit and p[2] >= 0]
        if aborted:
            await conn.execute(
                "INSERT INTO aborted_txns (topic_id, partition, marker_offset, producer_id,"
                " first_offset) SELECT k.topic_id, k.partition, k.off, %s, k.first"
                " FROM unnest(%s::bigint[], %s::int[], %s::bigint[], %s::bigint[])"
                " AS k (topic_id, partition, off, first)",
                (
                    row.producer_id,
                    [p[0] for p in aborted],
                    [p[1] for p in aborted],
                    [p[3] for p in aborted],
                    [p[2] for p in aborted],
                ),
            )
    if commit:
        cursor = await conn.execute(
            "SELECT group_id, topic, partition, committed_offset, leader_epoch, metadata"
            " FROM txn_offsets WHERE transactional_id = %s ORDER BY group_id",
            (tid,),
        )
        by_group: dict[str, list[OffsetCommit]] = {}
        for group_id, topic, partition, offset, leader_epoch, metadata in await cursor.fetchall():
            by_group.setdefault(group_id, []).append(
                OffsetCommit(topic, partition, offset, leader_epoch, metadata)
            )
        for group_id, offsets in by_group.items():
            await commit_offsets(PostgresSession(conn), group_id, offsets, now_ms)
    for table in ("txn_offsets", "txn_groups", "txn_partitions"):
        await conn.execute(f"DELETE FROM {table} WHERE transactional_id = %s", (tid,))


# ---------------------------------------------------------------- describing


async def describe_transactions(
    conn: Conn, transactional_ids: Sequence[str]
) -> list[TransactionInfo | None]:
    answers: list[TransactionInfo | None] = []
    for tid in transactional_ids:
        row = await load_txn(conn, tid)
        if row is None:
            answers.append(None)
            continue
        cursor = await conn.execute(
            "SELECT t.topic_uuid, tp.partition FROM txn_partitions tp"
            " JOIN topics t ON t.id = tp.topic_id WHERE tp.transactional_id = %s"
            " ORDER BY t.name, tp.partition",
            (tid,),
        )
        partitions = [
            PartitionKey(UUID(str(topic)), partition)
            for topic, partition in await cursor.fetchall()
        ]
        cursor = await conn.execute(
            "SELECT group_id FROM txn_groups WHERE transactional_id = %s ORDER BY group_id",
            (tid,),
        )
        groups = [g for (g,) in await cursor.fetchall()]
        answers.append(row.info(partitions, groups))
    return answers


async def list_transactions(conn: Conn) -> list[TransactionInfo]:
    cursor = await conn.execute(f"SELECT {TXN_COLUMNS} FROM transactions ORDER BY transactional_id")
    return [TxnRow.from_values(values).info([], []) for values in await cursor.fetchall()]


async def describe_producers(
    conn: Conn, partitions: Sequence[PartitionKey]
) -> list[DescribeProducersResult]:
    found = await find_partitions(conn, ((p.topic_id, p.partition) for p in partitions))
    results: list[DescribeProducersResult] = []
    for key in partitions:
        part = found.get((key.topic_id, key.partition))
        if part is None:
            results.append(DescribeProducersResult(ErrorCode.unknown_topic_or_partition))
            continue
        where = (part.topic_id, part.partition)
        cursor = await conn.execute(
            "SELECT DISTINCT ON (s.producer_id) s.producer_id, s.producer_epoch,"
            " s.last_sequence, b.max_timestamp FROM producer_state s LEFT JOIN batches b"
            " ON b.topic_id = s.topic_id AND b.partition = s.partition"
            " AND b.last_offset = s.last_offset"
            " WHERE s.topic_id = %s AND s.partition = %s"
            " ORDER BY s.producer_id, s.base_offset DESC",
            where,
        )
        rows = await cursor.fetchall()
        cursor = await conn.execute(
            "SELECT t.producer_id, tp.first_offset FROM txn_partitions tp"
            " JOIN transactions t ON t.transactional_id = tp.transactional_id"
            " WHERE tp.topic_id = %s AND tp.partition = %s AND tp.first_offset >= 0",
            where,
        )
        starts = {pid: first for pid, first in await cursor.fetchall()}
        results.append(txn_rules.producer_states(rows, starts))
    return results


async def pending_txn_offsets(conn: Conn, group_id: str) -> set[tuple[str, int]]:
    cursor = await conn.execute(
        "SELECT topic, partition FROM txn_offsets WHERE group_id = %s", (group_id,)
    )
    return {(topic, partition) for topic, partition in await cursor.fetchall()}
