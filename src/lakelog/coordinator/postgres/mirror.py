"""Mirroring in PostgreSQL: the SQLite module's rules and row shapes, with PostgreSQL's
locking. A mirror commit locks its partitions FOR UPDATE (the writers' order), then their
mirror rows FOR SHARE, so a failover's STOPPING (a row update) waits for commits in flight
and later commits see it; the failover truncation locks the partitions first too. Brokers
claiming leases skip rows another claimer holds (FOR UPDATE SKIP LOCKED)."""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from typing import Any
from uuid import UUID

from lakelog.coordinator.interface import CommitBatchResult, PartitionKey
from lakelog.coordinator.mirror_rules import (
    MIRROR_BATCH_COLUMNS,
    MirrorPlan,
    MirrorTarget,
    plan_mirror_batch,
    truncation_point,
    well_formed,
)
from lakelog.coordinator.mirror_types import (
    MirrorBatch,
    MirrorDefinition,
    MirrorPartition,
    MirrorPartitionUpdate,
    MirrorResult,
    MirrorState,
)
from lakelog.coordinator.postgres.rows import Conn, PartitionRow, find_partitions, now_ms
from lakelog.coordinator.postgres.transaction import Transactions
from lakelog.coordinator.sqlite.mirror import (
    admit,
    merge_lists,
    update_assignments,
)
from lakelog.coordinator.sqlite.mirror import partition_row as _partition
from lakelog.errors import ErrorCode

_ACTIVE = ("PREPARING", "MIRRORING")
_ACTIVE_SQL = "('PREPARING', 'MIRRORING')"
_MIRROR_COLUMNS = "name, source_bootstrap, source_configs, topics, patterns, created_at"
_PARTITION_COLUMNS = (
    "mp.mirror_name, t.name, t.topic_uuid, mp.partition, mp.state, p.high_watermark,"
    " p.log_start_offset, mp.source_epoch, mp.lease_owner, mp.lease_expiry, mp.reason,"
    " mp.source_end_offset, mp.source_high_watermark, mp.lag_ms, mp.failover_offset,"
    " mp.updated_at,"
    " (SELECT MIN(first_offset) FROM mirror_txns x"
    "   WHERE x.topic_id = mp.topic_id AND x.partition = mp.partition),"
    " (SELECT MIN(first_offset) FROM txn_partitions x"
    "   WHERE x.topic_id = mp.topic_id AND x.partition = mp.partition AND first_offset >= 0)"
)
_PARTITION_FROM = (
    "mirror_partitions mp JOIN topics t ON t.id = mp.topic_id"
    " JOIN partitions p ON p.topic_id = mp.topic_id AND p.partition = mp.partition"
)


async def _select(conn: Conn, where: str, args: Sequence[Any]) -> list[MirrorPartition]:
    cursor = await conn.execute(
        f"SELECT {_PARTITION_COLUMNS} FROM {_PARTITION_FROM} WHERE {where}"
        " ORDER BY t.name, mp.partition",
        tuple(args),
    )
    return [_partition(row) for row in await cursor.fetchall()]


async def _one(conn: Conn, sql: str, args: Sequence[Any] = ()) -> tuple[Any, ...] | None:
    cursor = await conn.execute(sql, tuple(args))
    return await cursor.fetchone()


# ---------------------------------------------------------------- definitions


async def create_mirror(conn: Conn, definition: MirrorDefinition, now: int) -> MirrorResult:
    row = await _one(
        conn,
        f"INSERT INTO mirrors ({_MIRROR_COLUMNS}) VALUES (%s, %s, %s, %s, %s, %s)"
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
    cursor = await conn.execute(f"SELECT {_MIRROR_COLUMNS} FROM mirrors ORDER BY name")
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
    if await _one(conn, "SELECT 1 FROM mirrors WHERE name = %s FOR UPDATE", (name,)) is None:
        return MirrorResult(ErrorCode.resource_not_found, f"no mirror {name!r}")
    row = await _one(
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
    row = await _one(
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
    row = await _one(
        conn,
        "UPDATE mirrors SET task_owner = %s, task_expiry = %s WHERE name = %s"
        " AND (task_owner = %s OR task_owner = -1 OR task_expiry < %s) RETURNING name",
        (broker_id, now + ttl_ms, name, broker_id, now),
    )
    return row is not None


# ---------------------------------------------------------------- partitions and leases


async def add_mirror_partitions(
    conn: Conn, name: str, partitions: Sequence[PartitionKey], restart: bool, now: int
) -> list[MirrorResult]:
    if await _one(conn, "SELECT 1 FROM mirrors WHERE name = %s", (name,)) is None:
        return [MirrorResult(ErrorCode.resource_not_found, f"no mirror {name!r}")] * len(partitions)
    found = await find_partitions(conn, ((p.topic_id, p.partition) for p in partitions), True)
    results: list[MirrorResult] = []
    for key in partitions:
        part = found.get((key.topic_id, key.partition))
        if part is None:
            results.append(MirrorResult(ErrorCode.unknown_topic_or_partition))
            continue
        where = (part.topic_id, part.partition)
        row = await _one(
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
    return await _select(conn, " AND ".join(clauses), args)


async def acquire_mirror_leases(
    conn: Conn, broker_id: int, broker_epoch: int, live_brokers: int, now: int, ttl_ms: int
) -> list[MirrorPartition]:
    current = await _one(
        conn, "SELECT broker_epoch FROM brokers WHERE broker_id = %s", (broker_id,)
    )
    if current is None or int(current[0]) != broker_epoch:
        return []
    row = await _one(conn, f"SELECT COUNT(*) FROM mirror_partitions WHERE state IN {_ACTIVE_SQL}")
    share = math.ceil((int(row[0]) if row else 0) / max(1, live_brokers))
    cursor = await conn.execute(
        f"UPDATE mirror_partitions SET lease_expiry = %s WHERE lease_owner = %s"
        f" AND state IN {_ACTIVE_SQL} RETURNING topic_id, partition",
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
            f"  WHERE state IN {_ACTIVE_SQL} AND (lease_owner = -1 OR lease_expiry < %s)"
            "  ORDER BY topic_id, partition LIMIT %s FOR UPDATE SKIP LOCKED)",
            (broker_id, now + ttl_ms, now, share - len(owned)),
        )
    return await _select(conn, f"mp.lease_owner = %s AND mp.state IN {_ACTIVE_SQL}", (broker_id,))


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
            else await _one(
                conn,
                "SELECT state, lease_owner FROM mirror_partitions"
                " WHERE topic_id = %s AND partition = %s FOR UPDATE",
                (part.topic_id, part.partition),
            )
        )
        if part is None or row is None:
            results.append(ErrorCode.unknown_topic_or_partition)
            continue
        if u.broker_id >= 0 and (row[1] != u.broker_id or row[0] not in _ACTIVE):
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
    has_batches = await _one(
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


# ---------------------------------------------------------------- commits


async def commit_mirror(
    conn: Conn,
    object_key: str,
    broker_id: int,
    broker_epoch: int,
    file_size: int,
    batches: Sequence[MirrorBatch],
) -> list[CommitBatchResult]:
    now = now_ms()
    row = await _one(
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
        await _one(
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


async def mirror_topic_ids(conn: Conn) -> list[UUID]:
    cursor = await conn.execute(
        "SELECT DISTINCT t.topic_uuid FROM mirror_partitions mp JOIN topics t ON t.id = mp.topic_id"
        " WHERE mp.state <> 'STOPPED'"
    )
    return [UUID(str(row[0])) for row in await cursor.fetchall()]


# ---------------------------------------------------------------- failover


async def stop_mirror_topics(
    conn: Conn, name: str, topics: Sequence[str], now: int
) -> list[MirrorResult]:
    results: list[MirrorResult] = []
    for topic in topics:
        await conn.execute(
            "UPDATE mirror_partitions SET state = 'STOPPING', lease_owner = -1,"
            " lease_expiry = 0, updated_at = %s WHERE mirror_name = %s AND state <> 'STOPPED'"
            " AND topic_id = (SELECT id FROM topics WHERE name = %s)",
            (now, name, topic),
        )
        held = await _one(
            conn,
            "SELECT 1 FROM mirror_partitions WHERE mirror_name = %s"
            " AND topic_id = (SELECT id FROM topics WHERE name = %s) LIMIT 1",
            (name, topic),
        )
        if held is None:
            results.append(
                MirrorResult(
                    ErrorCode.unknown_topic_or_partition,
                    f"mirror {name!r} does not mirror topic {topic!r}",
                )
            )
        else:
            results.append(MirrorResult(ErrorCode.none))
    await alter_mirror(conn, name, (), (), topics)
    return results


async def finish_mirror_failover(conn: Conn, now: int) -> list[MirrorPartition]:
    cursor = await conn.execute(
        "SELECT mp.topic_id, mp.partition, t.name FROM mirror_partitions mp"
        " JOIN topics t ON t.id = mp.topic_id WHERE mp.state = 'STOPPING'"
        " ORDER BY mp.topic_id, mp.partition"
    )
    stopping = [(int(t), int(p), name) for t, p, name in await cursor.fetchall()]
    if not stopping:
        return []
    await conn.execute(
        "SELECT 1 FROM partitions p JOIN unnest(%s::bigint[], %s::int[])"
        " AS k (topic_id, partition) ON p.topic_id = k.topic_id AND p.partition = k.partition"
        " ORDER BY p.topic_id, p.partition FOR UPDATE OF p",
        ([t for t, _, _ in stopping], [p for _, p, _ in stopping]),
    )
    done: list[tuple[int, int]] = []
    for topic_id, partition, topic in stopping:
        if await _truncate(conn, topic_id, partition, topic, now):
            done.append((topic_id, partition))
    out: list[MirrorPartition] = []
    for key in done:
        out += await _select(conn, "mp.topic_id = %s AND mp.partition = %s", key)
    return out


async def _truncate(conn: Conn, topic_id: int, partition: int, topic: str, now: int) -> bool:
    where = (topic_id, partition)
    still = await _one(
        conn,
        "SELECT state FROM mirror_partitions WHERE topic_id = %s AND partition = %s FOR UPDATE",
        where,
    )
    if still is None or still[0] != "STOPPING":
        return False  # another broker finished it first
    bounds = await _one(
        conn,
        "SELECT high_watermark, log_start_offset FROM partitions"
        " WHERE topic_id = %s AND partition = %s",
        where,
    )
    assert bounds is not None
    cursor = await conn.execute(
        "SELECT first_offset FROM mirror_txns WHERE topic_id = %s AND partition = %s", where
    )
    firsts = [int(f) for (f,) in await cursor.fetchall()]
    cut = truncation_point(int(bounds[0]), firsts, int(bounds[1]))
    cursor = await conn.execute(
        "DELETE FROM batches WHERE topic_id = %s AND partition = %s AND base_offset >= %s"
        " RETURNING file_id, byte_size",
        (*where, cut),
    )
    per_file: dict[int, int] = {}
    freed = 0
    for file_id, size in await cursor.fetchall():
        freed += int(size)
        if file_id is not None:
            per_file[int(file_id)] = per_file.get(int(file_id), 0) + int(size)
    for file_id, size in sorted(per_file.items()):
        await conn.execute(
            "UPDATE files SET live_bytes = live_bytes - %s,"
            " state = CASE WHEN live_bytes - %s <= 0 THEN 'deleting' ELSE state END,"
            " marked_at = CASE WHEN live_bytes - %s <= 0 AND state = 'committed'"
            "   THEN %s ELSE marked_at END WHERE id = %s",
            (size, size, size, now, file_id),
        )
    for table, column in (("aborted_txns", "marker_offset"), ("producer_state", "last_offset")):
        await conn.execute(
            f"DELETE FROM {table} WHERE topic_id = %s AND partition = %s AND {column} >= %s",
            (*where, cut),
        )
    await conn.execute("DELETE FROM mirror_txns WHERE topic_id = %s AND partition = %s", where)
    await conn.execute(
        "UPDATE partitions SET high_watermark = %s, byte_size = byte_size - %s"
        " WHERE topic_id = %s AND partition = %s",
        (cut, freed, *where),
    )
    await conn.execute(
        "UPDATE group_offsets SET committed_offset = %s WHERE topic = %s AND partition = %s"
        " AND committed_offset > %s",
        (cut, topic, partition, cut),
    )
    await conn.execute(
        "UPDATE mirror_partitions SET state = 'STOPPED', failover_offset = %s,"
        " lease_owner = -1, lease_expiry = 0, updated_at = %s"
        " WHERE topic_id = %s AND partition = %s",
        (cut, now, *where),
    )
    return True


class PostgresMirrorMethods:
    """The mirroring part of `PostgresBatchCoordinator` (mixed in): each method is one
    pooled transaction, retried whole on serialization failures and deadlocks."""

    def _run_tx(self) -> Transactions:
        raise NotImplementedError

    async def _run(self, method: str, write: bool, body: Any, *args: Any) -> Any:
        return await self._run_tx().run(method, write, body, *args)

    async def create_mirror(self, definition: MirrorDefinition, now_ms: int) -> MirrorResult:
        return await self._run("create_mirror", True, create_mirror, definition, now_ms)

    async def delete_mirror(self, name: str) -> MirrorResult:
        return await self._run("delete_mirror", True, delete_mirror, name)

    async def list_mirrors(self, names: Sequence[str] | None = None) -> list[MirrorDefinition]:
        return await self._run("list_mirrors", False, list_mirrors, names)

    async def alter_mirror(
        self,
        name: str,
        add_topics: Sequence[str] = (),
        add_patterns: Sequence[str] = (),
        remove_topics: Sequence[str] = (),
    ) -> MirrorResult:
        return await self._run(
            "alter_mirror", True, alter_mirror, name, add_topics, add_patterns, remove_topics
        )

    async def add_mirror_partitions(
        self, name: str, partitions: Sequence[PartitionKey], restart: bool, now_ms: int
    ) -> list[MirrorResult]:
        return await self._run(
            "add_mirror_partitions", True, add_mirror_partitions, name, partitions, restart, now_ms
        )

    async def mirror_partitions(
        self, mirror: str | None = None, topic_ids: Sequence[UUID] | None = None
    ) -> list[MirrorPartition]:
        return await self._run("mirror_partitions", False, mirror_partitions, mirror, topic_ids)

    async def acquire_mirror_leases(
        self, broker_id: int, broker_epoch: int, live_brokers: int, now_ms: int, ttl_ms: int
    ) -> list[MirrorPartition]:
        return await self._run(
            "acquire_mirror_leases",
            True,
            acquire_mirror_leases,
            broker_id,
            broker_epoch,
            live_brokers,
            now_ms,
            ttl_ms,
        )

    async def update_mirror_partitions(
        self, updates: Sequence[MirrorPartitionUpdate], now_ms: int
    ) -> list[ErrorCode]:
        return await self._run(
            "update_mirror_partitions", True, update_mirror_partitions, updates, now_ms
        )

    async def commit_mirror(
        self,
        object_key: str,
        broker_id: int,
        broker_epoch: int,
        file_size: int,
        batches: Sequence[MirrorBatch],
    ) -> list[CommitBatchResult]:
        return await self._run(
            "commit_mirror",
            True,
            commit_mirror,
            object_key,
            broker_id,
            broker_epoch,
            file_size,
            batches,
        )

    async def stop_mirror_topics(
        self, name: str, topics: Sequence[str], now_ms: int
    ) -> list[MirrorResult]:
        return await self._run("stop_mirror_topics", True, stop_mirror_topics, name, topics, now_ms)

    async def finish_mirror_failover(self, now_ms: int) -> list[MirrorPartition]:
        return await self._run("finish_mirror_failover", True, finish_mirror_failover, now_ms)

    async def mirror_topic_ids(self) -> list[UUID]:
        return await self._run("mirror_topic_ids", False, mirror_topic_ids)

    async def claim_mirror_task(self, name: str, broker_id: int, now_ms: int, ttl_ms: int) -> bool:
        return await self._run(
            "claim_mirror_task", True, claim_mirror_task, name, broker_id, now_ms, ttl_ms
        )
