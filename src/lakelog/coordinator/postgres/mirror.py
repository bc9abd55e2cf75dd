"""Mirroring in PostgreSQL: mirror definitions, per-partition rows and leases, with the
SQLite module's rules and row shapes (mirror_rows) and PostgreSQL's locking: brokers
claiming leases skip rows another claimer holds (FOR UPDATE SKIP LOCKED). Commits are in
mirror_commit, failover in mirror_failover."""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from typing import Any
from uuid import UUID

from lakelog.coordinator.interface import PartitionKey
from lakelog.coordinator.mirror_rows import (
    ACTIVE,
    ACTIVE_SQL,
    MIRROR_COLUMNS,
    PARTITION_COLUMNS,
    PARTITION_FROM,
    admit,
    merge_lists,
    partition_row,
    update_assignments,
)
from lakelog.coordinator.mirror_types import (
    MirrorDefinition,
    MirrorPartition,
    MirrorPartitionUpdate,
    MirrorResult,
)
from lakelog.coordinator.postgres.rows import Conn, PartitionRow, find_partitions
from lakelog.errors import ErrorCode


async def select_partitions(conn: Conn, where: str, args: Sequence[Any]) -> list[MirrorPartition]:
    cursor = await conn.execute(
        f"SELECT {PARTITION_COLUMNS} FROM {PARTITION_FROM} WHERE {where}"
        " ORDER BY t.name, mp.partition",
        tuple(args),
    )
    return [partition_row(row) for row in await cursor.fetchall()]


async def one(conn: Conn, sql: str, args: Sequence[Any] = ()) -> tuple[Any, ...] | None:
    cursor = await conn.execute(sql, tuple(args))
    return await cursor.fetchone()


async def create_mirror(conn: Conn, definition: MirrorDefinition, now: int) -> MirrorResult:
    row = await one(
        conn,
        f"INSERT INTO mirrors ({MIRROR_COLUMNS}) VALUES (%s, %s, %s, %s, %s, %s)"
        " ON CONFLICT (name) DO NOTHING RETURNING name",
        (
            definition.name,
            definition.source_bootstrap,
            json.dumps(dict(definition.source_configs), sort_keys=True),
            json.dumps(list(dict.fromkeys(definition.topics))),
            json.dumps(list(dict.fromkeys(definition.patterns))),
            now,
        ),
    )
    if row is None:
        return MirrorResult(ErrorCode.invalid_request, f"mirror {definition.name!r} exists")
    return MirrorResult(ErrorCode.none)


async def list_mirrors(conn: Conn, names: Sequence[str] | None) -> list[MirrorDefinition]:
    cursor = await conn.execute(f"SELECT {MIRROR_COLUMNS} FROM mirrors ORDER BY name")
    wanted = None if names is None else set(names)
    return [
        MirrorDefinition(
            name=r[0],
            source_bootstrap=r[1],
            source_configs=json.loads(r[2]),
            topics=tuple(json.loads(r[3])),
            patterns=tuple(json.loads(r[4])),
            created_at=int(r[5]),
        )
        for r in await cursor.fetchall()
        if wanted is None or r[0] in wanted
    ]


async def delete_mirror(conn: Conn, name: str) -> MirrorResult:
    if await one(conn, "SELECT 1 FROM mirrors WHERE name = %s FOR UPDATE", (name,)) is None:
        return MirrorResult(ErrorCode.resource_not_found, f"no mirror {name!r}")
    row = await one(
        conn,
        "SELECT COUNT(*) FROM mirror_partitions WHERE mirror_name = %s AND state <> 'STOPPED'",
        (name,),
    )
    busy = int(row[0]) if row else 0
    if busy:
        return MirrorResult(
            ErrorCode.invalid_request,
            f"mirror {name!r} still holds {busy} partitions: remove its topics first",
        )
    await conn.execute("DELETE FROM mirrors WHERE name = %s", (name,))
    return MirrorResult(ErrorCode.none)


async def alter_mirror(
    conn: Conn,
    name: str,
    add_topics: Sequence[str],
    add_patterns: Sequence[str],
    remove_topics: Sequence[str],
) -> MirrorResult:
    row = await one(
        conn, "SELECT topics, patterns FROM mirrors WHERE name = %s FOR UPDATE", (name,)
    )
    if row is None:
        return MirrorResult(ErrorCode.resource_not_found, f"no mirror {name!r}")
    topics, patterns = merge_lists(row[0], row[1], add_topics, add_patterns, remove_topics)
    await conn.execute(
        "UPDATE mirrors SET topics = %s, patterns = %s WHERE name = %s", (topics, patterns, name)
    )
    return MirrorResult(ErrorCode.none)


async def claim_mirror_task(conn: Conn, name: str, broker_id: int, now: int, ttl_ms: int) -> bool:
    row = await one(
        conn,
        "UPDATE mirrors SET task_owner = %s, task_expiry = %s WHERE name = %s"
        " AND (task_owner = %s OR task_owner = -1 OR task_expiry < %s) RETURNING name",
        (broker_id, now + ttl_ms, name, broker_id, now),
    )
    return row is not None


async def add_mirror_partitions(
    conn: Conn, name: str, partitions: Sequence[PartitionKey], restart: bool, now: int
) -> list[MirrorResult]:
    if await one(conn, "SELECT 1 FROM mirrors WHERE name = %s", (name,)) is None:
        return [MirrorResult(ErrorCode.resource_not_found, f"no mirror {name!r}")] * len(partitions)
    found = await find_partitions(conn, ((p.topic_id, p.partition) for p in partitions), True)
    results: list[MirrorResult] = []
    for key in partitions:
        part = found.get((key.topic_id, key.partition))
        if part is None:
            results.append(MirrorResult(ErrorCode.unknown_topic_or_partition))
            continue
        where = (part.topic_id, part.partition)
        row = await one(
            conn,
            "SELECT mirror_name, state FROM mirror_partitions"
            " WHERE topic_id = %s AND partition = %s",
            where,
        )
        decision = admit(name, row)
        if decision.error == ErrorCode.none and (
            row is None or (restart and row[1] in ("FAILED", "STOPPED"))
        ):
            await conn.execute(
                "INSERT INTO mirror_partitions (topic_id, partition, mirror_name, state,"
                " updated_at) VALUES (%s, %s, %s, 'PREPARING', %s)"
                " ON CONFLICT (topic_id, partition) DO UPDATE SET mirror_name = %s,"
                " state = 'PREPARING', lease_owner = -1, lease_expiry = 0, reason = NULL,"
                " source_end_offset = -1, source_high_watermark = -1, lag_ms = 0,"
                " updated_at = %s",
                (*where, name, now, name, now),
            )
        results.append(decision)
    return results


async def mirror_partitions(
    conn: Conn, mirror: str | None, topic_ids: Sequence[UUID] | None
) -> list[MirrorPartition]:
    clauses = ["TRUE"]
    args: list[Any] = []
    if mirror is not None:
        clauses.append("mp.mirror_name = %s")
        args.append(mirror)
    if topic_ids is not None:
        if not topic_ids:
            return []
        clauses.append("t.topic_uuid = ANY(%s::uuid[])")
        args.append(list(topic_ids))
    return await select_partitions(conn, " AND ".join(clauses), args)


async def acquire_mirror_leases(
    conn: Conn, broker_id: int, broker_epoch: int, live_brokers: int, now: int, ttl_ms: int
) -> list[MirrorPartition]:
    current = await one(conn, "SELECT broker_epoch FROM brokers WHERE broker_id = %s", (broker_id,))
    if current is None or int(current[0]) != broker_epoch:
        return []
    row = await one(conn, f"SELECT COUNT(*) FROM mirror_partitions WHERE state IN {ACTIVE_SQL}")
    share = math.ceil((int(row[0]) if row else 0) / max(1, live_brokers))
    cursor = await conn.execute(
        f"UPDATE mirror_partitions SET lease_expiry = %s WHERE lease_owner = %s"
        f" AND state IN {ACTIVE_SQL} RETURNING topic_id, partition",
        (now + ttl_ms, broker_id),
    )
    owned = sorted((int(t), int(p)) for t, p in await cursor.fetchall())
    if len(owned) > share:
        extra = owned[share:]
        await conn.execute(
            "UPDATE mirror_partitions mp SET lease_owner = -1, lease_expiry = 0"
            " FROM unnest(%s::bigint[], %s::int[]) AS k (topic_id, partition)"
            " WHERE mp.topic_id = k.topic_id AND mp.partition = k.partition",
            ([t for t, _ in extra], [p for _, p in extra]),
        )
    elif len(owned) < share:
        await conn.execute(
            "UPDATE mirror_partitions SET lease_owner = %s, lease_expiry = %s"
            " WHERE (topic_id, partition) IN (SELECT topic_id, partition FROM mirror_partitions"
            f"  WHERE state IN {ACTIVE_SQL} AND (lease_owner = -1 OR lease_expiry < %s)"
            "  ORDER BY topic_id, partition LIMIT %s FOR UPDATE SKIP LOCKED)",
            (broker_id, now + ttl_ms, now, share - len(owned)),
        )
    return await select_partitions(
        conn, f"mp.lease_owner = %s AND mp.state IN {ACTIVE_SQL}", (broker_id,)
    )


async def update_mirror_partitions(
    conn: Conn, updates: Sequence[MirrorPartitionUpdate], now: int
) -> list[ErrorCode]:
    found = await find_partitions(conn, ((u.topic_id, u.partition) for u in updates), True)
    results: list[ErrorCode] = []
    for u in updates:
        part = found.get((u.topic_id, u.partition))
        row = (
            None
            if part is None
            else await one(
                conn,
                "SELECT state, lease_owner FROM mirror_partitions"
                " WHERE topic_id = %s AND partition = %s FOR UPDATE",
                (part.topic_id, part.partition),
            )
        )
        if part is None or row is None:
            results.append(ErrorCode.unknown_topic_or_partition)
            continue
        if u.broker_id >= 0 and (row[1] != u.broker_id or row[0] not in ACTIVE):
            results.append(ErrorCode.not_leader_or_follower)
            continue
        if u.start_offset is not None and not await _start_at(conn, part, u.start_offset):
            results.append(ErrorCode.invalid_request)
            continue
        sets, args = update_assignments(u, "%s")
        await conn.execute(
            f"UPDATE mirror_partitions SET {sets}, updated_at = %s"
            " WHERE topic_id = %s AND partition = %s",
            (*args, now, part.topic_id, part.partition),
        )
        results.append(ErrorCode.none)
    return results


async def _start_at(conn: Conn, part: PartitionRow, offset: int) -> bool:
    if offset == part.high_watermark:
        return True
    has_batches = await one(
        conn,
        "SELECT 1 FROM batches WHERE topic_id = %s AND partition = %s LIMIT 1",
        (part.topic_id, part.partition),
    )
    if has_batches or offset < part.high_watermark:
        return False
    await conn.execute(
        "UPDATE partitions SET log_start_offset = %s, high_watermark = %s"
        " WHERE topic_id = %s AND partition = %s",
        (offset, offset, part.topic_id, part.partition),
    )
    return True


async def mirror_topic_ids(conn: Conn) -> list[UUID]:
    cursor = await conn.execute(
        "SELECT DISTINCT t.topic_uuid FROM mirror_partitions mp JOIN topics t ON t.id = mp.topic_id"
        " WHERE mp.state <> 'STOPPED'"
    )
    return [UUID(str(row[0])) for row in await cursor.fetchall()]
