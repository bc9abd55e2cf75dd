"""Dropping batches: the one place that lowers files' live bytes and marks emptied files
for deletion, so topic deletion, DeleteRecords and retention all agree. Objects are never
deleted here; the cleaner removes them after a grace period."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable


def release_file_bytes(
    conn: sqlite3.Connection, freed: Iterable[tuple[int, int]], marked_at: int
) -> None:
    """Lower each (file id, bytes) file's live bytes; a file left with none is marked
    'deleting' at `marked_at`."""
    conn.executemany(
        "UPDATE files SET live_bytes = live_bytes - :freed,"
        " state = CASE WHEN live_bytes - :freed <= 0 THEN 'deleting' ELSE state END,"
        " marked_at = CASE WHEN live_bytes - :freed <= 0 AND state = 'committed'"
        "   THEN :marked_at ELSE marked_at END"
        " WHERE id = :file_id",
        [{"file_id": f, "freed": b, "marked_at": marked_at} for f, b in freed],
    )


def drop_batches_below(
    conn: sqlite3.Connection, topic_id: int, partition: int, log_start: int, marked_at: int
) -> tuple[int, int]:
    """Drop the partition's batches that end below `log_start`, the aborted ranges whose
    marker is below it, and forget producers whose last batch is below it (as Kafka does
    when the log start moves). Returns (batches, bytes) dropped; markers count as batches
    of no bytes and no file."""
    key = (topic_id, partition, log_start)
    per_file = conn.execute(
        "SELECT file_id, COUNT(*), SUM(byte_size) FROM batches"
        " WHERE topic_id = ? AND partition = ? AND last_offset < ? GROUP BY file_id",
        key,
    ).fetchall()
    conn.execute(
        "DELETE FROM producer_state WHERE topic_id = ? AND partition = ? AND producer_id IN ("
        " SELECT producer_id FROM producer_state WHERE topic_id = ? AND partition = ?"
        " GROUP BY producer_id HAVING MAX(last_offset) < ?)",
        (topic_id, partition, topic_id, partition, log_start),
    )
    conn.execute(
        "DELETE FROM aborted_txns WHERE topic_id = ? AND partition = ? AND marker_offset < ?", key
    )
    if not per_file:
        return 0, 0
    conn.execute(
        "DELETE FROM batches WHERE topic_id = ? AND partition = ? AND last_offset < ?", key
    )
    release_file_bytes(conn, [(f, size) for f, _, size in per_file if f is not None], marked_at)
    count = sum(n for _, n, _ in per_file)
    size = sum(s for _, _, s in per_file)
    conn.execute(
        "UPDATE partitions SET byte_size = byte_size - ? WHERE topic_id = ? AND partition = ?",
        (size, topic_id, partition),
    )
    return count, size


def drop_topic(conn: sqlite3.Connection, topic_id: int, marked_at: int) -> None:
    """Remove a topic with its partitions, batches, producer state and transaction rows
    (an ongoing transaction just loses the partitions; its end writes no marker there)."""
    per_file = conn.execute(
        "SELECT file_id, SUM(byte_size) FROM batches"
        " WHERE topic_id = ? AND file_id IS NOT NULL GROUP BY file_id",
        (topic_id,),
    ).fetchall()
    conn.execute("DELETE FROM batches WHERE topic_id = ?", (topic_id,))
    release_file_bytes(conn, per_file, marked_at)
    conn.execute("DELETE FROM producer_state WHERE topic_id = ?", (topic_id,))
    conn.execute("DELETE FROM aborted_txns WHERE topic_id = ?", (topic_id,))
    conn.execute("DELETE FROM txn_partitions WHERE topic_id = ?", (topic_id,))
    conn.execute("DELETE FROM partitions WHERE topic_id = ?", (topic_id,))
    conn.execute("DELETE FROM topics WHERE id = ?", (topic_id,))
