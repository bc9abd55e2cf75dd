"""commit_file in PostgreSQL: assign dense offsets to an uploaded object's batches, with
the fencing and idempotent-producer checks, and record the object.

Runs in the caller's READ COMMITTED transaction. What makes concurrent commits from many
brokers safe is the row locks: the uploader's broker row FOR KEY SHARE (a re-registration
or fencing, which locks it FOR UPDATE to change the epoch, waits for commits under the old
epoch to finish, and later ones see the new epoch; heartbeats are not held up), then the
touched partitions FOR UPDATE in (topic, partition) order, held until commit.

Few round trips: the reads are sent before any answer is awaited (claim the key, the
broker epoch, `_send_loads`); the shared planner decides in Python while the batch rows
already go out, 100 per INSERT, so the server inserts as Python plans; the other writes,
one statement per table with binary array parameters (`arrays`), travel unawaited with
the caller's NOTIFY and COMMIT."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from psycopg import AsyncCursor

from lakelog.coordinator import commit_outcome
from lakelog.coordinator.commit_plan import (
    BATCH_ROW_COLUMNS,
    CommitPlan,
    Wanted,
    plan_batch,
    wanted,
)
from lakelog.coordinator.idempotence import ProducerBatch
from lakelog.coordinator.interface import CommitBatch, CommitBatchResult
from lakelog.coordinator.mirror_rules import refuse_read_only
from lakelog.coordinator.ops.mirror_commit import read_only as mirror_read_only
from lakelog.coordinator.postgres.arrays import int4s, int8_rows, int8s, uuids
from lakelog.coordinator.postgres.engine import PostgresSession
from lakelog.coordinator.postgres.rows import Conn, PartitionRow, now_ms
from lakelog.coordinator.postgres.txn import load_ongoing, record_first_offsets
from lakelog.errors import ErrorCode

ROWS_PER_INSERT = 100
"""Batches planned, and rows sent, per INSERT statement."""


async def commit_file(
    conn: Conn,
    object_key: str,
    uploader_broker_id: int,
    broker_epoch: int,
    file_size: int,
    batches: Sequence[CommitBatch],
) -> list[CommitBatchResult]:
    # In pipeline mode these share one round trip. They run in this order, so the loads
    # happen under the partition locks. (A known key or a fenced broker makes the locks
    # needless; both are rare.)
    claimed = await _claim_key(conn, object_key, uploader_broker_id, broker_epoch, file_size)
    epoch = await _current_epoch(conn, uploader_broker_id) if broker_epoch >= 0 else None
    loads = await _send_loads(conn, wanted(batches, file_size))

    file_row = await claimed.fetchone()
    if file_row is None:
        # A second commit of one object would point two batch rows at the same bytes.
        return [CommitBatchResult(ErrorCode.invalid_request) for _ in batches]
    epoch_row = None if epoch is None else await epoch.fetchone()
    fenced = epoch_row is not None and epoch_row[0] > broker_epoch
    # Taken under the partition locks, so LogAppendTime follows the commit order.
    plan = await _read_loads(loads, now_ms(), int(file_row[0]))
    if fenced:
        results = [CommitBatchResult(ErrorCode.stale_broker_epoch)] * len(batches)
    else:
        # The commit barrier: read under the partition locks, which an end of the
        # transaction takes too, so a batch lands before its marker or is refused.
        plan.txns = await load_ongoing(conn, (b.producer_id for b in batches if b.is_transactional))
        read_only = await mirror_read_only(PostgresSession(conn), plan.partitions)
        results = await _plan_and_insert(conn, plan, batches, file_size)
        results = refuse_read_only(batches, results, read_only)
    await _write(conn, plan)
    await record_first_offsets(conn, plan.txn_firsts)
    return results


async def _plan_and_insert(
    conn: Conn, plan: CommitPlan, batches: Sequence[CommitBatch], file_size: int
) -> list[CommitBatchResult]:
    """Plan the batches a slice at a time, sending each slice's rows as soon as it is
    planned: the server inserts one slice while Python plans the next (on two cores the
    commit then takes about the longer of the two, not their sum)."""
    results: list[CommitBatchResult] = []
    sent = 0
    for start in range(0, len(batches), ROWS_PER_INSERT):
        results.extend(
            [plan_batch(plan, b, file_size) for b in batches[start : start + ROWS_PER_INSERT]]
        )
        if len(plan.rows) > sent:
            await _insert_batches(conn, plan.rows[sent:])
            sent = len(plan.rows)
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


@dataclass(slots=True)
class _Loads:
    """The per-commit reads in flight; `_read_loads` turns their answers into a plan."""

    partitions: AsyncCursor[Any] | None
    histories: AsyncCursor[Any] | None


async def _send_loads(conn: Conn, want: Wanted) -> _Loads:
    """Send everything the planner reads, one statement per kind of state, without waiting:
    the one place to load more per-commit state. The partitions are locked FOR UPDATE in
    (topic row id, partition) order, the one order every writer uses, so two commits
    touching the same partitions never deadlock."""
    partitions = histories = None
    if want.partitions:
        partitions = await conn.execute(
            "SELECT t.topic_uuid, p.topic_id, p.partition, p.log_start_offset,"
            " p.high_watermark, p.byte_size, p.max_timestamp"
            " FROM unnest(%s::uuid[], %s::int[]) AS k (topic_uuid, partition)"
            " JOIN topics t ON t.topic_uuid = k.topic_uuid"
            " JOIN partitions p ON p.topic_id = t.id AND p.partition = k.partition"
            " ORDER BY p.topic_id, p.partition FOR UPDATE OF p",
            (uuids([k[0] for k in want.partitions]), int4s([k[1] for k in want.partitions])),
        )
    if want.producers:
        # LATERAL with OFFSET 0 (not flattened) makes each key one index range scan on
        # all three key columns, whatever the planner guesses of unnest's row count.
        histories = await conn.execute(
            "SELECT t.id, k.partition, k.pid, s.producer_epoch, s.base_sequence,"
            " s.last_sequence, s.base_offset, s.last_offset"
            " FROM unnest(%s::uuid[], %s::int[], %s::bigint[]) AS k (topic_uuid, partition, pid)"
            " JOIN topics t ON t.topic_uuid = k.topic_uuid"
            " CROSS JOIN LATERAL (SELECT * FROM producer_state x WHERE x.topic_id = t.id"
            "  AND x.partition = k.partition AND x.producer_id = k.pid OFFSET 0) s"
            " ORDER BY t.id, k.partition, k.pid, s.base_offset",
            (
                uuids([k[0] for k in want.producers]),
                int4s([k[1] for k in want.producers]),
                int8s([k[2] for k in want.producers]),
            ),
        )
    return _Loads(partitions, histories)


async def _read_loads(loads: _Loads, now: int, file_id: int) -> CommitPlan:
    """The plan over the loaded state."""
    plan = CommitPlan(now=now, file_id=file_id)
    if loads.partitions is not None:
        for row in await loads.partitions.fetchall():
            plan.partitions[(row[0], row[2])] = PartitionRow(*row[1:])
    if loads.histories is not None:
        histories = plan.histories
        for row in await loads.histories.fetchall():
            key = row[:3]
            history = histories.get(key)
            if history is None:
                history = histories[key] = []
            history.append(ProducerBatch(*row[3:]))
    return plan


def _insert_batches_sql() -> str:
    """INSERT from one two-dimensional bigint array, a row per batch in
    commit_plan.BATCH_ROW_COLUMNS order, each column cast to its type."""
    casts = {"partition": "::int", "timestamp_type": "::smallint", "producer_epoch": "::int"}
    casts |= {"base_sequence": "::int", "is_transactional": " <> 0"}
    values = ", ".join(
        f"r[i][{j}]{casts.get(name, '')}" for j, name in enumerate(BATCH_ROW_COLUMNS, 1)
    )
    return (
        f"INSERT INTO batches ({', '.join(BATCH_ROW_COLUMNS)}) SELECT {values}"
        " FROM (SELECT %s::bigint[] AS r) AS m, generate_subscripts(m.r, 1) AS i"
    )


_INSERT_BATCHES = _insert_batches_sql()


async def _insert_batches(conn: Conn, rows: Sequence[tuple[int, ...]]) -> None:
    await conn.execute(_INSERT_BATCHES, (int8_rows(rows),))


async def _write(conn: Conn, plan: CommitPlan) -> None:
    """Send the writes but the batch rows (sent while planning); nothing waits for them
    (the caller's COMMIT does)."""
    state, marked_at = ("committed", None) if plan.rows else ("deleting", plan.now)
    await conn.execute(
        "UPDATE files SET state = %s, live_bytes = %s, committed_at = %s, marked_at = %s"
        " WHERE id = %s",
        (state, plan.live_bytes, plan.now, marked_at, plan.file_id),
    )
    if not plan.rows:
        return
    touched = plan.touched
    await conn.execute(
        "UPDATE partitions p SET high_watermark = u.hw,"
        " byte_size = p.byte_size + u.added, max_timestamp = u.max_ts"
        " FROM unnest(%s::bigint[], %s::int[], %s::bigint[], %s::bigint[], %s::bigint[])"
        " AS u (topic_id, partition, hw, added, max_ts)"
        " WHERE p.topic_id = u.topic_id AND p.partition = u.partition",
        (
            int8s([key[0] for key in touched]),
            int4s([key[1] for key in touched]),
            int8s([part.high_watermark for part in touched.values()]),
            int8s([plan.added_bytes[key] for key in touched]),
            int8s([part.max_timestamp for part in touched.values()]),
        ),
    )
    if plan.changed_producers:
        await _write_producers(conn, plan)


async def _write_producers(conn: Conn, plan: CommitPlan) -> None:
    keys = sorted(plan.changed_producers)
    await conn.execute(
        "DELETE FROM producer_state s"
        " USING unnest(%s::bigint[], %s::int[], %s::bigint[]) AS k (topic_id, partition, pid)"
        " WHERE s.topic_id = k.topic_id AND s.partition = k.partition AND s.producer_id = k.pid",
        (int8s([k[0] for k in keys]), int4s([k[1] for k in keys]), int8s([k[2] for k in keys])),
    )
    entries = [(*key, *e) for key in keys for e in plan.histories[key]]
    await conn.execute(
        "INSERT INTO producer_state (topic_id, partition, producer_id, producer_epoch,"
        " base_sequence, last_sequence, base_offset, last_offset)"
        " SELECT * FROM unnest(%s::bigint[], %s::int[], %s::bigint[], %s::int[], %s::int[],"
        " %s::int[], %s::bigint[], %s::bigint[])",
        [
            encode(c)
            for encode, c in zip(
                (int8s, int4s, int8s, int4s, int4s, int4s, int8s, int8s),
                zip(*entries, strict=True),
                strict=True,
            )
        ],
    )


_FILE = commit_outcome.file_query("%s")
_OUTCOME = commit_outcome.batches_query("%s")


async def committed_batches(conn: Conn, object_key: str) -> commit_outcome.CommitOutcome | None:
    row = await (await conn.execute(_FILE, (object_key,))).fetchone()
    if row is None:
        return None
    rows = await (await conn.execute(_OUTCOME, (row[0],))).fetchall()
    return commit_outcome.outcome(rows)
