"""Transactions in SQLite: the transaction coordinator's state next to the batches, so an
end (markers, aborted ranges, staged offsets) and the commit barrier are each one
BEGIN IMMEDIATE transaction. The decisions are in `txn_rules`; this module reads and writes
rows."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable, Sequence
from uuid import UUID

from lakelog.coordinator import txn_rules
from lakelog.coordinator.engine import drive
from lakelog.coordinator.interface import OffsetCommit, PartitionKey
from lakelog.coordinator.ops.cluster import allocate_producer_id
from lakelog.coordinator.ops.groups import commit_offsets
from lakelog.coordinator.sqlite.engine import SqliteSession
from lakelog.coordinator.sqlite.rows import find_partition
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


def load_txn(conn: sqlite3.Connection, transactional_id: str) -> TxnRow | None:
    row = conn.execute(
        f"SELECT {TXN_COLUMNS} FROM transactions WHERE transactional_id = ?",
        (transactional_id,),
    ).fetchone()
    return None if row is None else TxnRow.from_values(row)


def load_ongoing(conn: sqlite3.Connection, producer_ids: Iterable[int]) -> dict[int, OngoingTxn]:
    """The commit barrier's view of the given producers' transactions (absent: none)."""
    found: dict[int, OngoingTxn] = {}
    for pid in producer_ids:
        row = conn.execute(
            "SELECT transactional_id, producer_epoch, state FROM transactions"
            " WHERE producer_id = ?",
            (pid,),
        ).fetchone()
        if row is None:
            continue
        txn = OngoingTxn(row[0], row[1], TxnState(row[2]))
        for topic_id, partition, first in conn.execute(
            "SELECT topic_id, partition, first_offset FROM txn_partitions"
            " WHERE transactional_id = ?",
            (row[0],),
        ):
            txn.first_offsets[(topic_id, partition)] = first
        found[pid] = txn
    return found


def record_first_offsets(
    conn: sqlite3.Connection, firsts: Iterable[tuple[str, int, int, int]]
) -> None:
    """(transactional id, topic row id, partition, offset) of transactions' first batches."""
    conn.executemany(
        "UPDATE txn_partitions SET first_offset = ? WHERE transactional_id = ?"
        " AND topic_id = ? AND partition = ? AND first_offset < 0",
        [(offset, tid, topic, part) for tid, topic, part, offset in firsts],
    )


# ---------------------------------------------------------------- InitProducerId


def init_transactional_producer(
    conn: sqlite3.Connection, request: InitTxnProducerRequest, now_ms: int
) -> InitTxnProducerResult:
    row = load_txn(conn, request.transactional_id)
    if row is None:
        if request.producer_id >= 0:
            return InitTxnProducerResult(ErrorCode.producer_fenced)
        pid = drive(allocate_producer_id(SqliteSession(conn)))
        conn.execute(
            f"INSERT INTO transactions ({TXN_COLUMNS}, updated_at)"
            " VALUES (?, ?, 0, -1, ?, ?, -1, ?)",
            (request.transactional_id, pid, TxnState.EMPTY, request.transaction_timeout_ms, now_ms),
        )
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
        _end(
            conn,
            row,
            commit=False,
            epoch=row.producer_epoch if plan.new_producer_id else epoch,
            now_ms=now_ms,
        )
    if plan.new_producer_id:
        pid = drive(allocate_producer_id(SqliteSession(conn)))
    conn.execute(
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


def _begin(conn: sqlite3.Connection, row: TxnRow, now_ms: int) -> None:
    if row.state != TxnState.ONGOING:
        conn.execute(
            "UPDATE transactions SET state = ?, start_time = ?, updated_at = ?"
            " WHERE transactional_id = ?",
            (TxnState.ONGOING, now_ms, now_ms, row.transactional_id),
        )


def add_partitions_to_txn(
    conn: sqlite3.Connection,
    txn: TxnRef,
    partitions: Sequence[PartitionKey],
    now_ms: int,
    verify_only: bool,
) -> list[ErrorCode]:
    row = load_txn(conn, txn.transactional_id)
    error = txn_rules.check_producer(row, txn)
    if error != ErrorCode.none:
        return [error] * len(partitions)
    assert row is not None
    found = [find_partition(conn, p.topic_id, p.partition) for p in partitions]
    if any(part is None for part in found):
        return [
            ErrorCode.unknown_topic_or_partition
            if part is None
            else ErrorCode.operation_not_attempted
            for part in found
        ]
    keys = [(part.topic_id, part.partition) for part in found if part is not None]
    if verify_only:
        ongoing = row.state == TxnState.ONGOING
        return [
            ErrorCode.none
            if ongoing and _in_txn(conn, row.transactional_id, key)
            else ErrorCode.invalid_txn_state
            for key in keys
        ]
    _begin(conn, row, now_ms)
    conn.executemany(
        "INSERT INTO txn_partitions (transactional_id, topic_id, partition) VALUES (?, ?, ?)"
        " ON CONFLICT DO NOTHING",
        [(row.transactional_id, *key) for key in keys],
    )
    return [ErrorCode.none] * len(partitions)


def _in_txn(conn: sqlite3.Connection, transactional_id: str, key: tuple[int, int]) -> bool:
    return (
        conn.execute(
            "SELECT 1 FROM txn_partitions WHERE transactional_id = ? AND topic_id = ?"
            " AND partition = ?",
            (transactional_id, *key),
        ).fetchone()
        is not None
    )


def add_offsets_to_txn(
    conn: sqlite3.Connection, txn: TxnRef, group_id: str, now_ms: int
) -> ErrorCode:
    row = load_txn(conn, txn.transactional_id)
    error = txn_rules.check_producer(row, txn)
    if error != ErrorCode.none:
        return error
    assert row is not None
    _begin(conn, row, now_ms)
    conn.execute(
        "INSERT INTO txn_groups (transactional_id, group_id) VALUES (?, ?) ON CONFLICT DO NOTHING",
        (row.transactional_id, group_id),
    )
    return ErrorCode.none


def txn_offset_commit(
    conn: sqlite3.Connection, request: TxnOffsetCommitRequest, now_ms: int
) -> list[ErrorCode]:
    del now_ms  # the commit time is the transaction's commit
    row = load_txn(conn, request.txn.transactional_id)
    error = txn_rules.check_producer(row, request.txn)
    if error == ErrorCode.none:
        assert row is not None
        added = conn.execute(
            "SELECT 1 FROM txn_groups WHERE transactional_id = ? AND group_id = ?",
            (row.transactional_id, request.group_id),
        ).fetchone()
        if row.state != TxnState.ONGOING or added is None:
            error = ErrorCode.invalid_txn_state
    if error != ErrorCode.none:
        return [error] * len(request.offsets)
    conn.executemany(
        "INSERT INTO txn_offsets (transactional_id, group_id, topic, partition,"
        " committed_offset, leader_epoch, metadata) VALUES (?, ?, ?, ?, ?, ?, ?)"
        " ON CONFLICT (transactional_id, group_id, topic, partition) DO UPDATE SET"
        " committed_offset = excluded.committed_offset, leader_epoch = excluded.leader_epoch,"
        " metadata = excluded.metadata",
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


def end_txn(conn: sqlite3.Connection, txn: TxnRef, commit: bool, now_ms: int) -> ErrorCode:
    row = load_txn(conn, txn.transactional_id)
    error, write = txn_rules.check_end(row, txn, commit)
    if write:
        assert row is not None
        _end(conn, row, commit, row.producer_epoch, now_ms)
        conn.execute(
            "UPDATE transactions SET state = ?, start_time = -1, updated_at = ?"
            " WHERE transactional_id = ?",
            (
                TxnState.COMPLETE_COMMIT if commit else TxnState.COMPLETE_ABORT,
                now_ms,
                row.transactional_id,
            ),
        )
    return error


def abort_expired_transactions(conn: sqlite3.Connection, now_ms: int) -> list[str]:
    rows = [
        TxnRow.from_values(values)
        for values in conn.execute(
            f"SELECT {TXN_COLUMNS} FROM transactions WHERE state = ? ORDER BY transactional_id",
            (TxnState.ONGOING,),
        )
    ]
    aborted: list[str] = []
    for row in rows:
        if not txn_rules.expired(row, now_ms):
            continue
        # Fence the producer that abandoned it: its epoch is bumped, and it cannot bump back
        # (last epoch -1); at the epoch limit the markers keep the current epoch.
        epoch = min(row.producer_epoch + 1, MAX_PRODUCER_EPOCH)
        _end(conn, row, commit=False, epoch=epoch, now_ms=now_ms)
        conn.execute(
            "UPDATE transactions SET producer_epoch = ?, last_producer_epoch = -1, state = ?,"
            " start_time = -1, updated_at = ? WHERE transactional_id = ?",
            (epoch, TxnState.COMPLETE_ABORT, now_ms, row.transactional_id),
        )
        aborted.append(row.transactional_id)
    return aborted


def _end(conn: sqlite3.Connection, row: TxnRow, commit: bool, epoch: int, now_ms: int) -> None:
    """Write a marker in every partition of the transaction (fixed order), record the
    aborted ranges, apply or drop the staged offsets, and forget the transaction's sets."""
    tid = row.transactional_id
    control = CONTROL_COMMIT if commit else CONTROL_ABORT
    parts = conn.execute(
        "SELECT tp.topic_id, tp.partition, tp.first_offset, p.high_watermark, p.max_timestamp"
        " FROM txn_partitions tp JOIN partitions p"
        " ON p.topic_id = tp.topic_id AND p.partition = tp.partition"
        " WHERE tp.transactional_id = ? ORDER BY tp.topic_id, tp.partition",
        (tid,),
    ).fetchall()
    for topic_id, partition, first_offset, offset, max_timestamp in parts:
        high = max(max_timestamp, now_ms)
        conn.execute(
            "INSERT INTO batches (topic_id, partition, base_offset, last_offset, file_id,"
            " byte_offset, byte_size, base_timestamp, max_timestamp, timestamp_type,"
            " log_append_time, timestamp_high, producer_id, producer_epoch, base_sequence,"
            " is_transactional, control_type)"
            " VALUES (?, ?, ?, ?, NULL, 0, 0, ?, ?, 0, -1, ?, ?, ?, -1, 1, ?)",
            (
                topic_id,
                partition,
                offset,
                offset,
                now_ms,
                now_ms,
                high,
                row.producer_id,
                epoch,
                control,
            ),
        )
        conn.execute(
            "UPDATE partitions SET high_watermark = ?, max_timestamp = ?"
            " WHERE topic_id = ? AND partition = ?",
            (offset + 1, high, topic_id, partition),
        )
        if not commit and first_offset >= 0:
            conn.execute(
                "INSERT INTO aborted_txns (topic_id, partition, marker_offset, producer_id,"
                " first_offset) VALUES (?, ?, ?, ?, ?)",
                (topic_id, partition, offset, row.producer_id, first_offset),
            )
    if commit:
        staged = conn.execute(
            "SELECT group_id, topic, partition, committed_offset, leader_epoch, metadata"
            " FROM txn_offsets WHERE transactional_id = ? ORDER BY group_id",
            (tid,),
        ).fetchall()
        by_group: dict[str, list[OffsetCommit]] = {}
        for group_id, topic, partition, offset, leader_epoch, metadata in staged:
            by_group.setdefault(group_id, []).append(
                OffsetCommit(topic, partition, offset, leader_epoch, metadata)
            )
        for group_id, offsets in by_group.items():
            drive(commit_offsets(SqliteSession(conn), group_id, offsets, now_ms))
    for table in ("txn_offsets", "txn_groups", "txn_partitions"):
        conn.execute(f"DELETE FROM {table} WHERE transactional_id = ?", (tid,))


# ---------------------------------------------------------------- describing


def describe_transactions(
    conn: sqlite3.Connection, transactional_ids: Sequence[str]
) -> list[TransactionInfo | None]:
    answers: list[TransactionInfo | None] = []
    for tid in transactional_ids:
        row = load_txn(conn, tid)
        if row is None:
            answers.append(None)
            continue
        partitions = [
            PartitionKey(UUID(topic_uuid), partition)
            for topic_uuid, partition in conn.execute(
                "SELECT t.topic_uuid, tp.partition FROM txn_partitions tp"
                " JOIN topics t ON t.id = tp.topic_id WHERE tp.transactional_id = ?"
                " ORDER BY t.name, tp.partition",
                (tid,),
            )
        ]
        groups = [
            g
            for (g,) in conn.execute(
                "SELECT group_id FROM txn_groups WHERE transactional_id = ? ORDER BY group_id",
                (tid,),
            )
        ]
        answers.append(row.info(partitions, groups))
    return answers


def list_transactions(conn: sqlite3.Connection) -> list[TransactionInfo]:
    return [
        TxnRow.from_values(values).info([], [])
        for values in conn.execute(
            f"SELECT {TXN_COLUMNS} FROM transactions ORDER BY transactional_id"
        )
    ]


def describe_producers(
    conn: sqlite3.Connection, partitions: Sequence[PartitionKey]
) -> list[DescribeProducersResult]:
    results: list[DescribeProducersResult] = []
    for key in partitions:
        part = find_partition(conn, key.topic_id, key.partition)
        if part is None:
            results.append(DescribeProducersResult(ErrorCode.unknown_topic_or_partition))
            continue
        where = (part.topic_id, part.partition)
        # The newest remembered batch of each producer, with its batch's timestamp.
        rows = conn.execute(
            "SELECT s.producer_id, s.producer_epoch, s.last_sequence, b.max_timestamp"
            " FROM producer_state s LEFT JOIN batches b ON b.topic_id = s.topic_id"
            " AND b.partition = s.partition AND b.last_offset = s.last_offset"
            " WHERE s.topic_id = ? AND s.partition = ? AND s.base_offset = ("
            "  SELECT MAX(base_offset) FROM producer_state x WHERE x.topic_id = s.topic_id"
            "  AND x.partition = s.partition AND x.producer_id = s.producer_id)"
            " ORDER BY s.producer_id",
            where,
        ).fetchall()
        starts = dict(
            conn.execute(
                "SELECT t.producer_id, tp.first_offset FROM txn_partitions tp"
                " JOIN transactions t ON t.transactional_id = tp.transactional_id"
                " WHERE tp.topic_id = ? AND tp.partition = ? AND tp.first_offset >= 0",
                where,
            ).fetchall()
        )
        results.append(txn_rules.producer_states(rows, starts))
    return results


def pending_txn_offsets(conn: sqlite3.Connection, group_id: str) -> set[tuple[str, int]]:
    return {
        (topic, partition)
        for topic, partition in conn.execute(
            "SELECT topic, partition FROM txn_offsets WHERE group_id = ?", (group_id,)
        )
    }
