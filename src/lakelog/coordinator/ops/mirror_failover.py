"""Failover: stopping a mirror's topics (no more commits: STOPPING), then truncating each
stopped partition to its last stable offset and making it writable (STOPPED).

Any broker may finish a failover; PostgreSQL locks the partitions first (the writers'
order), then their mirror rows, and skips those another broker finished meanwhile. Bytes
freed are applied once at the end, files in id order (`release.FreedBytes`)."""

from __future__ import annotations

from collections.abc import Sequence

from lakelog.coordinator.engine import Session
from lakelog.coordinator.mirror_rules import truncation_point
from lakelog.coordinator.mirror_types import MirrorPartition, MirrorResult
from lakelog.coordinator.offsets_topic_records import offset_commit_records
from lakelog.coordinator.ops import offsets_topic
from lakelog.coordinator.ops.mirror import alter_mirror
from lakelog.coordinator.ops.mirror_partitions import (
    IN_KEYS,
    RowKey,
    row_keys,
    select_partitions,
)
from lakelog.coordinator.ops.release import FreedBytes
from lakelog.util.errors import ErrorCode


async def stop_mirror_topics(
    s: Session, name: str, topics: Sequence[str], now: int
) -> list[MirrorResult]:
    """Mark the topics' partitions STOPPING (dropping their leases) and take the topics
    out of the mirror's list; a topic the mirror holds no partition of is an error."""
    held: set[str] = set()
    if topics:
        names, params = s.dialect.keyset("k", (("name", "text"),), [(t,) for t in topics])
        in_names = f"(SELECT t.id FROM topics t WHERE t.name IN (SELECT k.name FROM {names}))"
        await s.execute(
            "UPDATE mirror_partitions SET state = 'STOPPING', lease_owner = -1,"
            " lease_expiry = 0, updated_at = ? WHERE mirror_name = ? AND state <> 'STOPPED'"
            f" AND topic_id IN {in_names}",
            [now, name, *params],
        )
        rows = await s.fetchall(
            "SELECT DISTINCT t.name FROM mirror_partitions mp JOIN topics t ON t.id = mp.topic_id"
            f" WHERE mp.mirror_name = ? AND mp.topic_id IN {in_names}",
            [name, *params],
        )
        held = {row[0] for row in rows}
    results = [
        MirrorResult(ErrorCode.none)
        if topic in held
        else MirrorResult(
            ErrorCode.unknown_topic_or_partition,
            f"mirror {name!r} does not mirror topic {topic!r}",
        )
        for topic in topics
    ]
    await alter_mirror(s, name, (), (), topics)
    return results


async def finish_mirror_failover(s: Session, now: int) -> list[MirrorPartition]:
    """Truncate every STOPPING partition and mark it STOPPED; returns those this call
    finished, in (topic, partition) order."""
    stopping = await s.fetchall(
        "SELECT mp.topic_id, mp.partition, t.name FROM mirror_partitions mp"
        " JOIN topics t ON t.id = mp.topic_id WHERE mp.state = 'STOPPING'"
        " ORDER BY mp.topic_id, mp.partition"
    )
    if not stopping:
        return []
    names = {(int(t), int(p)): topic for t, p, topic in stopping}
    keys, params = row_keys(s, list(names))
    where = IN_KEYS.format(keys=keys) + " ORDER BY topic_id, partition" + s.dialect.for_update
    bounds = await s.send(
        "SELECT topic_id, partition, high_watermark, log_start_offset FROM partitions"
        f" WHERE {where}",
        params,
    )
    # Locked after the partitions; a row another broker finished meanwhile drops out.
    still = await s.send(
        f"SELECT topic_id, partition FROM mirror_partitions WHERE state = 'STOPPING' AND {where}",
        params,
    )
    open_txns = await s.send(
        f"SELECT topic_id, partition, first_offset FROM mirror_txns WHERE {IN_KEYS}".format(
            keys=keys
        ),
        params,
    )
    log = {(int(t), int(p)): (int(h), int(ls)) for t, p, h, ls in await bounds.fetchall()}
    mine = {(int(t), int(p)) for t, p in await still.fetchall()}
    firsts: dict[RowKey, list[int]] = {}
    for t, p, first in await open_txns.fetchall():
        firsts.setdefault((int(t), int(p)), []).append(int(first))
    cuts = {
        key: truncation_point(log[key][0], firsts.get(key, []), log[key][1])
        for key in names
        if key in mine and key in log
    }
    if not cuts:
        return []
    await _truncate(s, cuts, names, now)
    done, done_params = row_keys(s, list(cuts))
    finished = await select_partitions(
        s,
        "(mp.topic_id, mp.partition) IN (SELECT k.topic_id, k.partition FROM " + done + ")",
        done_params,
    )
    order = {(names[key], key[1]): i for i, key in enumerate(cuts)}
    return sorted(finished, key=lambda p: order[(p.topic, p.partition)])


async def _truncate(
    s: Session, cuts: dict[RowKey, int], names: dict[RowKey, str], now: int
) -> None:
    """Drop each partition's batches, transaction ranges and producer state from its cut
    up, move its log end there, pull synced group offsets past it back (they would skip
    the records written there next), and mark it STOPPED."""
    per_file = [
        await s.send(
            "SELECT file_id, SUM(byte_size) FROM batches WHERE topic_id = ? AND partition = ?"
            " AND base_offset >= ? GROUP BY file_id",
            (*key, cut),
        )
        for key, cut in cuts.items()
    ]
    freed = FreedBytes()
    dropped: list[int] = []
    for pending in per_file:
        total = 0
        for file_id, size in await pending.fetchall():
            total += int(size)
            if file_id is not None:
                freed.add(int(file_id), int(size))
        dropped.append(total)
    cut_rows = [(*key, cut) for key, cut in cuts.items()]
    for table, column in (
        ("batches", "base_offset"),
        ("time_index", "last_offset"),
        ("aborted_txns", "marker_offset"),
        ("producer_state", "last_offset"),
    ):
        await s.executemany(
            f"DELETE FROM {table} WHERE topic_id = ? AND partition = ? AND {column} >= ?",
            cut_rows,
        )
    await s.executemany("DELETE FROM mirror_txns WHERE topic_id = ? AND partition = ?", list(cuts))
    await s.executemany(
        "UPDATE partitions SET high_watermark = ?, byte_size = byte_size - ?"
        " WHERE topic_id = ? AND partition = ?",
        [(cut, size, *key) for (key, cut), size in zip(cuts.items(), dropped, strict=True)],
    )
    # Lowered offsets are new commits of the groups: __consumer_offsets records them.
    lowered = []
    for key, cut in cuts.items():
        lowered += await s.fetchall(
            "UPDATE group_offsets SET committed_offset = ? WHERE topic = ? AND partition = ?"
            " AND committed_offset > ?"
            " RETURNING group_id, topic, partition, committed_offset, leader_epoch, metadata,"
            " commit_time",
            (cut, names[key], key[1], cut),
        )
    records = []
    for group_id, topic, partition, offset, epoch, metadata, commit_time in sorted(lowered):
        records += offset_commit_records(
            group_id, [(topic, partition, offset, epoch, metadata)], commit_time
        )
    await offsets_topic.append(s, records)
    await s.executemany(
        "UPDATE mirror_partitions SET state = 'STOPPED', failover_offset = ?,"
        " lease_owner = -1, lease_expiry = 0, updated_at = ?"
        " WHERE topic_id = ? AND partition = ?",
        [(cut, now, *key) for key, cut in cuts.items()],
    )
    await freed.apply(s, now)
