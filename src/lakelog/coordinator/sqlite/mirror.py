"""Mirroring in SQLite: mirror definitions, per-partition rows and leases (commits are in
mirror_commit, failover in mirror_failover). Each function runs inside the transaction
its caller opened (BEGIN IMMEDIATE for writes).

Leases are renewed and rebalanced by one call per broker per interval, a few statements
whatever the partition count, so a link flap over many partitions does not turn into a
write per partition (state changes only happen on real transitions)."""

from __future__ import annotations

import json
import math
import sqlite3
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
    definition_row,
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
from lakelog.coordinator.ops.rows import PartitionRow
from lakelog.coordinator.sqlite.rows import find_partition
from lakelog.errors import ErrorCode


def select_partitions(
    conn: sqlite3.Connection, where: str, args: Sequence[Any]
) -> list[MirrorPartition]:
    return [
        partition_row(row)
        for row in conn.execute(
            f"SELECT {PARTITION_COLUMNS} FROM {PARTITION_FROM} WHERE {where}"
            " ORDER BY t.name, mp.partition",
            tuple(args),
        )
    ]


def create_mirror(conn: sqlite3.Connection, definition: MirrorDefinition, now: int) -> MirrorResult:
    row = conn.execute(
        f"INSERT INTO mirrors ({MIRROR_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?)"
        " ON CONFLICT (name) DO NOTHING RETURNING name",
        (
            definition.name,
            definition.source_bootstrap,
            json.dumps(dict(definition.source_configs), sort_keys=True),
            json.dumps(list(dict.fromkeys(definition.topics))),
            json.dumps(list(dict.fromkeys(definition.patterns))),
            now,
        ),
    ).fetchone()
    if row is None:
        return MirrorResult(ErrorCode.invalid_request, f"mirror {definition.name!r} exists")
    return MirrorResult(ErrorCode.none)


def list_mirrors(conn: sqlite3.Connection, names: Sequence[str] | None) -> list[MirrorDefinition]:
    rows = conn.execute(f"SELECT {MIRROR_COLUMNS} FROM mirrors ORDER BY name").fetchall()
    wanted = None if names is None else set(names)
    return [definition_row(r) for r in rows if wanted is None or r[0] in wanted]


def delete_mirror(conn: sqlite3.Connection, name: str) -> MirrorResult:
    if conn.execute("SELECT 1 FROM mirrors WHERE name = ?", (name,)).fetchone() is None:
        return MirrorResult(ErrorCode.resource_not_found, f"no mirror {name!r}")
    busy = conn.execute(
        "SELECT COUNT(*) FROM mirror_partitions WHERE mirror_name = ? AND state != 'STOPPED'",
        (name,),
    ).fetchone()[0]
    if busy:
        return MirrorResult(
            ErrorCode.invalid_request,
            f"mirror {name!r} still holds {busy} partitions: remove its topics first",
        )
    conn.execute("DELETE FROM mirrors WHERE name = ?", (name,))
    return MirrorResult(ErrorCode.none)


def alter_mirror(
    conn: sqlite3.Connection,
    name: str,
    add_topics: Sequence[str],
    add_patterns: Sequence[str],
    remove_topics: Sequence[str],
) -> MirrorResult:
    row = conn.execute("SELECT topics, patterns FROM mirrors WHERE name = ?", (name,)).fetchone()
    if row is None:
        return MirrorResult(ErrorCode.resource_not_found, f"no mirror {name!r}")
    topics, patterns = merge_lists(row[0], row[1], add_topics, add_patterns, remove_topics)
    conn.execute(
        "UPDATE mirrors SET topics = ?, patterns = ? WHERE name = ?", (topics, patterns, name)
    )
    return MirrorResult(ErrorCode.none)


def claim_mirror_task(
    conn: sqlite3.Connection, name: str, broker_id: int, now: int, ttl_ms: int
) -> bool:
    row = conn.execute(
        "UPDATE mirrors SET task_owner = ?, task_expiry = ? WHERE name = ?"
        " AND (task_owner = ? OR task_owner = -1 OR task_expiry < ?) RETURNING name",
        (broker_id, now + ttl_ms, name, broker_id, now),
    ).fetchone()
    return row is not None


def add_mirror_partitions(
    conn: sqlite3.Connection,
    name: str,
    partitions: Sequence[PartitionKey],
    restart: bool,
    now: int,
) -> list[MirrorResult]:
    if conn.execute("SELECT 1 FROM mirrors WHERE name = ?", (name,)).fetchone() is None:
        return [MirrorResult(ErrorCode.resource_not_found, f"no mirror {name!r}")] * len(partitions)
    results: list[MirrorResult] = []
    for key in partitions:
        part = find_partition(conn, key.topic_id, key.partition)
        if part is None:
            results.append(MirrorResult(ErrorCode.unknown_topic_or_partition))
            continue
        where = (part.topic_id, part.partition)
        row = conn.execute(
            "SELECT mirror_name, state FROM mirror_partitions WHERE topic_id = ? AND partition = ?",
            where,
        ).fetchone()
        decision = admit(name, row)
        if decision.error == ErrorCode.none and (
            row is None or (restart and row[1] in ("FAILED", "STOPPED"))
        ):
            conn.execute(
                "INSERT INTO mirror_partitions (topic_id, partition, mirror_name, state,"
                " updated_at) VALUES (?, ?, ?, 'PREPARING', ?)"
                " ON CONFLICT (topic_id, partition) DO UPDATE SET mirror_name = ?,"
                " state = 'PREPARING', lease_owner = -1, lease_expiry = 0, reason = NULL,"
                " source_end_offset = -1, source_high_watermark = -1, lag_ms = 0,"
                " updated_at = ?",
                (*where, name, now, name, now),
            )
        results.append(decision)
    return results


def mirror_partitions(
    conn: sqlite3.Connection, mirror: str | None, topic_ids: Sequence[UUID] | None
) -> list[MirrorPartition]:
    clauses: list[str] = ["1 = 1"]
    args: list[Any] = []
    if mirror is not None:
        clauses.append("mp.mirror_name = ?")
        args.append(mirror)
    if topic_ids is not None:
        if not topic_ids:
            return []
        clauses.append(f"t.topic_uuid IN ({', '.join('?' * len(topic_ids))})")
        args.extend(str(t) for t in topic_ids)
    return select_partitions(conn, " AND ".join(clauses), args)


def acquire_mirror_leases(
    conn: sqlite3.Connection,
    broker_id: int,
    broker_epoch: int,
    live_brokers: int,
    now: int,
    ttl_ms: int,
) -> list[MirrorPartition]:
    current = conn.execute(
        "SELECT broker_epoch FROM brokers WHERE broker_id = ?", (broker_id,)
    ).fetchone()
    if current is None or int(current[0]) != broker_epoch:
        return []
    active = conn.execute(
        f"SELECT COUNT(*) FROM mirror_partitions WHERE state IN {ACTIVE_SQL}"
    ).fetchone()[0]
    share = math.ceil(active / max(1, live_brokers))
    conn.execute(
        f"UPDATE mirror_partitions SET lease_expiry = ? WHERE lease_owner = ?"
        f" AND state IN {ACTIVE_SQL}",
        (now + ttl_ms, broker_id),
    )
    owned = conn.execute(
        f"SELECT topic_id, partition FROM mirror_partitions WHERE lease_owner = ?"
        f" AND state IN {ACTIVE_SQL} ORDER BY topic_id, partition",
        (broker_id,),
    ).fetchall()
    if len(owned) > share:
        conn.executemany(
            "UPDATE mirror_partitions SET lease_owner = -1, lease_expiry = 0"
            " WHERE topic_id = ? AND partition = ?",
            owned[share:],
        )
    elif len(owned) < share:
        conn.execute(
            "UPDATE mirror_partitions SET lease_owner = ?, lease_expiry = ?"
            " WHERE (topic_id, partition) IN (SELECT topic_id, partition FROM mirror_partitions"
            f"  WHERE state IN {ACTIVE_SQL} AND (lease_owner = -1 OR lease_expiry < ?)"
            "  ORDER BY topic_id, partition LIMIT ?)",
            (broker_id, now + ttl_ms, now, share - len(owned)),
        )
    return select_partitions(conn, f"mp.lease_owner = ? AND mp.state IN {ACTIVE_SQL}", (broker_id,))


def update_mirror_partitions(
    conn: sqlite3.Connection, updates: Sequence[MirrorPartitionUpdate], now: int
) -> list[ErrorCode]:
    results: list[ErrorCode] = []
    for u in updates:
        part = find_partition(conn, u.topic_id, u.partition)
        row = (
            None
            if part is None
            else conn.execute(
                "SELECT state, lease_owner FROM mirror_partitions"
                " WHERE topic_id = ? AND partition = ?",
                (part.topic_id, part.partition),
            ).fetchone()
        )
        if part is None or row is None:
            results.append(ErrorCode.unknown_topic_or_partition)
            continue
        if u.broker_id >= 0 and (row[1] != u.broker_id or row[0] not in ACTIVE):
            results.append(ErrorCode.not_leader_or_follower)
            continue
        if u.start_offset is not None and not _start_at(conn, part, u.start_offset):
            results.append(ErrorCode.invalid_request)
            continue
        sets, args = update_assignments(u)
        conn.execute(
            f"UPDATE mirror_partitions SET {sets}, updated_at = ?"
            " WHERE topic_id = ? AND partition = ?",
            (*args, now, part.topic_id, part.partition),
        )
        results.append(ErrorCode.none)
    return results


def _start_at(conn: sqlite3.Connection, part: PartitionRow, offset: int) -> bool:
    """Move an empty partition's log to start at `offset` (True also when it already
    starts there)."""
    if offset == part.high_watermark:
        return True
    has_batches = conn.execute(
        "SELECT 1 FROM batches WHERE topic_id = ? AND partition = ? LIMIT 1",
        (part.topic_id, part.partition),
    ).fetchone()
    if has_batches or offset < part.high_watermark:
        return False
    conn.execute(
        "UPDATE partitions SET log_start_offset = ?, high_watermark = ?"
        " WHERE topic_id = ? AND partition = ?",
        (offset, offset, part.topic_id, part.partition),
    )
    return True


def mirror_topic_ids(conn: sqlite3.Connection) -> list[UUID]:
    return [
        UUID(str(row[0]))
        for row in conn.execute(
            "SELECT DISTINCT t.topic_uuid FROM mirror_partitions mp"
            " JOIN topics t ON t.id = mp.topic_id WHERE mp.state != 'STOPPED'"
        )
    ]
