"""commit_file in PostgreSQL: assign dense offsets to an uploaded object's batches, with
the fencing and idempotent-producer checks, and record the object.

Runs in the caller's READ COMMITTED transaction. What makes concurrent commits from many
brokers safe is the row locks: the uploader's broker row FOR KEY SHARE (a re-registration
or fencing, which locks it FOR UPDATE to change the epoch, waits for commits under the old
epoch to finish, and later ones see the new epoch; heartbeats are not held up), then the
touched partitions FOR UPDATE in (topic, partition) order, held until commit. Everything
is read in a few set-wise queries, decided in Python by the shared idempotence rules, and
written back in one pipeline."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from typing import Any
from uuid import UUID

from psycopg import AsyncCursor

from lakelog.coordinator.commit_plan import CommitPlan, ProducerKey, plan_batch, well_formed
from lakelog.coordinator.idempotence import ProducerBatch
from lakelog.coordinator.interface import (
    CommitBatch,
    CommitBatchResult,
)
from lakelog.coordinator.postgres.rows import (
    Conn,
    PartitionRow,
    now_ms,
    partitions_of,
    query_partitions,
)
from lakelog.coordinator.postgres.txn import load_ongoing, record_first_offsets
from lakelog.errors import ErrorCode


async def commit_file(
    conn: Conn,
    object_key: str,
    uploader_broker_id: int,
    broker_epoch: int,
    file_size: int,
    batches: Sequence[CommitBatch],
) -> list[CommitBatchResult]:
    # Every read is sent before any answer is awaited: in pipeline mode they share one
    # round trip. They run in this order, so the histories are read under the partition
    # locks. (A known key or a fenced broker makes the locks needless; both are rare.)
    usable = [b for b in batches if well_formed(b, file_size)]
    claimed = await _claim_key(conn, object_key, uploader_broker_id, broker_epoch, file_size)
    epoch = await _current_epoch(conn, uploader_broker_id) if broker_epoch >= 0 else None
    locked = await query_partitions(conn, ((b.topic_id, b.partition) for b in usable), True)
    histories = await _query_histories(conn, usable)

    file_row = await claimed.fetchone()
    if file_row is None:
        # A second commit of one object would point two batch rows at the same bytes.
        return [CommitBatchResult(ErrorCode.invalid_request) for _ in batches]
    epoch_row = None if epoch is None else await epoch.fetchone()
    fenced = epoch_row is not None and epoch_row[0] > broker_epoch
    partitions = await partitions_of(locked)
    # Taken under the partition locks, so LogAppendTime follows the commit order.
    commit = CommitPlan(
        now=now_ms(),
        partitions=dict(partitions),
        histories=await _histories(histories, partitions),
        # The commit barrier: read under the partition locks, which an end of the
        # transaction takes too, so the batch lands before its marker or is refused.
        txns=await load_ongoing(conn, (b.producer_id for b in usable if b.is_transactional)),
    )
    results = [
        CommitBatchResult(ErrorCode.stale_broker_epoch)
        if fenced
        else plan_batch(commit, batch, file_size)
        for batch in batches
    ]
    await _write(conn, commit, int(file_row[0]))
    await record_first_offsets(conn, commit.txn_firsts)
    return results


async def _claim_key(
    conn: Conn, object_key: str, uploader_broker_id: int, broker_epoch: int, file_size: int
) -> AsyncCursor[Any]:
    """Insert the file row (its final state is written at the end); no row comes back if
    the key is known. A concurrent commit of the same key waits on the unique index, then
    gets no row either."""
    return await conn.execute(
        "INSERT INTO files (object_key, state, size, live_bytes, uploader_broker_id,"
        " broker_epoch, committed_at) VALUES (%s, 'deleting', %s, 0, %s, %s, 0)"
        " ON CONFLICT (object_key) DO NOTHING RETURNING id",
        (object_key, file_size, uploader_broker_id, broker_epoch),
    )


async def _current_epoch(conn: Conn, broker_id: int) -> AsyncCursor[Any]:
    return await conn.execute(
        "SELECT broker_epoch FROM brokers WHERE broker_id = %s FOR KEY SHARE", (broker_id,)
    )


async def _query_histories(conn: Conn, batches: Sequence[CommitBatch]) -> AsyncCursor[Any] | None:
    """Send the lookup of the remembered batches of every producer the commit mentions,
    oldest first (None if there are none)."""
    keys = list(
        dict.fromkeys(
            (b.topic_id, b.partition, b.producer_id) for b in batches if b.producer_id >= 0
        )
    )
    if not keys:
        return None
    return await conn.execute(
        "SELECT k.topic_uuid, k.partition, k.pid, s.producer_epoch, s.base_sequence,"
        " s.last_sequence, s.base_offset, s.last_offset"
        " FROM unnest(%s::uuid[], %s::int[], %s::bigint[]) AS k (topic_uuid, partition, pid)"
        " JOIN topics t ON t.topic_uuid = k.topic_uuid"
        " JOIN producer_state s ON s.topic_id = t.id AND s.partition = k.partition"
        "  AND s.producer_id = k.pid"
        " ORDER BY s.base_offset",
        ([k[0] for k in keys], [k[1] for k in keys], [k[2] for k in keys]),
    )


async def _histories(
    cursor: AsyncCursor[Any] | None, partitions: dict[tuple[UUID, int], PartitionRow]
) -> dict[ProducerKey, list[ProducerBatch]]:
    """The histories by (topic row id, partition, producer id); every producer of a
    locked partition gets one, empty when the partition has not seen it."""
    found: defaultdict[tuple[UUID, int, int], list[ProducerBatch]] = defaultdict(list)
    if cursor is not None:
        for row in await cursor.fetchall():
            found[(row[0], row[1], row[2])].append(ProducerBatch(*row[3:]))
    return defaultdict(
        list,
        {
            (part.topic_id, part.partition, pid): history
            for (topic, partition, pid), history in found.items()
            if (part := partitions.get((topic, partition))) is not None
        },
    )


_INSERT_BATCHES = (
    "INSERT INTO batches (topic_id, partition, base_offset, last_offset, byte_offset,"
    " byte_size, base_timestamp, max_timestamp, timestamp_type, log_append_time,"
    " timestamp_high, producer_id, producer_epoch, base_sequence, is_transactional, file_id)"
    " SELECT c1, c2, c3, c4, c5, c6, c7, c8, c9, c10, c11, c12, c13, c14, c15 <> 0, %s"
    " FROM unnest(%s::bigint[], %s::int[], %s::bigint[], %s::bigint[], %s::bigint[],"
    " %s::bigint[], %s::bigint[], %s::bigint[], %s::smallint[], %s::bigint[], %s::bigint[],"
    " %s::bigint[], %s::int[], %s::int[], %s::smallint[])"
    " AS u (c1, c2, c3, c4, c5, c6, c7, c8, c9, c10, c11, c12, c13, c14, c15)"
)


async def _write(conn: Conn, commit: CommitPlan, file_id: int) -> None:
    state, marked_at = ("committed", None) if commit.rows else ("deleting", commit.now)
    touched = sorted(commit.touched.items())
    async with conn.pipeline():
        await conn.execute(
            "UPDATE files SET state = %s, live_bytes = %s, committed_at = %s, marked_at = %s"
            " WHERE id = %s",
            (state, commit.live_bytes, commit.now, marked_at, file_id),
        )
        if commit.rows:
            columns = [list(column) for column in zip(*commit.rows, strict=True)]
            await conn.execute(_INSERT_BATCHES, (file_id, *columns))
        if touched:
            await conn.execute(
                "UPDATE partitions p SET high_watermark = u.hw,"
                " byte_size = p.byte_size + u.added, max_timestamp = u.max_ts"
                " FROM unnest(%s::bigint[], %s::int[], %s::bigint[], %s::bigint[], %s::bigint[])"
                " AS u (topic_id, partition, hw, added, max_ts)"
                " WHERE p.topic_id = u.topic_id AND p.partition = u.partition",
                (
                    [key[0] for key, _ in touched],
                    [key[1] for key, _ in touched],
                    [part.high_watermark for _, part in touched],
                    [commit.added_bytes[key] for key, _ in touched],
                    [part.max_timestamp for _, part in touched],
                ),
            )
        if commit.changed_producers:
            await _write_producers(conn, commit)


async def _write_producers(conn: Conn, commit: CommitPlan) -> None:
    keys = sorted(commit.changed_producers)
    await conn.execute(
        "DELETE FROM producer_state s"
        " USING unnest(%s::bigint[], %s::int[], %s::bigint[]) AS k (topic_id, partition, pid)"
        " WHERE s.topic_id = k.topic_id AND s.partition = k.partition AND s.producer_id = k.pid",
        ([k[0] for k in keys], [k[1] for k in keys], [k[2] for k in keys]),
    )
    entries = [(key, e) for key in keys for e in commit.histories[key]]
    await conn.execute(
        "INSERT INTO producer_state (topic_id, partition, producer_id, producer_epoch,"
        " base_sequence, last_sequence, base_offset, last_offset)"
        " SELECT * FROM unnest(%s::bigint[], %s::int[], %s::bigint[], %s::int[], %s::int[],"
        " %s::int[], %s::bigint[], %s::bigint[])",
        (
            [k[0] for k, _ in entries],
            [k[1] for k, _ in entries],
            [k[2] for k, _ in entries],
            [e.producer_epoch for _, e in entries],
            [e.base_sequence for _, e in entries],
            [e.last_sequence for _, e in entries],
            [e.base_offset for _, e in entries],
            [e.last_offset for _, e in entries],
        ),
    )
