"""Failover in PostgreSQL: stopping a mirror's topics, then truncating each stopped
partition (partition rows locked first, as every writer does) to its last stable offset."""

from __future__ import annotations

from collections.abc import Sequence

from lakelog.coordinator.mirror_rules import truncation_point
from lakelog.coordinator.mirror_types import MirrorPartition, MirrorResult
from lakelog.coordinator.postgres.mirror import alter_mirror, one, select_partitions
from lakelog.coordinator.postgres.rows import Conn
from lakelog.errors import ErrorCode


async def stop_mirror_topics(
    conn: Conn, name: str, topics: Sequence[str], now: int
) -> list[MirrorResult]:
    results: list[MirrorResult] = []
    for topic in topics:
        await conn.execute(
            "UPDATE mirror_partitions SET state = 'STOPPING', lease_owner = -1,"
            " lease_expiry = 0, updated_at = %s WHERE mirror_name = %s AND state <> 'STOPPED'"
            " AND topic_id = (SELECT id FROM topics WHERE name = %s)",
            (now, name, topic),
        )
        held = await one(
            conn,
            "SELECT 1 FROM mirror_partitions WHERE mirror_name = %s"
            " AND topic_id = (SELECT id FROM topics WHERE name = %s) LIMIT 1",
            (name, topic),
        )
        if held is None:
            results.append(
                MirrorResult(
                    ErrorCode.unknown_topic_or_partition,
                    f"mirror {name!r} does not mirror topic {topic!r}",
                )
            )
        else:
            results.append(MirrorResult(ErrorCode.none))
    await alter_mirror(conn, name, (), (), topics)
    return results


async def finish_mirror_failover(conn: Conn, now: int) -> list[MirrorPartition]:
    cursor = await conn.execute(
        "SELECT mp.topic_id, mp.partition, t.name FROM mirror_partitions mp"
        " JOIN topics t ON t.id = mp.topic_id WHERE mp.state = 'STOPPING'"
        " ORDER BY mp.topic_id, mp.partition"
    )
    stopping = [(int(t), int(p), name) for t, p, name in await cursor.fetchall()]
    if not stopping:
        return []
    await conn.execute(
        "SELECT 1 FROM partitions p JOIN unnest(%s::bigint[], %s::int[])"
        " AS k (topic_id, partition) ON p.topic_id = k.topic_id AND p.partition = k.partition"
        " ORDER BY p.topic_id, p.partition FOR UPDATE OF p",
        ([t for t, _, _ in stopping], [p for _, p, _ in stopping]),
    )
    done: list[tuple[int, int]] = []
    for topic_id, partition, topic in stopping:
        if await _truncate(conn, topic_id, partition, topic, now):
            done.append((topic_id, partition))
    out: list[MirrorPartition] = []
    for key in done:
        out += await select_partitions(conn, "mp.topic_id = %s AND mp.partition = %s", key)
    return out


async def _truncate(conn: Conn, topic_id: int, partition: int, topic: str, now: int) -> bool:
    where = (topic_id, partition)
    still = await one(
        conn,
        "SELECT state FROM mirror_partitions WHERE topic_id = %s AND partition = %s FOR UPDATE",
        where,
    )
    if still is None or still[0] != "STOPPING":
        return False  # another broker finished it first
    bounds = await one(
        conn,
        "SELECT high_watermark, log_start_offset FROM partitions"
        " WHERE topic_id = %s AND partition = %s",
        where,
    )
    assert bounds is not None
    cursor = await conn.execute(
        "SELECT first_offset FROM mirror_txns WHERE topic_id = %s AND partition = %s", where
    )
    firsts = [int(f) for (f,) in await cursor.fetchall()]
    cut = truncation_point(int(bounds[0]), firsts, int(bounds[1]))
    cursor = await conn.execute(
        "DELETE FROM batches WHERE topic_id = %s AND partition = %s AND base_offset >= %s"
        " RETURNING file_id, byte_size",
        (*where, cut),
    )
    per_file: dict[int, int] = {}
    freed = 0
    for file_id, size in await cursor.fetchall():
        freed += int(size)
        if file_id is not None:
            per_file[int(file_id)] = per_file.get(int(file_id), 0) + int(size)
    for file_id, size in sorted(per_file.items()):
        await conn.execute(
            "UPDATE files SET live_bytes = live_bytes - %s,"
            " state = CASE WHEN live_bytes - %s <= 0 THEN 'deleting' ELSE state END,"
            " marked_at = CASE WHEN live_bytes - %s <= 0 AND state = 'committed'"
            "   THEN %s ELSE marked_at END WHERE id = %s",
            (size, size, size, now, file_id),
        )
    for table, column in (("aborted_txns", "marker_offset"), ("producer_state", "last_offset")):
        await conn.execute(
            f"DELETE FROM {table} WHERE topic_id = %s AND partition = %s AND {column} >= %s",
            (*where, cut),
        )
    await conn.execute("DELETE FROM mirror_txns WHERE topic_id = %s AND partition = %s", where)
    await conn.execute(
        "UPDATE partitions SET high_watermark = %s, byte_size = byte_size - %s"
        " WHERE topic_id = %s AND partition = %s",
        (cut, freed, *where),
    )
    await conn.execute(
        "UPDATE group_offsets SET committed_offset = %s WHERE topic = %s AND partition = %s"
        " AND committed_offset > %s",
        (cut, topic, partition, cut),
    )
    await conn.execute(
        "UPDATE mirror_partitions SET state = 'STOPPED', failover_offset = %s,"
        " lease_owner = -1, lease_expiry = 0, updated_at = %s"
        " WHERE topic_id = %s AND partition = %s",
        (cut, now, *where),
    )
    return True
