"""What both coordinators' mirroring code shares: the state column values, the SQL that
reads a mirrored partition with its log bounds, and pure helpers over rows (no database
calls, so the PostgreSQL module can use them too)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any
from uuid import UUID

from lakelog.coordinator.mirror_types import (
    MirrorDefinition,
    MirrorPartition,
    MirrorPartitionUpdate,
    MirrorResult,
    MirrorState,
)
from lakelog.util.errors import ErrorCode

ACTIVE = ("PREPARING", "MIRRORING")
ACTIVE_SQL = "('PREPARING', 'MIRRORING')"
MIRROR_COLUMNS = "name, source_bootstrap, source_configs, topics, patterns, created_at"

PARTITION_COLUMNS = (
    "mp.mirror_name, t.name, t.topic_uuid, mp.partition, mp.state, p.high_watermark,"
    " p.log_start_offset, mp.source_epoch, mp.lease_owner, mp.lease_expiry, mp.reason,"
    " mp.source_end_offset, mp.source_high_watermark, mp.lag_ms, mp.failover_offset,"
    " mp.updated_at,"
    " (SELECT MIN(first_offset) FROM mirror_txns x"
    "   WHERE x.topic_id = mp.topic_id AND x.partition = mp.partition),"
    " (SELECT MIN(first_offset) FROM txn_partitions x"
    "   WHERE x.topic_id = mp.topic_id AND x.partition = mp.partition AND first_offset >= 0)"
)
PARTITION_FROM = (
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


def definition_row(row: Sequence[Any]) -> MirrorDefinition:
    return MirrorDefinition(
        name=row[0],
        source_bootstrap=row[1],
        source_configs=json.loads(row[2]),
        topics=tuple(json.loads(row[3])),
        patterns=tuple(json.loads(row[4])),
        created_at=int(row[5]),
    )


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


def update_assignments(u: MirrorPartitionUpdate, mark: str = "?") -> tuple[str, list[Any]]:
    """The SET list and arguments of an update (placeholder `mark`)."""
    pairs: list[tuple[str, Any]] = []
    if u.state is not None:
        pairs.append(("state", str(u.state)))
        pairs.append(("reason", u.reason))
        if u.state not in ACTIVE:
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
