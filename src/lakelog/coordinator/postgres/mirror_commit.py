"""Mirror commits in PostgreSQL: the partitions locked FOR UPDATE (the writers' order),
then their mirror rows FOR SHARE, so a failover's STOPPING waits for commits in flight and
later commits see it. Decisions in mirror_rules."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any
from uuid import UUID

from lakelog.coordinator.interface import CommitBatchResult
from lakelog.coordinator.mirror_rules import (
    MIRROR_BATCH_COLUMNS,
    MirrorPlan,
    MirrorTarget,
    plan_mirror_batch,
    well_formed,
)
from lakelog.coordinator.mirror_types import MirrorBatch, MirrorState
from lakelog.coordinator.postgres.mirror import one
from lakelog.coordinator.postgres.rows import Conn, PartitionRow, find_partitions, now_ms
from lakelog.errors import ErrorCode


async def commit_mirror(
    conn: Conn,
    object_key: str,
    broker_id: int,
    broker_epoch: int,
    file_size: int,
    batches: Sequence[MirrorBatch],
) -> list[CommitBatchResult]:
    now = now_ms()
    row = await one(
        conn,
        "INSERT INTO files (object_key, state, size, live_bytes, uploader_broker_id,"
        " broker_epoch, committed_at) VALUES (%s, 'deleting', %s, 0, %s, %s, %s)"
        " ON CONFLICT (object_key) DO NOTHING RETURNING id",
        (object_key, file_size, broker_id, broker_epoch, now),
    )
    if row is None:
        return [CommitBatchResult(ErrorCode.invalid_request) for _ in batches]
    plan = MirrorPlan(now=now, broker_id=broker_id, file_id=int(row[0]))
    epoch = (
        await one(
            conn,
            "SELECT broker_epoch FROM brokers WHERE broker_id = %s FOR KEY SHARE",
            (broker_id,),
        )
        if broker_epoch >= 0
        else None
    )
    if epoch is not None and int(epoch[0]) > broker_epoch:
        results = [CommitBatchResult(ErrorCode.stale_broker_epoch)] * len(batches)
    else:
        await _load_targets(conn, plan, batches, file_size)
        results = [plan_mirror_batch(plan, b, file_size) for b in batches]
    await _write(conn, plan)
    return results


async def _load_targets(
    conn: Conn, plan: MirrorPlan, batches: Sequence[MirrorBatch], file_size: int
) -> None:
    keys = list(
        dict.fromkeys((b.topic_id, b.partition) for b in batches if well_formed(b, file_size))
    )
    found = await find_partitions(conn, keys, True)
    rows = sorted((p.topic_id, p.partition) for p in found.values())
    states: dict[tuple[int, int], tuple[Any, ...]] = {}
    txns: dict[tuple[int, int], dict[int, int]] = {}
    if rows:
        args = ([t for t, _ in rows], [p for _, p in rows])
        cursor = await conn.execute(
            "SELECT mp.topic_id, mp.partition, mp.state, mp.lease_owner, mp.source_epoch"
            " FROM mirror_partitions mp JOIN unnest(%s::bigint[], %s::int[])"
            " AS k (topic_id, partition) ON mp.topic_id = k.topic_id"
            " AND mp.partition = k.partition ORDER BY mp.topic_id, mp.partition"
            " FOR SHARE OF mp",
            args,
        )
        states = {(int(r[0]), int(r[1])): r[2:] for r in await cursor.fetchall()}
        cursor = await conn.execute(
            "SELECT x.topic_id, x.partition, x.producer_id, x.first_offset FROM mirror_txns x"
            " JOIN unnest(%s::bigint[], %s::int[]) AS k (topic_id, partition)"
            " ON x.topic_id = k.topic_id AND x.partition = k.partition",
            args,
        )
        for t, p, pid, first in await cursor.fetchall():
            txns.setdefault((int(t), int(p)), {})[int(pid)] = int(first)
    for key in keys:
        part = found.get(key)
        if part is None:
            continue
        where = (part.topic_id, part.partition)
        state = states.get(where)
        if state is None:
            plan.targets[key] = MirrorTarget(part, MirrorState.STOPPED, -1)
            continue
        plan.targets[key] = MirrorTarget(
            part,
            MirrorState(state[0]),
            int(state[1]),
            open_txns=txns.get(where, {}),
            source_epoch=int(state[2]),
        )


async def _write(conn: Conn, plan: MirrorPlan) -> None:
    state, marked_at = ("committed", None) if plan.rows else ("deleting", plan.now)
    await conn.execute(
        "UPDATE files SET state = %s, live_bytes = %s, committed_at = %s, marked_at = %s"
        " WHERE id = %s",
        (state, plan.live_bytes, plan.now, marked_at, plan.file_id),
    )
    if plan.rows:
        columns = ", ".join(MIRROR_BATCH_COLUMNS)
        await conn.cursor().executemany(
            f"INSERT INTO batches ({columns}) VALUES"
            f" ({', '.join(['%s'] * len(MIRROR_BATCH_COLUMNS))})",
            [(*r[:14], bool(r[14]), *r[15:]) for r in plan.rows],
        )
    for t in plan.touched():
        where = (t.part.topic_id, t.part.partition)
        await conn.execute(
            "UPDATE partitions SET high_watermark = %s, byte_size = byte_size + %s,"
            " max_timestamp = %s WHERE topic_id = %s AND partition = %s",
            (t.part.high_watermark, t.added_bytes, t.part.max_timestamp, *where),
        )
        await conn.execute(
            "UPDATE mirror_partitions SET source_epoch = %s, updated_at = %s"
            " WHERE topic_id = %s AND partition = %s",
            (t.source_epoch, plan.now, *where),
        )
        await conn.execute("DELETE FROM mirror_txns WHERE topic_id = %s AND partition = %s", where)
        if t.open_txns:
            await conn.cursor().executemany(
                "INSERT INTO mirror_txns (topic_id, partition, producer_id, first_offset)"
                " VALUES (%s, %s, %s, %s)",
                [(*where, pid, first) for pid, first in t.open_txns.items()],
            )
    if plan.aborted:
        await conn.cursor().executemany(
            "INSERT INTO aborted_txns (topic_id, partition, marker_offset, producer_id,"
            " first_offset) VALUES (%s, %s, %s, %s, %s) ON CONFLICT DO NOTHING",
            plan.aborted,
        )


async def read_only(
    conn: Conn, partitions: dict[tuple[UUID, int], PartitionRow]
) -> set[tuple[UUID, int]]:
    """Take the partitions of mirror topics (a row not STOPPED) out of `partitions` and
    return their keys: commit_file answers their batches READ_ONLY_ERROR
    (`mirror_rules.refuse_read_only`)."""
    topic_rows = sorted({part.topic_id for part in partitions.values()})
    if not topic_rows:
        return set()
    cursor = await conn.execute(
        "SELECT topic_id, partition FROM mirror_partitions WHERE state <> 'STOPPED'"
        " AND topic_id = ANY(%s::bigint[])",
        (topic_rows,),
    )
    locked = {(int(t), int(p)) for t, p in await cursor.fetchall()}
    found = {k for k, part in partitions.items() if (part.topic_id, part.partition) in locked}
    for key in found:
        del partitions[key]
    return found
