"""Mirror commits in SQLite: mirrored batches recorded at their source offsets, the
partitions' transaction index rebuilt from them, and the read-only check commit_file
makes. Runs inside the caller's BEGIN IMMEDIATE transaction; decisions in mirror_rules."""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from uuid import UUID

from lakelog.coordinator.interface import CommitBatchResult
from lakelog.coordinator.mirror_rules import (
    MIRROR_BATCH_COLUMNS,
    MirrorPlan,
    MirrorTarget,
    plan_mirror_batch,
    well_formed,
)
from lakelog.coordinator.mirror_types import MirrorBatch, MirrorState
from lakelog.coordinator.ops.rows import PartitionRow, now_ms
from lakelog.coordinator.sqlite.rows import find_partition
from lakelog.errors import ErrorCode


def commit_mirror(
    conn: sqlite3.Connection,
    object_key: str,
    broker_id: int,
    broker_epoch: int,
    file_size: int,
    batches: Sequence[MirrorBatch],
) -> list[CommitBatchResult]:
    now = now_ms()
    row = conn.execute(
        "INSERT INTO files (object_key, state, size, live_bytes, uploader_broker_id,"
        " broker_epoch, committed_at) VALUES (?, 'deleting', ?, 0, ?, ?, ?)"
        " ON CONFLICT (object_key) DO NOTHING RETURNING id",
        (object_key, file_size, broker_id, broker_epoch, now),
    ).fetchone()
    if row is None:
        return [CommitBatchResult(ErrorCode.invalid_request) for _ in batches]
    plan = MirrorPlan(now=now, broker_id=broker_id, file_id=int(row[0]))
    fenced = broker_epoch >= 0 and (
        conn.execute(
            "SELECT 1 FROM brokers WHERE broker_id = ? AND broker_epoch > ?",
            (broker_id, broker_epoch),
        ).fetchone()
        is not None
    )
    if fenced:
        results = [CommitBatchResult(ErrorCode.stale_broker_epoch)] * len(batches)
    else:
        _load_targets(conn, plan, batches, file_size)
        results = [plan_mirror_batch(plan, b, file_size) for b in batches]
    _write(conn, plan)
    return results


def _load_targets(
    conn: sqlite3.Connection, plan: MirrorPlan, batches: Sequence[MirrorBatch], file_size: int
) -> None:
    for key in dict.fromkeys(
        (b.topic_id, b.partition) for b in batches if well_formed(b, file_size)
    ):
        part = find_partition(conn, *key)
        if part is None:
            continue
        where = (part.topic_id, part.partition)
        row = conn.execute(
            "SELECT state, lease_owner, source_epoch FROM mirror_partitions"
            " WHERE topic_id = ? AND partition = ?",
            where,
        ).fetchone()
        if row is None:
            # A topic nobody mirrors: no mirror commit may write it.
            plan.targets[key] = MirrorTarget(part, MirrorState.STOPPED, -1)
            continue
        target = MirrorTarget(part, MirrorState(row[0]), int(row[1]), source_epoch=int(row[2]))
        target.open_txns = dict(
            conn.execute(
                "SELECT producer_id, first_offset FROM mirror_txns"
                " WHERE topic_id = ? AND partition = ?",
                where,
            ).fetchall()
        )
        plan.targets[key] = target


def _write(conn: sqlite3.Connection, plan: MirrorPlan) -> None:
    state, marked_at = ("committed", None) if plan.rows else ("deleting", plan.now)
    conn.execute(
        "UPDATE files SET state = ?, live_bytes = ?, committed_at = ?, marked_at = ? WHERE id = ?",
        (state, plan.live_bytes, plan.now, marked_at, plan.file_id),
    )
    if plan.rows:
        conn.executemany(
            f"INSERT INTO batches ({', '.join(MIRROR_BATCH_COLUMNS)})"
            f" VALUES ({', '.join('?' * len(MIRROR_BATCH_COLUMNS))})",
            plan.rows,
        )
    touched = plan.touched()
    for t in touched:
        where = (t.part.topic_id, t.part.partition)
        conn.execute(
            "UPDATE partitions SET high_watermark = ?, byte_size = byte_size + ?,"
            " max_timestamp = ? WHERE topic_id = ? AND partition = ?",
            (t.part.high_watermark, t.added_bytes, t.part.max_timestamp, *where),
        )
        conn.execute(
            "UPDATE mirror_partitions SET source_epoch = ?, updated_at = ?"
            " WHERE topic_id = ? AND partition = ?",
            (t.source_epoch, plan.now, *where),
        )
        conn.execute("DELETE FROM mirror_txns WHERE topic_id = ? AND partition = ?", where)
        conn.executemany(
            "INSERT INTO mirror_txns (topic_id, partition, producer_id, first_offset)"
            " VALUES (?, ?, ?, ?)",
            [(*where, pid, first) for pid, first in t.open_txns.items()],
        )
    conn.executemany(
        "INSERT INTO aborted_txns (topic_id, partition, marker_offset, producer_id,"
        " first_offset) VALUES (?, ?, ?, ?, ?) ON CONFLICT DO NOTHING",
        plan.aborted,
    )


def read_only(
    conn: sqlite3.Connection, partitions: dict[tuple[UUID, int], PartitionRow]
) -> set[tuple[UUID, int]]:
    """Take the partitions of mirror topics (a row not STOPPED) out of `partitions` and
    return their keys: commit_file answers their batches READ_ONLY_ERROR
    (`mirror_rules.refuse_read_only`)."""
    topic_rows = sorted({part.topic_id for part in partitions.values()})
    if not topic_rows:
        return set()
    locked = {
        (int(t), int(p))
        for t, p in conn.execute(
            "SELECT topic_id, partition FROM mirror_partitions WHERE state != 'STOPPED'"
            f" AND topic_id IN ({', '.join('?' * len(topic_rows))})",
            topic_rows,
        )
    }
    found = {k for k, part in partitions.items() if (part.topic_id, part.partition) in locked}
    for key in found:
        del partitions[key]
    return found
