"""Mirroring in SQLite: mirror rows, per-partition state and leases, mirror commits at
explicit offsets, and failover truncation. Each function runs inside the transaction its
caller opened (BEGIN IMMEDIATE for writes); the decisions are in `mirror_rules`.

Leases are renewed and rebalanced by one call per broker per interval, a few statements
whatever the partition count, so a link flap over many partitions does not turn into a
write per partition (state changes only happen on real transitions)."""

from __future__ import annotations

import json
import math
import sqlite3
from collections.abc import Awaitable, Callable, Sequence
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
from lakelog.coordinator.sqlite.release import release_file_bytes
from lakelog.coordinator.sqlite.rows import PartitionRow, find_partition, now_ms
from lakelog.errors import ErrorCode

_ACTIVE = ("PREPARING", "MIRRORING")
_ACTIVE_SQL = "('PREPARING', 'MIRRORING')"

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


def partition_row(row: Sequence[Any]) -> MirrorPartition:
    high, log_start = int(row[5]), int(row[6])
    firsts = [f for f in (row[16], row[17]) if f is not None]
    lso = min(max(min(firsts), log_start), high) if firsts else high
    return MirrorPartition(
        mirror=row[0],
        topic=row[1],
        topic_id=UUID(str(row[2])),
        partition=int(row[3]),
        state=MirrorState(row[4]),
        high_watermark=high,
        last_stable_offset=lso,
        log_start_offset=log_start,
        source_epoch=int(row[7]),
        lease_owner=int(row[8]),
        lease_expiry=int(row[9]),
        reason=row[10],
        source_end_offset=int(row[11]),
        source_high_watermark=int(row[12]),
        lag_ms=int(row[13]),
        failover_offset=int(row[14]),
        updated_at=int(row[15]),
    )


def _select(conn: sqlite3.Connection, where: str, args: Sequence[Any]) -> list[MirrorPartition]:
    return [
        partition_row(row)
        for row in conn.execute(
            f"SELECT {_PARTITION_COLUMNS} FROM {_PARTITION_FROM} WHERE {where}"
            " ORDER BY t.name, mp.partition",
            tuple(args),
        )
    ]


# ---------------------------------------------------------------- definitions


def _definition(row: Sequence[Any]) -> MirrorDefinition:
    return MirrorDefinition(
        name=row[0],
        source_bootstrap=row[1],
        source_configs=json.loads(row[2]),
        topics=tuple(json.loads(row[3])),
        patterns=tuple(json.loads(row[4])),
        created_at=int(row[5]),
    )


_MIRROR_COLUMNS = "name, source_bootstrap, source_configs, topics, patterns, created_at"


def create_mirror(conn: sqlite3.Connection, definition: MirrorDefinition, now: int) -> MirrorResult:
    row = conn.execute(
        f"INSERT INTO mirrors ({_MIRROR_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?)"
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
    rows = conn.execute(f"SELECT {_MIRROR_COLUMNS} FROM mirrors ORDER BY name").fetchall()
    wanted = None if names is None else set(names)
    return [_definition(r) for r in rows if wanted is None or r[0] in wanted]


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


def merge_lists(
    topics_json: str,
    patterns_json: str,
    add_topics: Sequence[str],
    add_patterns: Sequence[str],
    remove_topics: Sequence[str],
) -> tuple[str, str]:
    """The mirror's new topic and pattern lists (JSON), in first-added order."""
    removed = set(remove_topics)
    topics = [t for t in dict.fromkeys([*json.loads(topics_json), *add_topics]) if t not in removed]
    patterns = list(dict.fromkeys([*json.loads(patterns_json), *add_patterns]))
    return json.dumps(topics), json.dumps(patterns)


def claim_mirror_task(
    conn: sqlite3.Connection, name: str, broker_id: int, now: int, ttl_ms: int
) -> bool:
    row = conn.execute(
        "UPDATE mirrors SET task_owner = ?, task_expiry = ? WHERE name = ?"
        " AND (task_owner = ? OR task_owner = -1 OR task_expiry < ?) RETURNING name",
        (broker_id, now + ttl_ms, name, broker_id, now),
    ).fetchone()
    return row is not None


# ---------------------------------------------------------------- partitions and leases


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


def admit(name: str, row: Sequence[Any] | None) -> MirrorResult:
    """May a partition whose mirror row is `row` (mirror name, state) join mirror `name`?"""
    if row is None:
        return MirrorResult(ErrorCode.none)
    owner, state = row[0], row[1]
    if state in ("FAILED", "STOPPED"):
        return MirrorResult(ErrorCode.none)
    if owner != name:
        return MirrorResult(
            ErrorCode.invalid_request, f"the partition is mirrored by mirror {owner!r}"
        )
    return MirrorResult(ErrorCode.none)


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
    return _select(conn, " AND ".join(clauses), args)


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
        f"SELECT COUNT(*) FROM mirror_partitions WHERE state IN {_ACTIVE_SQL}"
    ).fetchone()[0]
    share = math.ceil(active / max(1, live_brokers))
    conn.execute(
        f"UPDATE mirror_partitions SET lease_expiry = ? WHERE lease_owner = ?"
        f" AND state IN {_ACTIVE_SQL}",
        (now + ttl_ms, broker_id),
    )
    owned = conn.execute(
        f"SELECT topic_id, partition FROM mirror_partitions WHERE lease_owner = ?"
        f" AND state IN {_ACTIVE_SQL} ORDER BY topic_id, partition",
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
            f"  WHERE state IN {_ACTIVE_SQL} AND (lease_owner = -1 OR lease_expiry < ?)"
            "  ORDER BY topic_id, partition LIMIT ?)",
            (broker_id, now + ttl_ms, now, share - len(owned)),
        )
    return _select(conn, f"mp.lease_owner = ? AND mp.state IN {_ACTIVE_SQL}", (broker_id,))


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
        if u.broker_id >= 0 and (row[1] != u.broker_id or row[0] not in _ACTIVE):
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


def update_assignments(u: MirrorPartitionUpdate, mark: str = "?") -> tuple[str, list[Any]]:
    """The SET list and arguments of an update (placeholder `mark`)."""
    pairs: list[tuple[str, Any]] = []
    if u.state is not None:
        pairs.append(("state", str(u.state)))
        pairs.append(("reason", u.reason))
        if u.state not in _ACTIVE:
            pairs += [("lease_owner", -1), ("lease_expiry", 0)]
    elif u.reason is not None:
        pairs.append(("reason", u.reason))
    for column in ("source_end_offset", "source_high_watermark", "lag_ms"):
        value = getattr(u, column)
        if value is not None:
            pairs.append((column, value))
    if not pairs:
        return "state = state", []
    return ", ".join(f"{c} = {mark}" for c, _ in pairs), [v for _, v in pairs]


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


# ---------------------------------------------------------------- commits


def commit_mirror(
    conn: sqlite3.Connection,
    object_key: str,
    broker_id: int,
    broker_epoch: int,
    file_size: int,
    batches: Sequence[MirrorBatch],
) -> list[CommitBatchResult]:
    now = now_ms()
    row = conn.execute(
        "INSERT INTO files (object_key, state, size, live_bytes, uploader_broker_id,"
        " broker_epoch, committed_at) VALUES (?, 'deleting', ?, 0, ?, ?, ?)"
        " ON CONFLICT (object_key) DO NOTHING RETURNING id",
        (object_key, file_size, broker_id, broker_epoch, now),
    ).fetchone()
    if row is None:
        return [CommitBatchResult(ErrorCode.invalid_request) for _ in batches]
    plan = MirrorPlan(now=now, broker_id=broker_id, file_id=int(row[0]))
    fenced = broker_epoch >= 0 and (
        conn.execute(
            "SELECT 1 FROM brokers WHERE broker_id = ? AND broker_epoch > ?",
            (broker_id, broker_epoch),
        ).fetchone()
        is not None
    )
    if fenced:
        results = [CommitBatchResult(ErrorCode.stale_broker_epoch)] * len(batches)
    else:
        _load_targets(conn, plan, batches, file_size)
        results = [plan_mirror_batch(plan, b, file_size) for b in batches]
    _write(conn, plan)
    return results


def _load_targets(
    conn: sqlite3.Connection, plan: MirrorPlan, batches: Sequence[MirrorBatch], file_size: int
) -> None:
    for key in dict.fromkeys(
        (b.topic_id, b.partition) for b in batches if well_formed(b, file_size)
    ):
        part = find_partition(conn, *key)
        if part is None:
            continue
        where = (part.topic_id, part.partition)
        row = conn.execute(
            "SELECT state, lease_owner, source_epoch FROM mirror_partitions"
            " WHERE topic_id = ? AND partition = ?",
            where,
        ).fetchone()
        if row is None:
            # A topic nobody mirrors: no mirror commit may write it.
            plan.targets[key] = MirrorTarget(part, MirrorState.STOPPED, -1)
            continue
        target = MirrorTarget(part, MirrorState(row[0]), int(row[1]), source_epoch=int(row[2]))
        target.open_txns = dict(
            conn.execute(
                "SELECT producer_id, first_offset FROM mirror_txns"
                " WHERE topic_id = ? AND partition = ?",
                where,
            ).fetchall()
        )
        plan.targets[key] = target


def _write(conn: sqlite3.Connection, plan: MirrorPlan) -> None:
    state, marked_at = ("committed", None) if plan.rows else ("deleting", plan.now)
    conn.execute(
        "UPDATE files SET state = ?, live_bytes = ?, committed_at = ?, marked_at = ? WHERE id = ?",
        (state, plan.live_bytes, plan.now, marked_at, plan.file_id),
    )
    if plan.rows:
        conn.executemany(
            f"INSERT INTO batches ({', '.join(MIRROR_BATCH_COLUMNS)})"
            f" VALUES ({', '.join('?' * len(MIRROR_BATCH_COLUMNS))})",
            plan.rows,
        )
    touched = plan.touched()
    for t in touched:
        where = (t.part.topic_id, t.part.partition)
        conn.execute(
            "UPDATE partitions SET high_watermark = ?, byte_size = byte_size + ?,"
            " max_timestamp = ? WHERE topic_id = ? AND partition = ?",
            (t.part.high_watermark, t.added_bytes, t.part.max_timestamp, *where),
        )
        conn.execute(
            "UPDATE mirror_partitions SET source_epoch = ?, updated_at = ?"
            " WHERE topic_id = ? AND partition = ?",
            (t.source_epoch, plan.now, *where),
        )
        conn.execute("DELETE FROM mirror_txns WHERE topic_id = ? AND partition = ?", where)
        conn.executemany(
            "INSERT INTO mirror_txns (topic_id, partition, producer_id, first_offset)"
            " VALUES (?, ?, ?, ?)",
            [(*where, pid, first) for pid, first in t.open_txns.items()],
        )
    conn.executemany(
        "INSERT INTO aborted_txns (topic_id, partition, marker_offset, producer_id,"
        " first_offset) VALUES (?, ?, ?, ?, ?) ON CONFLICT DO NOTHING",
        plan.aborted,
    )


def read_only(
    conn: sqlite3.Connection, partitions: dict[tuple[UUID, int], PartitionRow]
) -> set[tuple[UUID, int]]:
    """Take the partitions of mirror topics (a row not STOPPED) out of `partitions` and
    return their keys: commit_file answers their batches READ_ONLY_ERROR
    (`mirror_rules.refuse_read_only`)."""
    topic_rows = sorted({part.topic_id for part in partitions.values()})
    if not topic_rows:
        return set()
    locked = {
        (int(t), int(p))
        for t, p in conn.execute(
            "SELECT topic_id, partition FROM mirror_partitions WHERE state != 'STOPPED'"
            f" AND topic_id IN ({', '.join('?' * len(topic_rows))})",
            topic_rows,
        )
    }
    found = {k for k, part in partitions.items() if (part.topic_id, part.partition) in locked}
    for key in found:
        del partitions[key]
    return found


def mirror_topic_ids(conn: sqlite3.Connection) -> list[UUID]:
    return [
        UUID(str(row[0]))
        for row in conn.execute(
            "SELECT DISTINCT t.topic_uuid FROM mirror_partitions mp"
            " JOIN topics t ON t.id = mp.topic_id WHERE mp.state != 'STOPPED'"
        )
    ]


# ---------------------------------------------------------------- failover


def stop_mirror_topics(
    conn: sqlite3.Connection, name: str, topics: Sequence[str], now: int
) -> list[MirrorResult]:
    results: list[MirrorResult] = []
    for topic in topics:
        row = conn.execute(
            "UPDATE mirror_partitions SET state = 'STOPPING', lease_owner = -1,"
            " lease_expiry = 0, updated_at = ? WHERE mirror_name = ? AND state != 'STOPPED'"
            " AND topic_id = (SELECT id FROM topics WHERE name = ?) RETURNING partition",
            (now, name, topic),
        ).fetchall()
        held = conn.execute(
            "SELECT 1 FROM mirror_partitions WHERE mirror_name = ?"
            " AND topic_id = (SELECT id FROM topics WHERE name = ?)",
            (name, topic),
        ).fetchone()
        if not row and held is None:
            results.append(
                MirrorResult(
                    ErrorCode.unknown_topic_or_partition,
                    f"mirror {name!r} does not mirror topic {topic!r}",
                )
            )
        else:
            results.append(MirrorResult(ErrorCode.none))
    alter_mirror(conn, name, (), (), topics)
    return results


def finish_mirror_failover(conn: sqlite3.Connection, now: int) -> list[MirrorPartition]:
    stopping = conn.execute(
        "SELECT mp.topic_id, mp.partition, t.name FROM mirror_partitions mp"
        " JOIN topics t ON t.id = mp.topic_id WHERE mp.state = 'STOPPING'"
        " ORDER BY mp.topic_id, mp.partition"
    ).fetchall()
    done: list[tuple[int, int]] = []
    for topic_id, partition, topic in stopping:
        _truncate(conn, int(topic_id), int(partition), topic, now)
        done.append((int(topic_id), int(partition)))
    if not done:
        return []
    return [p for key in done for p in _select(conn, "mp.topic_id = ? AND mp.partition = ?", key)]


def _truncate(
    conn: sqlite3.Connection, topic_id: int, partition: int, topic: str, now: int
) -> None:
    where = (topic_id, partition)
    high, log_start = conn.execute(
        "SELECT high_watermark, log_start_offset FROM partitions"
        " WHERE topic_id = ? AND partition = ?",
        where,
    ).fetchone()
    firsts = [
        int(f)
        for (f,) in conn.execute(
            "SELECT first_offset FROM mirror_txns WHERE topic_id = ? AND partition = ?", where
        )
    ]
    cut = truncation_point(int(high), firsts, int(log_start))
    per_file = conn.execute(
        "SELECT file_id, SUM(byte_size) FROM batches WHERE topic_id = ? AND partition = ?"
        " AND base_offset >= ? GROUP BY file_id",
        (*where, cut),
    ).fetchall()
    freed = sum(int(size) for _, size in per_file)
    conn.execute(
        "DELETE FROM batches WHERE topic_id = ? AND partition = ? AND base_offset >= ?",
        (*where, cut),
    )
    release_file_bytes(conn, [(f, int(s)) for f, s in per_file if f is not None], now)
    for table, column in (("aborted_txns", "marker_offset"), ("producer_state", "last_offset")):
        conn.execute(
            f"DELETE FROM {table} WHERE topic_id = ? AND partition = ? AND {column} >= ?",
            (*where, cut),
        )
    conn.execute("DELETE FROM mirror_txns WHERE topic_id = ? AND partition = ?", where)
    conn.execute(
        "UPDATE partitions SET high_watermark = ?, byte_size = byte_size - ?"
        " WHERE topic_id = ? AND partition = ?",
        (cut, freed, *where),
    )
    # A synced group offset past the cut would skip the records written there next.
    conn.execute(
        "UPDATE group_offsets SET committed_offset = ? WHERE topic = ? AND partition = ?"
        " AND committed_offset > ?",
        (cut, topic, partition, cut),
    )
    conn.execute(
        "UPDATE mirror_partitions SET state = 'STOPPED', failover_offset = ?, lease_owner = -1,"
        " lease_expiry = 0, updated_at = ? WHERE topic_id = ? AND partition = ?",
        (cut, now, *where),
    )


class SqliteMirrorMethods:
    """The mirroring part of `SqliteBatchCoordinator` (mixed in): each method is one
    transaction on the coordinator's database thread."""

    _run: Callable[..., Awaitable[Any]]

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
