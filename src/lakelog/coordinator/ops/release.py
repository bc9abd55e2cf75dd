"""Dropping batches: the one place that lowers files' live bytes and marks emptied files
for deletion, so topic deletion, DeleteRecords, retention and merges all agree. Objects
are never deleted here; the cleaner removes them after a grace period.

Freed bytes are gathered per file over the whole transaction and applied once at the end,
in file id order: two PostgreSQL transactions freeing bytes of the same files then lock
them in the same order and cannot deadlock."""

from __future__ import annotations

from collections import defaultdict

from lakelog.coordinator.engine import Session

_NO_BATCHES = (1 << 63) - 1
"""Above every timestamp: with no batch left, every time mark goes."""


class FreedBytes:
    """Bytes freed per file id during one transaction, written by `apply`."""

    def __init__(self) -> None:
        self._freed: defaultdict[int, int] = defaultdict(int)

    def add(self, file_id: int, size: int) -> None:
        self._freed[file_id] += size

    async def apply(self, s: Session, marked_at: int) -> None:
        """Lower each file's live bytes; a file left with none is marked 'deleting'."""
        if not self._freed:
            return
        ids = sorted(self._freed)
        d = s.dialect
        keyset, params = d.keyset(
            "u", (("file_id", "bigint"), ("freed", "bigint")), [(i, self._freed[i]) for i in ids]
        )
        if d.for_update:
            await s.execute(
                f"SELECT 1 FROM files WHERE id IN (SELECT u.file_id FROM {keyset})"
                " ORDER BY id" + d.for_update,
                params,
            )
        await s.execute(
            "UPDATE files AS f SET live_bytes = f.live_bytes - u.freed,"
            " state = CASE WHEN f.live_bytes - u.freed <= 0 THEN 'deleting' ELSE f.state END,"
            " marked_at = CASE WHEN f.live_bytes - u.freed <= 0 AND f.state = 'committed'"
            f"   THEN ? ELSE f.marked_at END FROM {keyset} WHERE f.id = u.file_id",
            [marked_at, *params],
        )
        self._freed.clear()


async def drop_batches_below(
    s: Session, freed: FreedBytes, topic_id: int, partition: int, log_start: int
) -> tuple[int, int]:
    """Drop the partition's batches that end below `log_start`, the aborted ranges whose
    marker is below it, and forget producers whose last batch is below it (as Kafka does
    when the log start moves). The caller holds the partition's row lock (PostgreSQL).
    Returns (batches, bytes) dropped; markers count as batches of no bytes and no file."""
    key = (topic_id, partition, log_start)
    await s.execute(
        "DELETE FROM producer_state WHERE topic_id = ? AND partition = ? AND producer_id IN ("
        " SELECT producer_id FROM producer_state WHERE topic_id = ? AND partition = ?"
        " GROUP BY producer_id HAVING MAX(last_offset) < ?)",
        (topic_id, partition, topic_id, partition, log_start),
    )
    await s.execute(
        "DELETE FROM aborted_txns WHERE topic_id = ? AND partition = ? AND marker_offset < ?", key
    )
    per_file = await s.fetchall(
        "SELECT file_id, COUNT(*), SUM(byte_size) FROM batches"
        " WHERE topic_id = ? AND partition = ? AND last_offset < ? GROUP BY file_id",
        key,
    )
    if not per_file:
        return 0, 0
    await s.execute(
        "DELETE FROM batches WHERE topic_id = ? AND partition = ? AND last_offset < ?", key
    )
    # Time marks below the first live batch's timestamp_high point below the log start.
    await s.execute(
        "DELETE FROM time_index WHERE topic_id = ? AND partition = ? AND timestamp_high < "
        "COALESCE((SELECT b.timestamp_high FROM batches b WHERE b.topic_id = ?"
        f" AND b.partition = ? ORDER BY b.last_offset LIMIT 1), {_NO_BATCHES})",
        (topic_id, partition, topic_id, partition),
    )
    for file_id, _, size in per_file:
        if file_id is not None:
            freed.add(file_id, int(size))
    count = sum(int(n) for _, n, _ in per_file)
    size = sum(int(b) for _, _, b in per_file)
    await s.execute(
        "UPDATE partitions SET byte_size = byte_size - ? WHERE topic_id = ? AND partition = ?",
        (size, topic_id, partition),
    )
    return count, size


async def drop_topic(s: Session, freed: FreedBytes, topic_id: int) -> None:
    """Remove a topic with its partitions, batches, producer state and transaction rows
    (an ongoing transaction just loses the partitions; its end writes no marker there).
    The caller holds the topic's and its partitions' row locks (PostgreSQL)."""
    per_file = await s.fetchall(
        "SELECT file_id, SUM(byte_size) FROM batches"
        " WHERE topic_id = ? AND file_id IS NOT NULL GROUP BY file_id",
        (topic_id,),
    )
    for file_id, size in per_file:
        freed.add(file_id, int(size))
    tables = (
        "batches",
        "time_index",
        "producer_state",
        "aborted_txns",
        "txn_partitions",
        "plain_owners",
    )
    for table in (*tables, "partitions"):
        await s.execute(f"DELETE FROM {table} WHERE topic_id = ?", (topic_id,))
    await s.execute("DELETE FROM topics WHERE id = ?", (topic_id,))
