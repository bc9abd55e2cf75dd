"""Mirror definitions (KIP-1279): create, list, alter, delete, and the lease on a mirror's
singleton work. Per-partition rows and leases are in `mirror_partitions`, commits in
`mirror_commit`, failover in `mirror_failover`. The lists of topics, patterns and source
settings are JSON text on both engines."""

from __future__ import annotations

import json
from collections.abc import Sequence

from lakelog.coordinator.engine import Session
from lakelog.coordinator.mirror_rows import MIRROR_COLUMNS, definition_row, merge_lists
from lakelog.coordinator.mirror_types import MirrorDefinition, MirrorResult
from lakelog.util.errors import ErrorCode


def _missing(name: str) -> MirrorResult:
    return MirrorResult(ErrorCode.resource_not_found, f"no mirror {name!r}")


async def create_mirror(s: Session, definition: MirrorDefinition, now: int) -> MirrorResult:
    row = await s.fetchone(
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
    )
    if row is None:
        return MirrorResult(ErrorCode.invalid_request, f"mirror {definition.name!r} exists")
    return MirrorResult(ErrorCode.none)


async def list_mirrors(s: Session, names: Sequence[str] | None) -> list[MirrorDefinition]:
    rows = await s.fetchall(f"SELECT {MIRROR_COLUMNS} FROM mirrors ORDER BY name")
    wanted = None if names is None else set(names)
    return [definition_row(r) for r in rows if wanted is None or r[0] in wanted]


async def delete_mirror(s: Session, name: str) -> MirrorResult:
    """Refused while the mirror still holds partitions (any state but STOPPED)."""
    exists = await s.send("SELECT 1 FROM mirrors WHERE name = ?" + s.dialect.for_update, (name,))
    busy = await s.send(
        "SELECT COUNT(*) FROM mirror_partitions WHERE mirror_name = ? AND state <> 'STOPPED'",
        (name,),
    )
    if await exists.fetchone() is None:
        return _missing(name)
    row = await busy.fetchone()
    held = int(row[0]) if row else 0
    if held:
        return MirrorResult(
            ErrorCode.invalid_request,
            f"mirror {name!r} still holds {held} partitions: remove its topics first",
        )
    await s.execute("DELETE FROM mirrors WHERE name = ?", (name,))
    return MirrorResult(ErrorCode.none)


async def alter_mirror(
    s: Session,
    name: str,
    add_topics: Sequence[str],
    add_patterns: Sequence[str],
    remove_topics: Sequence[str],
) -> MirrorResult:
    row = await s.fetchone(
        "SELECT topics, patterns FROM mirrors WHERE name = ?" + s.dialect.for_update, (name,)
    )
    if row is None:
        return _missing(name)
    topics, patterns = merge_lists(row[0], row[1], add_topics, add_patterns, remove_topics)
    await s.execute(
        "UPDATE mirrors SET topics = ?, patterns = ? WHERE name = ?", (topics, patterns, name)
    )
    return MirrorResult(ErrorCode.none)


async def claim_mirror_task(s: Session, name: str, broker_id: int, now: int, ttl_ms: int) -> bool:
    """Take or renew the lease on the mirror's singleton work (one broker at a time)."""
    row = await s.fetchone(
        "UPDATE mirrors SET task_owner = ?, task_expiry = ? WHERE name = ?"
        " AND (task_owner = ? OR task_owner = -1 OR task_expiry < ?) RETURNING name",
        (broker_id, now + ttl_ms, name, broker_id, now),
    )
    return row is not None
