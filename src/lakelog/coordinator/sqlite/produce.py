"""commit_file in SQLite: assign dense offsets to an uploaded object's batches, with the
fencing and idempotent-producer checks, and record the object. Runs inside the caller's
BEGIN IMMEDIATE transaction, so commits from every process are serialized."""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any
from uuid import UUID

from lakelog.coordinator import idempotence
from lakelog.coordinator.idempotence import ProducerBatch
from lakelog.coordinator.interface import (
    NO_TIMESTAMP,
    CommitBatch,
    CommitBatchResult,
    TimestampType,
)
from lakelog.coordinator.sqlite.rows import (
    PartitionRow,
    batch_timestamp,
    find_partition,
    now_ms,
)
from lakelog.errors import ErrorCode

_ProducerKey = tuple[int, int, int]
"""(topic row id, partition, producer id)."""


@dataclass(slots=True)
class _Commit:
    """What one commit_file call changes, kept in memory and written at the end."""

    now: int
    partitions: dict[tuple[UUID, int], PartitionRow | None] = field(default_factory=dict)
    touched: dict[tuple[int, int], PartitionRow] = field(default_factory=dict)
    added_bytes: dict[tuple[int, int], int] = field(default_factory=dict)
    histories: dict[_ProducerKey, list[ProducerBatch]] = field(default_factory=dict)
    changed_producers: set[_ProducerKey] = field(default_factory=set)
    rows: list[tuple[Any, ...]] = field(default_factory=list)
    live_bytes: int = 0


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
    commit = _Commit(now=now_ms())
    results = [
        CommitBatchResult(ErrorCode.stale_broker_epoch)
        if fenced
        else _commit_batch(conn, commit, batch, file_size)
        for batch in batches
    ]
    _write(conn, commit, object_key, uploader_broker_id, broker_epoch, file_size)
    return results


def _newer_epoch_exists(conn: sqlite3.Connection, broker_id: int, broker_epoch: int) -> bool:
    row = conn.execute(
        "SELECT 1 FROM brokers WHERE broker_id = ? AND broker_epoch > ?",
        (broker_id, broker_epoch),
    ).fetchone()
    return row is not None


def _commit_batch(
    conn: sqlite3.Connection, commit: _Commit, batch: CommitBatch, file_size: int
) -> CommitBatchResult:
    if (
        batch.record_count < 1
        or batch.byte_size < 1
        or batch.byte_offset < 0
        or batch.byte_offset + batch.byte_size > file_size
    ):
        return CommitBatchResult(ErrorCode.corrupt_message)
    part = _partition(conn, commit, batch.topic_id, batch.partition)
    if part is None:
        return CommitBatchResult(ErrorCode.unknown_topic_or_partition)
    producer_key = (part.topic_id, part.partition, batch.producer_id)
    history: list[ProducerBatch] = []
    if batch.producer_id >= 0:
        history = _history(conn, commit, producer_key)
        verdict = idempotence.check(history, batch)
        if verdict.error != ErrorCode.none:
            return CommitBatchResult(verdict.error)
        if verdict.duplicate_of is not None:
            return CommitBatchResult(
                ErrorCode.none,
                base_offset=verdict.duplicate_of.base_offset,
                log_start_offset=part.log_start_offset,
                is_duplicate=True,
            )

    base_offset = part.high_watermark
    last_offset = base_offset + batch.record_count - 1
    part.high_watermark = last_offset + 1
    log_append_time = (
        commit.now if batch.timestamp_type == TimestampType.LOG_APPEND_TIME else NO_TIMESTAMP
    )
    timestamp = batch_timestamp(batch.timestamp_type, batch.max_timestamp, log_append_time)
    part.max_timestamp = max(part.max_timestamp, timestamp)
    key = (part.topic_id, part.partition)
    commit.touched[key] = part
    commit.added_bytes[key] = commit.added_bytes.get(key, 0) + batch.byte_size
    commit.live_bytes += batch.byte_size
    commit.rows.append(
        (
            part.topic_id,
            part.partition,
            base_offset,
            last_offset,
            batch.byte_offset,
            batch.byte_size,
            batch.base_timestamp,
            batch.max_timestamp,
            int(batch.timestamp_type),
            log_append_time,
            part.max_timestamp,
            batch.producer_id,
            batch.producer_epoch,
            batch.base_sequence,
            int(batch.is_transactional),
        )
    )
    if batch.producer_id >= 0:
        entry = ProducerBatch(
            producer_epoch=batch.producer_epoch,
            base_sequence=batch.base_sequence,
            last_sequence=batch.last_sequence,
            base_offset=base_offset,
            last_offset=last_offset,
        )
        commit.histories[producer_key] = idempotence.remember(history, entry)
        commit.changed_producers.add(producer_key)
    return CommitBatchResult(
        ErrorCode.none,
        base_offset=base_offset,
        log_append_time=log_append_time,
        log_start_offset=part.log_start_offset,
    )


def _partition(
    conn: sqlite3.Connection, commit: _Commit, topic: UUID, partition: int
) -> PartitionRow | None:
    key = (topic, partition)
    if key not in commit.partitions:
        commit.partitions[key] = find_partition(conn, topic, partition)
    return commit.partitions[key]


def _history(conn: sqlite3.Connection, commit: _Commit, key: _ProducerKey) -> list[ProducerBatch]:
    if key not in commit.histories:
        rows = conn.execute(
            "SELECT producer_epoch, base_sequence, last_sequence, base_offset, last_offset"
            " FROM producer_state WHERE topic_id = ? AND partition = ? AND producer_id = ?"
            " ORDER BY base_offset",
            key,
        ).fetchall()
        commit.histories[key] = [ProducerBatch(*row) for row in rows]
    return commit.histories[key]


def _write(
    conn: sqlite3.Connection,
    commit: _Commit,
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
