"""Placeholder until the mirror operations move here (branch i14-mirror): produce's
read-only check."""

from __future__ import annotations

from uuid import UUID

from lakelog.coordinator.engine import Session
from lakelog.coordinator.ops.rows import PartitionRow


async def read_only(
    s: Session, partitions: dict[tuple[UUID, int], PartitionRow]
) -> set[tuple[UUID, int]]:
    """Take the partitions of mirror topics (a row not STOPPED) out of `partitions` and
    return their keys: commit_file answers their batches READ_ONLY_ERROR."""
    topic_rows = sorted({part.topic_id for part in partitions.values()})
    if not topic_rows:
        return set()
    keys, params = s.dialect.keyset("k", (("id", "bigint"),), [(t,) for t in topic_rows])
    rows = await s.fetchall(
        "SELECT topic_id, partition FROM mirror_partitions WHERE state <> 'STOPPED'"
        f" AND topic_id IN (SELECT k.id FROM {keys})",
        params,
    )
    locked = {(int(t), int(p)) for t, p in rows}
    found = {k for k, part in partitions.items() if (part.topic_id, part.partition) in locked}
    for key in found:
        del partitions[key]
    return found
