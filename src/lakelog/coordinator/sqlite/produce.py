"""commit_file in SQLite: assign dense offsets to an uploaded object's batches, with the
fencing and idempotent-producer checks, and record the object. Runs inside the caller's
BEGIN IMMEDIATE transaction, so commits from every process are serialized."""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence

from lakelog.coordinator.commit_plan import CommitPlan, plan_batch, producer_key
from lakelog.coordinator.idempotence import ProducerBatch
from lakelog.coordinator.interface import (
    CommitBatch,
    CommitBatchResult,
)
from lakelog.coordinator.sqlite import txn
from lakelog.coordinator.sqlite.rows import (
    find_partition,
    now_ms,
)
from lakelog.errors import ErrorCode


def commit_file(
    conn: sqlite3.Connection,
    object_key: str,
    uploader_broker_id: int,
    broker_epoch: int,
    file_size: int,
    batches: Sequence[CommitBatch],
) -> list[CommitBatchResult]:
    known = conn.execute("SELECT 1 FROM files WHERE object_key = ?", (object_key,)).fetchone()
    if known:
        # A second commit of one object would point two batch rows at the same bytes.
        return [CommitBatchResult(ErrorCode.invalid_request) for _ in batches]
    fenced = broker_epoch >= 0 and _newer_epoch_exists(conn, uploader_broker_id, broker_epoch)
    # Taken under the write lock, so LogAppendTime follows the commit order.
    commit = CommitPlan(now=now_ms())
    commit.txns = txn.load_ongoing(conn, {b.producer_id for b in batches if b.is_transactional})
    results = [
        CommitBatchResult(ErrorCode.stale_broker_epoch)
        if fenced
        else _commit_batch(conn, commit, batch, file_size)
        for batch in batches
    ]
    _write(conn, commit, object_key, uploader_broker_id, broker_epoch, file_size)
    txn.record_first_offsets(conn, commit.txn_firsts)
    return results


def _newer_epoch_exists(conn: sqlite3.Connection, broker_id: int, broker_epoch: int) -> bool:
    row = conn.execute(
        "SELECT 1 FROM brokers WHERE broker_id = ? AND broker_epoch > ?",
        (broker_id, broker_epoch),
    ).fetchone()
    return row is not None


def _commit_batch(
    conn: sqlite3.Connection, commit: CommitPlan, batch: CommitBatch, file_size: int
) -> CommitBatchResult:
    """Load what the batch needs on first use, then plan it."""
    key = (batch.topic_id, batch.partition)
    if key not in commit.partitions:
        commit.partitions[key] = find_partition(conn, batch.topic_id, batch.partition)
    part = commit.partitions[key]
    if part is not None and batch.producer_id >= 0:
        pkey = producer_key(part, batch)
        if pkey not in commit.histories:
            rows = conn.execute(
                "SELECT producer_epoch, base_sequence, last_sequence, base_offset,"
                " last_offset FROM producer_state WHERE topic_id = ? AND partition = ?"
                " AND producer_id = ? ORDER BY base_offset",
                pkey,
            ).fetchall()
            commit.histories[pkey] = [ProducerBatch(*row) for row in rows]
    return plan_batch(commit, batch, file_size)


def _write(
    conn: sqlite3.Connection,
    commit: CommitPlan,
    object_key: str,
    uploader_broker_id: int,
    broker_epoch: int,
    file_size: int,
) -> None:
    state, marked_at = ("committed", None) if commit.rows else ("deleting", commit.now)
    cursor = conn.execute(
        "INSERT INTO files (object_key, state, size, live_bytes, uploader_broker_id,"
        " broker_epoch, committed_at, marked_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
        (
            object_key,
            state,
            file_size,
            commit.live_bytes,
            uploader_broker_id,
            broker_epoch,
            commit.now,
            marked_at,
        ),
    )
    file_id = cursor.lastrowid
    conn.executemany(
        "INSERT INTO batches (topic_id, partition, base_offset, last_offset, byte_offset,"
        " byte_size, base_timestamp, max_timestamp, timestamp_type, log_append_time,"
        " timestamp_high, producer_id, producer_epoch, base_sequence, is_transactional,"
        " file_id) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        [(*row, file_id) for row in commit.rows],
    )
    conn.executemany(
        "UPDATE partitions SET high_watermark = ?, byte_size = byte_size + ?,"
        " max_timestamp = ? WHERE topic_id = ? AND partition = ?",
        [
            (part.high_watermark, commit.added_bytes[key], part.max_timestamp, *key)
            for key, part in commit.touched.items()
        ],
    )
    for key in commit.changed_producers:
        conn.execute(
            "DELETE FROM producer_state WHERE topic_id = ? AND partition = ? AND producer_id = ?",
            key,
        )
        conn.executemany(
            "INSERT INTO producer_state (topic_id, partition, producer_id, producer_epoch,"
            " base_sequence, last_sequence, base_offset, last_offset)"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            [
                (
                    *key,
                    e.producer_epoch,
                    e.base_sequence,
                    e.last_sequence,
                    e.base_offset,
                    e.last_offset,
                )
                for e in commit.histories[key]
            ],
        )
