"""commit_file in SQLite: assign dense offsets to an uploaded object's batches, with the
fencing and idempotent-producer checks, and record the object. Runs inside the caller's
BEGIN IMMEDIATE transaction, so commits from every process are serialized.

A full object holds ~1,600 batches over ~100 partitions, so the statement count stays
fixed: one claims the object key, `_load` reads the partitions and the producer histories
with one statement each, the shared planner decides in Python, and `_write` writes one
statement per table (executemany runs one prepared statement for all rows)."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator, Sequence
from itertools import chain
from typing import Any

from lakelog.coordinator import commit_outcome
from lakelog.coordinator.commit_plan import (
    BATCH_ROW_COLUMNS,
    CommitPlan,
    Wanted,
    plan_batch,
    wanted,
)
from lakelog.coordinator.engine import drive
from lakelog.coordinator.idempotence import ProducerBatch
from lakelog.coordinator.interface import CommitBatch, CommitBatchResult
from lakelog.coordinator.mirror_rules import refuse_read_only
from lakelog.coordinator.ops.mirror_commit import read_only as mirror_read_only
from lakelog.coordinator.ops.rows import PartitionRow, now_ms
from lakelog.coordinator.sqlite import txn
from lakelog.coordinator.sqlite.engine import SqliteSession
from lakelog.errors import ErrorCode

KEYS_PER_STATEMENT = 300
"""Keys bound per lookup statement: at most 900 variables, under every SQLite's limit."""


def commit_file(
    conn: sqlite3.Connection,
    object_key: str,
    uploader_broker_id: int,
    broker_epoch: int,
    file_size: int,
    batches: Sequence[CommitBatch],
) -> list[CommitBatchResult]:
    # Taken under the write lock, so LogAppendTime follows the commit order.
    now = now_ms()
    file_id = _claim_key(conn, object_key, uploader_broker_id, broker_epoch, file_size, now)
    if file_id is None:
        # A second commit of one object would point two batch rows at the same bytes.
        return [CommitBatchResult(ErrorCode.invalid_request) for _ in batches]
    if broker_epoch >= 0 and _newer_epoch_exists(conn, uploader_broker_id, broker_epoch):
        plan = CommitPlan(now=now, file_id=file_id)
        results = [CommitBatchResult(ErrorCode.stale_broker_epoch)] * len(batches)
    else:
        plan = _load(conn, wanted(batches, file_size), now, file_id)
        plan.txns = txn.load_ongoing(conn, {b.producer_id for b in batches if b.is_transactional})
        read_only = drive(mirror_read_only(SqliteSession(conn), plan.partitions))
        results = [plan_batch(plan, batch, file_size) for batch in batches]
        results = refuse_read_only(batches, results, read_only)
    _write(conn, plan)
    txn.record_first_offsets(conn, plan.txn_firsts)
    return results


def _claim_key(
    conn: sqlite3.Connection,
    object_key: str,
    uploader_broker_id: int,
    broker_epoch: int,
    file_size: int,
    now: int,
) -> int | None:
    """Insert the file row (its state and live bytes are written at the end); None if the
    key is known, and then nothing changed."""
    row = conn.execute(
        "INSERT INTO files (object_key, state, size, live_bytes, uploader_broker_id,"
        " broker_epoch, committed_at) VALUES (?, 'deleting', ?, 0, ?, ?, ?)"
        " ON CONFLICT (object_key) DO NOTHING RETURNING id",
        (object_key, file_size, uploader_broker_id, broker_epoch, now),
    ).fetchone()
    return None if row is None else int(row[0])


def _newer_epoch_exists(conn: sqlite3.Connection, broker_id: int, broker_epoch: int) -> bool:
    row = conn.execute(
        "SELECT 1 FROM brokers WHERE broker_id = ? AND broker_epoch > ?",
        (broker_id, broker_epoch),
    ).fetchone()
    return row is not None


def _load(conn: sqlite3.Connection, want: Wanted, now: int, file_id: int) -> CommitPlan:
    """Everything the planner reads, one statement per kind of state (per chunk of keys).
    The one place to load more per-commit state."""
    plan = CommitPlan(now=now, file_id=file_id)
    topics = {topic: str(topic) for topic, _ in want.partitions}
    by_text = {text: topic for topic, text in topics.items()}
    for keys in _chunks(want.partitions):
        for row in conn.execute(
            f"WITH k (topic_uuid, partition) AS (VALUES {_placeholders(2, len(keys))})"
            " SELECT t.topic_uuid, p.topic_id, p.partition, p.log_start_offset,"
            " p.high_watermark, p.byte_size, p.max_timestamp"
            " FROM k JOIN topics t ON t.topic_uuid = k.topic_uuid"
            " JOIN partitions p ON p.topic_id = t.id AND p.partition = k.partition",
            list(chain.from_iterable((topics[topic], partition) for topic, partition in keys)),
        ):
            plan.partitions[(by_text[row[0]], row[2])] = PartitionRow(*row[1:])
    producers = [
        (part.topic_id, partition, pid)
        for topic, partition, pid in want.producers
        if (part := plan.partitions.get((topic, partition))) is not None
    ]
    histories = plan.histories
    for keys in _chunks(producers):
        for row in conn.execute(
            f"WITH k (topic_id, partition, pid) AS (VALUES {_placeholders(3, len(keys))})"
            " SELECT s.topic_id, s.partition, s.producer_id, s.producer_epoch,"
            " s.base_sequence, s.last_sequence, s.base_offset, s.last_offset"
            " FROM k JOIN producer_state s ON s.topic_id = k.topic_id"
            "  AND s.partition = k.partition AND s.producer_id = k.pid"
            " ORDER BY s.topic_id, s.partition, s.producer_id, s.base_offset",
            list(chain.from_iterable(keys)),
        ):
            key = row[:3]
            history = histories.get(key)
            if history is None:
                history = histories[key] = []
            history.append(ProducerBatch(*row[3:]))
    return plan


def _chunks(keys: list[Any]) -> Iterator[list[Any]]:
    for start in range(0, len(keys), KEYS_PER_STATEMENT):
        yield keys[start : start + KEYS_PER_STATEMENT]


def _placeholders(columns: int, rows: int) -> str:
    one = "(" + ", ".join("?" * columns) + ")"
    return ", ".join([one] * rows)


_INSERT_BATCHES = (
    f"INSERT INTO batches ({', '.join(BATCH_ROW_COLUMNS)})"
    f" VALUES ({', '.join('?' * len(BATCH_ROW_COLUMNS))})"
)


def _write(conn: sqlite3.Connection, plan: CommitPlan) -> None:
    state, marked_at = ("committed", None) if plan.rows else ("deleting", plan.now)
    conn.execute(
        "UPDATE files SET state = ?, live_bytes = ?, marked_at = ? WHERE id = ?",
        (state, plan.live_bytes, marked_at, plan.file_id),
    )
    if not plan.rows:
        return
    conn.executemany(_INSERT_BATCHES, plan.rows)
    conn.executemany(
        "UPDATE partitions SET high_watermark = ?, byte_size = byte_size + ?,"
        " max_timestamp = ? WHERE topic_id = ? AND partition = ?",
        [
            (part.high_watermark, plan.added_bytes[key], part.max_timestamp, *key)
            for key, part in plan.touched.items()
        ],
    )
    if plan.changed_producers:
        conn.executemany(
            "DELETE FROM producer_state WHERE topic_id = ? AND partition = ? AND producer_id = ?",
            plan.changed_producers,
        )
        conn.executemany(
            "INSERT INTO producer_state (topic_id, partition, producer_id, producer_epoch,"
            " base_sequence, last_sequence, base_offset, last_offset)"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            [(*key, *e) for key in plan.changed_producers for e in plan.histories[key]],
        )


_FILE = commit_outcome.file_query("?")
_OUTCOME = commit_outcome.batches_query("?")


def committed_batches(
    conn: sqlite3.Connection, object_key: str
) -> commit_outcome.CommitOutcome | None:
    row = conn.execute(_FILE, (object_key,)).fetchone()
    if row is None:
        return None
    return commit_outcome.outcome(conn.execute(_OUTCOME, (row[0],)).fetchall())
