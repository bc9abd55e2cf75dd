"""`__consumer_offsets` as a table: appends made by the group operations in their own
transaction, reads for Fetch and ListOffsets, and compaction.

An append is two statements whatever the record count, neither read back (so commits of
many groups batch into one transaction cheaply): one set-wise upsert of the partitions'
heads, which hands out the offsets and holds the heads' rows until COMMIT (so a
partition's records become visible in offset order), and one insert of the records."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

from lakelog.coordinator.engine import Session
from lakelog.coordinator.group_types import OffsetsTopicRead, OffsetsTopicRow
from lakelog.coordinator.offsets_topic_records import OffsetsTopicRecord

COMPACTION_TAIL = 1000
"""Per partition, the newest this many offsets are never compacted (like Kafka's active
segment), so a reader close behind the head sees every change; older records leave once a
later record has the same key. The table holds about one row per live key plus this tail
per partition."""
COMPACTION_BATCH = 10_000
"""Rows one compaction pass deletes at most, so one pass is one short transaction."""
READ_MAX_ROWS = 2000
"""Rows one read returns at most, whatever the byte budget."""


async def append(s: Session, records: Sequence[OffsetsTopicRecord]) -> None:
    """Nothing is read back (no round trip on PostgreSQL's pipeline): the heads move first,
    holding their rows, and each record's offset is its partition's new head, less the
    partition's record count, plus its place among them."""
    if not records:
        return
    counts = sorted(Counter(r.partition for r in records).items())
    keys, params = s.dialect.keyset("k", (("p", "int"), ("n", "bigint")), counts)
    # WHERE true: SQLite needs it to parse ON CONFLICT after INSERT ... SELECT.
    await s.execute(
        "INSERT INTO offsets_topic_heads (partition, next_offset)"
        f" SELECT k.p, k.n FROM {keys} WHERE true ON CONFLICT (partition) DO UPDATE"
        " SET next_offset = offsets_topic_heads.next_offset + excluded.next_offset",
        params,
    )
    count = dict(counts)
    place: Counter[int] = Counter()
    rows = []
    for r in records:
        p = r.partition
        rows.append((p, p, place[p] - count[p], r.key, r.value, r.timestamp))
        place[p] += 1
    await s.executemany(
        "INSERT INTO offsets_topic_records"
        " (partition, log_offset, record_key, record_value, timestamp) SELECT ?,"
        " (SELECT h.next_offset FROM offsets_topic_heads h WHERE h.partition = ?) + ?, ?, ?, ?",
        rows,
    )


async def read(s: Session, partitions: Sequence[tuple[int, int, int]]) -> list[OffsetsTopicRead]:
    """For each (partition, fetch offset, max bytes): the partition's high watermark and
    its records from the fetch offset on, as many as make up `max bytes` of keys and
    values (at least one)."""
    results: list[OffsetsTopicRead] = []
    for partition, fetch_offset, max_bytes in partitions:
        head = await s.send(
            "SELECT next_offset FROM offsets_topic_heads WHERE partition = ?", (partition,)
        )
        rows = await s.send(
            "SELECT log_offset, record_key, record_value, timestamp FROM offsets_topic_records"
            " WHERE partition = ? AND log_offset >= ? ORDER BY log_offset LIMIT ?",
            (partition, fetch_offset, READ_MAX_ROWS),
        )
        found = await head.fetchone()
        taken: list[OffsetsTopicRow] = []
        used = 0
        for offset, key, value, timestamp in await rows.fetchall():
            size = len(key) + (len(value) if value is not None else 0) + 32
            if taken and used + size > max_bytes:
                break
            used += size
            taken.append(
                OffsetsTopicRow(
                    offset, bytes(key), None if value is None else bytes(value), timestamp
                )
            )
        results.append(OffsetsTopicRead(found[0] if found else 0, tuple(taken)))
    return results


async def offset_for_time(s: Session, partition: int, timestamp: int) -> tuple[int, int]:
    """ListOffsets: (offset, timestamp) of the first record at or after `timestamp`;
    -1 asks for the high watermark, -2 for the log start (0: compaction leaves gaps but
    never moves it), -3 for the record with the largest timestamp."""
    head_row = await s.fetchone(
        "SELECT next_offset FROM offsets_topic_heads WHERE partition = ?", (partition,)
    )
    head = head_row[0] if head_row else 0
    if timestamp == -1:
        return head, -1
    if timestamp == -2:
        return 0, -1
    if timestamp == -3:
        row = await s.fetchone(
            "SELECT log_offset, timestamp FROM offsets_topic_records WHERE partition = ?"
            " ORDER BY timestamp DESC, log_offset DESC LIMIT 1",
            (partition,),
        )
        return (row[0], row[1]) if row else (-1, -1)
    row = await s.fetchone(
        "SELECT log_offset, timestamp FROM offsets_topic_records WHERE partition = ?"
        " AND timestamp >= ? ORDER BY log_offset LIMIT 1",
        (partition, timestamp),
    )
    return (row[0], row[1]) if row else (-1, -1)


async def compact(s: Session, tombstones_before_ms: int) -> int:
    """One bounded pass of Kafka's log compaction: records behind the tail that a later
    record of the same key supersedes, and tombstones older than `tombstones_before_ms`
    (Kafka's delete.retention.ms) once they are their key's only record (so removing one
    never brings back an older value of its key). Returns the rows deleted."""
    superseded = await s.fetchall(
        "DELETE FROM offsets_topic_records WHERE (partition, log_offset) IN ("
        " SELECT r.partition, r.log_offset FROM offsets_topic_records r"
        " JOIN offsets_topic_heads h ON h.partition = r.partition"
        " WHERE r.log_offset < h.next_offset - ? AND EXISTS ("
        "  SELECT 1 FROM offsets_topic_records n WHERE n.partition = r.partition"
        "  AND n.record_key = r.record_key AND n.log_offset > r.log_offset)"
        " LIMIT ?) RETURNING 1",
        (COMPACTION_TAIL, COMPACTION_BATCH),
    )
    expired = await s.fetchall(
        "DELETE FROM offsets_topic_records WHERE (partition, log_offset) IN ("
        " SELECT r.partition, r.log_offset FROM offsets_topic_records r"
        " WHERE r.record_value IS NULL AND r.timestamp < ? AND NOT EXISTS ("
        "  SELECT 1 FROM offsets_topic_records n WHERE n.partition = r.partition"
        "  AND n.record_key = r.record_key AND n.log_offset != r.log_offset)"
        " LIMIT ?) RETURNING 1",
        (tombstones_before_ms, COMPACTION_BATCH),
    )
    return len(superseded) + len(expired)
