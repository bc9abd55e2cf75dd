"""Mirrored partitions: joining a mirror, listing, reporting progress, and the leases that
spread them over brokers.

Leases are renewed and rebalanced by one call per broker per interval, a few statements
whatever the partition count, so a link flap over many partitions does not turn into a
write per partition (state changes only happen on real transitions). Brokers claiming
leases skip rows another claimer holds (PostgreSQL: FOR UPDATE SKIP LOCKED)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any
from uuid import UUID

from lakelog.coordinator.engine import Session
from lakelog.coordinator.log_types import PartitionKey
from lakelog.coordinator.mirror_rows import (
    ACTIVE,
    ACTIVE_SQL,
    PARTITION_COLUMNS,
    PARTITION_FROM,
    admit,
    partition_row,
    update_assignments,
)
from lakelog.coordinator.mirror_types import MirrorPartition, MirrorPartitionUpdate, MirrorResult
from lakelog.coordinator.ops.rows import PartitionRow, find_partitions
from lakelog.util.errors import ErrorCode

RowKey = tuple[int, int]
"""A partition by topic row id and partition number."""

IN_KEYS = "(topic_id, partition) IN (SELECT k.topic_id, k.partition FROM {keys})"
"""A WHERE term: the row's partition is among a `row_keys` set (format `keys`)."""


def row_keys(s: Session, keys: Sequence[RowKey]) -> tuple[str, list[Any]]:
    """`keys` as the FROM item `k (topic_id, partition)` and its parameters."""
    return s.dialect.keyset("k", (("topic_id", "bigint"), ("partition", "int")), keys)


async def select_partitions(s: Session, where: str, args: Sequence[Any]) -> list[MirrorPartition]:
    rows = await s.fetchall(
        f"SELECT {PARTITION_COLUMNS} FROM {PARTITION_FROM} WHERE {where}"
        " ORDER BY t.name, mp.partition",
        args,
    )
    return [partition_row(row) for row in rows]


async def add_mirror_partitions(
    s: Session, name: str, partitions: Sequence[PartitionKey], restart: bool, now: int
) -> list[MirrorResult]:
    """Each partition joins mirror `name` (PREPARING) unless another mirror holds it; with
    `restart`, a FAILED or STOPPED one starts over."""
    exists = await s.send("SELECT 1 FROM mirrors WHERE name = ?", (name,))
    found = await find_partitions(s, ((p.topic_id, p.partition) for p in partitions), True)
    if await exists.fetchone() is None:
        return [MirrorResult(ErrorCode.resource_not_found, f"no mirror {name!r}")] * len(partitions)
    current: dict[RowKey, tuple[str, str]] = {}
    if found:
        keys, params = row_keys(s, [(p.topic_id, p.partition) for p in found.values()])
        rows = await s.fetchall(
            "SELECT topic_id, partition, mirror_name, state FROM mirror_partitions"
            " WHERE " + IN_KEYS.format(keys=keys),
            params,
        )
        current = {(int(t), int(p)): (owner, state) for t, p, owner, state in rows}
    upserts: list[tuple[Any, ...]] = []
    results: list[MirrorResult] = []
    for key in partitions:
        part = found.get((key.topic_id, key.partition))
        if part is None:
            results.append(MirrorResult(ErrorCode.unknown_topic_or_partition))
            continue
        where = (part.topic_id, part.partition)
        row = current.get(where)
        decision = admit(name, row)
        if decision.error == ErrorCode.none and (
            row is None or (restart and row[1] in ("FAILED", "STOPPED"))
        ):
            upserts.append((*where, name, now, name, now))
            current[where] = (name, "PREPARING")
        results.append(decision)
    await s.executemany(
        "INSERT INTO mirror_partitions (topic_id, partition, mirror_name, state,"
        " updated_at) VALUES (?, ?, ?, 'PREPARING', ?)"
        " ON CONFLICT (topic_id, partition) DO UPDATE SET mirror_name = ?,"
        " state = 'PREPARING', lease_owner = -1, lease_expiry = 0, reason = NULL,"
        " source_end_offset = -1, source_high_watermark = -1, lag_ms = 0,"
        " updated_at = ?",
        upserts,
    )
    return results


async def mirror_partitions(
    s: Session, mirror: str | None, topic_ids: Sequence[UUID] | None
) -> list[MirrorPartition]:
    clauses = ["1 = 1"]
    args: list[Any] = []
    if mirror is not None:
        clauses.append("mp.mirror_name = ?")
        args.append(mirror)
    if topic_ids is not None:
        if not topic_ids:
            return []
        d = s.dialect
        keys, params = d.keyset("k", (("id", "uuid"),), [(d.uuid(t),) for t in topic_ids])
        clauses.append(f"t.topic_uuid IN (SELECT k.id FROM {keys})")
        args += params
    return await select_partitions(s, " AND ".join(clauses), args)


async def acquire_mirror_leases(
    s: Session, broker_id: int, broker_epoch: int, live_brokers: int, now: int, ttl_ms: int
) -> list[MirrorPartition]:
    """Renew this broker's leases and move it towards its fair share of the active
    partitions (releasing extras, claiming free or expired ones). A fenced epoch gets
    nothing."""
    current = await s.send("SELECT broker_epoch FROM brokers WHERE broker_id = ?", (broker_id,))
    active = await s.send(f"SELECT COUNT(*) FROM mirror_partitions WHERE state IN {ACTIVE_SQL}")
    epoch = await current.fetchone()
    if epoch is None or int(epoch[0]) != broker_epoch:
        return []
    count = await active.fetchone()
    share = math.ceil((int(count[0]) if count else 0) / max(1, live_brokers))
    renewed = await s.fetchall(
        "UPDATE mirror_partitions SET lease_expiry = ? WHERE lease_owner = ?"
        f" AND state IN {ACTIVE_SQL} RETURNING topic_id, partition",
        (now + ttl_ms, broker_id),
    )
    owned = sorted((int(t), int(p)) for t, p in renewed)
    if len(owned) > share:
        keys, params = row_keys(s, owned[share:])
        await s.execute(
            "UPDATE mirror_partitions SET lease_owner = -1, lease_expiry = 0"
            " WHERE " + IN_KEYS.format(keys=keys),
            params,
        )
    elif len(owned) < share:
        await s.execute(
            "UPDATE mirror_partitions SET lease_owner = ?, lease_expiry = ?"
            " WHERE (topic_id, partition) IN (SELECT topic_id, partition FROM mirror_partitions"
            f"  WHERE state IN {ACTIVE_SQL} AND (lease_owner = -1 OR lease_expiry < ?)"
            "  ORDER BY topic_id, partition LIMIT ?" + s.dialect.lock("UPDATE SKIP LOCKED") + ")",
            (broker_id, now + ttl_ms, now, share - len(owned)),
        )
    return await select_partitions(
        s, f"mp.lease_owner = ? AND mp.state IN {ACTIVE_SQL}", (broker_id,)
    )


async def update_mirror_partitions(
    s: Session, updates: Sequence[MirrorPartitionUpdate], now: int
) -> list[ErrorCode]:
    """Apply state changes and progress reports, in order. An update naming a broker
    applies only while that broker holds the partition's lease on an active row."""
    found = await find_partitions(s, ((u.topic_id, u.partition) for u in updates), True)
    rows: dict[RowKey, list[Any]] = {}
    if found:
        keys, params = row_keys(s, sorted((p.topic_id, p.partition) for p in found.values()))
        locked = await s.fetchall(
            "SELECT topic_id, partition, state, lease_owner FROM mirror_partitions"
            " WHERE "
            + IN_KEYS.format(keys=keys)
            + " ORDER BY topic_id, partition"
            + s.dialect.for_update,
            params,
        )
        rows = {(int(t), int(p)): [state, int(owner)] for t, p, state, owner in locked}
    results: list[ErrorCode] = []
    for u in updates:
        part = found.get((u.topic_id, u.partition))
        row = None if part is None else rows.get((part.topic_id, part.partition))
        if part is None or row is None:
            results.append(ErrorCode.unknown_topic_or_partition)
            continue
        if u.broker_id >= 0 and (row[1] != u.broker_id or row[0] not in ACTIVE):
            results.append(ErrorCode.not_leader_or_follower)
            continue
        if u.start_offset is not None and not await _start_at(s, part, u.start_offset):
            results.append(ErrorCode.invalid_request)
            continue
        sets, args = update_assignments(u)
        await s.execute(
            f"UPDATE mirror_partitions SET {sets}, updated_at = ?"
            " WHERE topic_id = ? AND partition = ?",
            (*args, now, part.topic_id, part.partition),
        )
        if u.state is not None:  # what a later update of the same partition checks
            row[0] = str(u.state)
            if u.state not in ACTIVE:
                row[1] = -1
        results.append(ErrorCode.none)
    return results


async def _start_at(s: Session, part: PartitionRow, offset: int) -> bool:
    """Move an empty partition's log to start at `offset` (True also when it already
    starts there)."""
    if offset == part.high_watermark:
        return True
    has_batches = await s.fetchone(
        "SELECT 1 FROM batches WHERE topic_id = ? AND partition = ? LIMIT 1",
        (part.topic_id, part.partition),
    )
    if has_batches or offset < part.high_watermark:
        return False
    await s.execute(
        "UPDATE partitions SET log_start_offset = ?, high_watermark = ?"
        " WHERE topic_id = ? AND partition = ?",
        (offset, offset, part.topic_id, part.partition),
    )
    part.log_start_offset = part.high_watermark = offset
    return True


async def mirror_topic_ids(s: Session) -> list[UUID]:
    """The read-only topics: those with a mirrored partition not STOPPED."""
    rows = await s.fetchall(
        "SELECT DISTINCT t.topic_uuid FROM mirror_partitions mp JOIN topics t ON t.id = mp.topic_id"
        " WHERE mp.state <> 'STOPPED'"
    )
    return [s.dialect.to_uuid(row[0]) for row in rows]
