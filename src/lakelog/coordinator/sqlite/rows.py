"""Lookups of the SQLite transaction bodies not yet moved to `coordinator/ops`."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable
from uuid import UUID

from lakelog.coordinator.engine import drive
from lakelog.coordinator.ops.release import FreedBytes
from lakelog.coordinator.ops.rows import PartitionRow
from lakelog.coordinator.sqlite.engine import SqliteSession


def find_partition(conn: sqlite3.Connection, topic: UUID, partition: int) -> PartitionRow | None:
    row = conn.execute(
        "SELECT p.topic_id, p.partition, p.log_start_offset, p.high_watermark, p.byte_size,"
        " p.max_timestamp FROM partitions p JOIN topics t ON t.id = p.topic_id"
        " WHERE t.topic_uuid = ? AND p.partition = ?",
        (str(topic), partition),
    ).fetchone()
    return None if row is None else PartitionRow(*row)


def release_file_bytes(
    conn: sqlite3.Connection, freed: Iterable[tuple[int, int]], now: int
) -> None:
    """Lower files' live bytes through the shared `ops.release.FreedBytes`."""
    gathered = FreedBytes()
    for file_id, size in freed:
        gathered.add(file_id, size)
    drive(gathered.apply(SqliteSession(conn), now))
