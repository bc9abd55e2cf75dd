"""Mirror commits: mirrored batches recorded at their source offsets, the partitions'
transaction index rebuilt from them (decisions in `mirror_rules`), and the read-only
check commit_file makes.

Locks (PostgreSQL): the committing broker's row FOR KEY SHARE (as commit_file: fencing
waits for commits under the old epoch), the partitions FOR UPDATE in the writers' order,
then their mirror rows FOR SHARE, so a failover's STOPPING waits for commits in flight and
later commits see it."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any
from uuid import UUID

from lakelog.coordinator.engine import Session
from lakelog.coordinator.log_types import CommitBatchResult
from lakelog.coordinator.mirror_rules import (
    MIRROR_BATCH_COLUMNS,
    MirrorPlan,
    MirrorTarget,
    plan_mirror_batch,
    well_formed,
)
from lakelog.coordinator.mirror_types import MirrorBatch, MirrorState
from lakelog.coordinator.ops import objects
from lakelog.coordinator.ops.mirror_partitions import IN_KEYS, RowKey, row_keys
from lakelog.coordinator.ops.rows import (
    TIME_MARK_TYPES,
    PartitionRow,
    find_partitions,
    now_ms,
    time_marks,
)
from lakelog.util.errors import ErrorCode

_IS_TRANSACTIONAL = MIRROR_BATCH_COLUMNS.index("is_transactional")


async def commit_mirror(
    s: Session,
    object_key: str,
    broker_id: int,
    broker_epoch: int,
    file_size: int,
    batches: Sequence[MirrorBatch],
) -> list[CommitBatchResult]:
    now = now_ms()
    claimed = await objects.send_claim(s, object_key, broker_id, broker_epoch, file_size)
    epoch = await objects.send_epoch(s, broker_id, broker_epoch)
    row = await claimed.fetchone()
    if row is None:
        # A second commit of one object would point two batch rows at the same bytes.
        return [CommitBatchResult(ErrorCode.invalid_request) for _ in batches]
    plan = MirrorPlan(now=now, broker_id=broker_id, file_id=int(row[0]))
    if objects.fenced(None if epoch is None else await epoch.fetchone(), broker_epoch):
        results = [CommitBatchResult(ErrorCode.stale_broker_epoch)] * len(batches)
    else:
        await _load_targets(s, plan, batches, file_size)
        results = [plan_mirror_batch(plan, b, file_size) for b in batches]
    await _write(s, plan)
    return results


async def _load_targets(
    s: Session, plan: MirrorPlan, batches: Sequence[MirrorBatch], file_size: int
) -> None:
    """The batches' partitions with their mirror rows and open mirrored transactions."""
    keys = list(
        dict.fromkeys((b.topic_id, b.partition) for b in batches if well_formed(b, file_size))
    )
    found = await find_partitions(s, keys, True)
    if not found:
        return
    in_keys, params = row_keys(s, sorted((p.topic_id, p.partition) for p in found.values()))
    where = IN_KEYS.format(keys=in_keys)
    state_rows = await s.send(
        "SELECT topic_id, partition, state, lease_owner, source_epoch FROM mirror_partitions"
        f" WHERE {where} ORDER BY topic_id, partition" + s.dialect.lock("SHARE"),
        params,
    )
    txn_rows = await s.send(
        f"SELECT topic_id, partition, producer_id, first_offset FROM mirror_txns WHERE {where}",
        params,
    )
    states = {(int(r[0]), int(r[1])): r[2:] for r in await state_rows.fetchall()}
    txns: dict[RowKey, dict[int, int]] = {}
    for t, p, pid, first in await txn_rows.fetchall():
        txns.setdefault((int(t), int(p)), {})[int(pid)] = int(first)
    for key in keys:
        part = found.get(key)
        if part is None:
            continue
        at = (part.topic_id, part.partition)
        state = states.get(at)
        if state is None:
            # A topic nobody mirrors: no mirror commit may write it.
            plan.targets[key] = MirrorTarget(part, MirrorState.STOPPED, -1)
            continue
        plan.targets[key] = MirrorTarget(
            part,
            MirrorState(state[0]),
            int(state[1]),
            open_txns=txns.get(at, {}),
            source_epoch=int(state[2]),
        )


async def _write(s: Session, plan: MirrorPlan) -> None:
    """The file's final state and what the plan collected, nothing read back."""
    await objects.finish(s, plan.file_id, bool(plan.rows), plan.live_bytes, plan.now)
    i = _IS_TRANSACTIONAL
    await s.executemany(
        f"INSERT INTO batches ({', '.join(MIRROR_BATCH_COLUMNS)})"
        f" VALUES ({', '.join('?' * len(MIRROR_BATCH_COLUMNS))})",
        [(*r[:i], bool(r[i]), *r[i + 1 :]) for r in plan.rows],
    )
    touched = plan.touched()
    if touched:
        at = [(t.part.topic_id, t.part.partition) for t in touched]
        await s.executemany(
            "UPDATE partitions SET high_watermark = ?, byte_size = byte_size + ?,"
            " max_timestamp = ? WHERE topic_id = ? AND partition = ?",
            [
                (t.part.high_watermark, t.added_bytes, t.part.max_timestamp, *k)
                for t, k in zip(touched, at, strict=True)
            ],
        )
        await s.insert_int_rows("time_index", TIME_MARK_TYPES, time_marks(t.part for t in touched))
        await s.executemany(
            "UPDATE mirror_partitions SET source_epoch = ?, updated_at = ?"
            " WHERE topic_id = ? AND partition = ?",
            [(t.source_epoch, plan.now, *k) for t, k in zip(touched, at, strict=True)],
        )
        await s.executemany("DELETE FROM mirror_txns WHERE topic_id = ? AND partition = ?", at)
        await s.executemany(
            "INSERT INTO mirror_txns (topic_id, partition, producer_id, first_offset)"
            " VALUES (?, ?, ?, ?)",
            [
                (*k, pid, first)
                for t, k in zip(touched, at, strict=True)
                for pid, first in t.open_txns.items()
            ],
        )
    await s.executemany(
        "INSERT INTO aborted_txns (topic_id, partition, marker_offset, producer_id,"
        " first_offset) VALUES (?, ?, ?, ?, ?) ON CONFLICT DO NOTHING",
        plan.aborted,
    )


async def read_only(
    s: Session, partitions: dict[tuple[UUID, int], PartitionRow]
) -> set[tuple[UUID, int]]:
    """Take the partitions of mirror topics (a row not STOPPED) out of `partitions` and
    return their keys: commit_file answers their batches READ_ONLY_ERROR
    (`mirror_rules.refuse_read_only`). One query, on commit_file's hot path."""
    topic_rows = sorted({part.topic_id for part in partitions.values()})
    if not topic_rows:
        return set()
    keys, params = s.dialect.keyset("k", (("id", "bigint"),), [(t,) for t in topic_rows])
    rows = await s.fetchall(
        "SELECT topic_id, partition FROM mirror_partitions WHERE state <> 'STOPPED'"
        f" AND topic_id IN (SELECT k.id FROM {keys})",
        params,
    )
    if not rows:
        return set()
    locked: set[Any] = {(int(t), int(p)) for t, p in rows}
    found = {k for k, part in partitions.items() if (part.topic_id, part.partition) in locked}
    for key in found:
        del partitions[key]
    return found
