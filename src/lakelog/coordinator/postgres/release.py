"""Dropping batches: the one place that lowers files' live bytes and marks emptied files
for deletion, so topic deletion, DeleteRecords and retention all agree. Objects are never
deleted here; the cleaner removes them after a grace period.

Freed bytes are gathered per file over the whole transaction and applied once at the end,
in file id order: two transactions freeing bytes of the same files then lock them in the
same order and cannot deadlock."""

from __future__ import annotations

from collections import defaultdict

from lakelog.coordinator.postgres.rows import Conn


class FreedBytes:
    """Bytes freed per file id during one transaction, written by `apply`."""

    def __init__(self) -> None:
        self._freed: defaultdict[int, int] = defaultdict(int)

    def add(self, file_id: int, size: int) -> None:
        self._freed[file_id] += size

    async def apply(self, conn: Conn, marked_at: int) -> None:
        """Lower each file's live bytes; a file left with none is marked 'deleting'."""
        if not self._freed:
            return
        ids = sorted(self._freed)
        await conn.execute(
            "SELECT 1 FROM files WHERE id = ANY(%s::bigint[]) ORDER BY id FOR UPDATE", (ids,)
        )
        await conn.execute(
            "UPDATE files f SET live_bytes = f.live_bytes - u.freed,"
            " state = CASE WHEN f.live_bytes - u.freed <= 0 THEN 'deleting' ELSE f.state END,"
            " marked_at = CASE WHEN f.live_bytes - u.freed <= 0 AND f.state = 'committed'"
            "   THEN %s ELSE f.marked_at END"
            " FROM unnest(%s::bigint[], %s::bigint[]) AS u (file_id, freed)"
            " WHERE f.id = u.file_id",
            (marked_at, ids, [self._freed[i] for i in ids]),
        )
        self._freed.clear()


async def drop_batches_below(
    conn: Conn, freed: FreedBytes, topic_id: int, partition: int, log_start: int
) -> tuple[int, int]:
    """Drop the partition's batches that end below `log_start`, the aborted ranges whose
    marker is below it, and forget producers whose last batch is below it (as Kafka does
    when the log start moves). The caller holds the partition's row lock. Returns
    (batches, bytes) dropped; markers count as batches of no bytes and no file."""
    await conn.execute(
        "DELETE FROM producer_state WHERE topic_id = %s AND partition = %s AND producer_id IN ("
        " SELECT producer_id FROM producer_state WHERE topic_id = %s AND partition = %s"
        " GROUP BY producer_id HAVING MAX(last_offset) < %s)",
        (topic_id, partition, topic_id, partition, log_start),
    )
    await conn.execute(
        "DELETE FROM aborted_txns WHERE topic_id = %s AND partition = %s AND marker_offset < %s",
        (topic_id, partition, log_start),
    )
    cursor = await conn.execute(
        "WITH gone AS (DELETE FROM batches"
        "  WHERE topic_id = %s AND partition = %s AND last_offset < %s"
        "  RETURNING file_id, byte_size)"
        " SELECT file_id, COUNT(*), SUM(byte_size)::bigint FROM gone GROUP BY file_id",
        (topic_id, partition, log_start),
    )
    per_file = await cursor.fetchall()
    if not per_file:
        return 0, 0
    for file_id, _, size in per_file:
        if file_id is not None:
            freed.add(file_id, size)
    count = sum(n for _, n, _ in per_file)
    size = sum(s for _, _, s in per_file)
    await conn.execute(
        "UPDATE partitions SET byte_size = byte_size - %s WHERE topic_id = %s AND partition = %s",
        (size, topic_id, partition),
    )
    return count, size


async def drop_topic(conn: Conn, freed: FreedBytes, topic_id: int) -> None:
    """Remove a topic with its partitions, batches, producer state and transaction rows
    (an ongoing transaction just loses the partitions; its end writes no marker there).
    The caller holds the topic's and its partitions' row locks."""
    cursor = await conn.execute(
        "WITH gone AS (DELETE FROM batches WHERE topic_id = %s RETURNING file_id, byte_size)"
        " SELECT file_id, SUM(byte_size)::bigint FROM gone GROUP BY file_id",
        (topic_id,),
    )
    for file_id, size in await cursor.fetchall():
        if file_id is not None:
            freed.add(file_id, size)
    await conn.execute("DELETE FROM producer_state WHERE topic_id = %s", (topic_id,))
    await conn.execute("DELETE FROM aborted_txns WHERE topic_id = %s", (topic_id,))
    await conn.execute("DELETE FROM txn_partitions WHERE topic_id = %s", (topic_id,))
    await conn.execute("DELETE FROM partitions WHERE topic_id = %s", (topic_id,))
    await conn.execute("DELETE FROM topics WHERE id = %s", (topic_id,))
