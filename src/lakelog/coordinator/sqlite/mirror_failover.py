"""Failover in SQLite: stopping a mirror's topics (no more commits), then truncating each
stopped partition to its last stable offset and making it writable. Runs inside the
caller's BEGIN IMMEDIATE transaction."""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence

from lakelog.coordinator.mirror_rules import truncation_point
from lakelog.coordinator.mirror_types import MirrorPartition, MirrorResult
from lakelog.coordinator.sqlite.mirror import alter_mirror, select_partitions
from lakelog.coordinator.sqlite.rows import release_file_bytes
from lakelog.errors import ErrorCode


def stop_mirror_topics(
    conn: sqlite3.Connection, name: str, topics: Sequence[str], now: int
) -> list[MirrorResult]:
    results: list[MirrorResult] = []
    for topic in topics:
        row = conn.execute(
            "UPDATE mirror_partitions SET state = 'STOPPING', lease_owner = -1,"
            " lease_expiry = 0, updated_at = ? WHERE mirror_name = ? AND state != 'STOPPED'"
            " AND topic_id = (SELECT id FROM topics WHERE name = ?) RETURNING partition",
            (now, name, topic),
        ).fetchall()
        held = conn.execute(
            "SELECT 1 FROM mirror_partitions WHERE mirror_name = ?"
            " AND topic_id = (SELECT id FROM topics WHERE name = ?)",
            (name, topic),
        ).fetchone()
        if not row and held is None:
            results.append(
                MirrorResult(
                    ErrorCode.unknown_topic_or_partition,
                    f"mirror {name!r} does not mirror topic {topic!r}",
                )
            )
        else:
            results.append(MirrorResult(ErrorCode.none))
    alter_mirror(conn, name, (), (), topics)
    return results


def finish_mirror_failover(conn: sqlite3.Connection, now: int) -> list[MirrorPartition]:
    stopping = conn.execute(
        "SELECT mp.topic_id, mp.partition, t.name FROM mirror_partitions mp"
        " JOIN topics t ON t.id = mp.topic_id WHERE mp.state = 'STOPPING'"
        " ORDER BY mp.topic_id, mp.partition"
    ).fetchall()
    done: list[tuple[int, int]] = []
    for topic_id, partition, topic in stopping:
        _truncate(conn, int(topic_id), int(partition), topic, now)
        done.append((int(topic_id), int(partition)))
    if not done:
        return []
    return [
        p
        for key in done
        for p in select_partitions(conn, "mp.topic_id = ? AND mp.partition = ?", key)
    ]


def _truncate(
    conn: sqlite3.Connection, topic_id: int, partition: int, topic: str, now: int
) -> None:
    where = (topic_id, partition)
    high, log_start = conn.execute(
        "SELECT high_watermark, log_start_offset FROM partitions"
        " WHERE topic_id = ? AND partition = ?",
        where,
    ).fetchone()
    firsts = [
        int(f)
        for (f,) in conn.execute(
            "SELECT first_offset FROM mirror_txns WHERE topic_id = ? AND partition = ?", where
        )
    ]
    cut = truncation_point(int(high), firsts, int(log_start))
    per_file = conn.execute(
        "SELECT file_id, SUM(byte_size) FROM batches WHERE topic_id = ? AND partition = ?"
        " AND base_offset >= ? GROUP BY file_id",
        (*where, cut),
    ).fetchall()
    freed = sum(int(size) for _, size in per_file)
    conn.execute(
        "DELETE FROM batches WHERE topic_id = ? AND partition = ? AND base_offset >= ?",
        (*where, cut),
    )
    release_file_bytes(conn, [(f, int(s)) for f, s in per_file if f is not None], now)
    for table, column in (("aborted_txns", "marker_offset"), ("producer_state", "last_offset")):
        conn.execute(
            f"DELETE FROM {table} WHERE topic_id = ? AND partition = ? AND {column} >= ?",
            (*where, cut),
        )
    conn.execute("DELETE FROM mirror_txns WHERE topic_id = ? AND partition = ?", where)
    conn.execute(
        "UPDATE partitions SET high_watermark = ?, byte_size = byte_size - ?"
        " WHERE topic_id = ? AND partition = ?",
        (cut, freed, *where),
    )
    # A synced group offset past the cut would skip the records written there next.
    conn.execute(
        "UPDATE group_offsets SET committed_offset = ? WHERE topic = ? AND partition = ?"
        " AND committed_offset > ?",
        (cut, topic, partition, cut),
    )
    conn.execute(
        "UPDATE mirror_partitions SET state = 'STOPPED', failover_offset = ?, lease_owner = -1,"
        " lease_expiry = 0, updated_at = ? WHERE topic_id = ? AND partition = ?",
        (cut, now, *where),
    )
