"""The broker's compaction leases: one broker at a time compacts a partition, and the
partition's cleaned offset (how far its log is compacted) lives with the lease, so the
next pass, on any broker, maps only the keys written since."""

from __future__ import annotations

from uuid import UUID

from lakelog.coordinator.engine import Session
from lakelog.coordinator.pipeline_types import CompactionLease


async def claim_compaction(
    s: Session, topic_id: UUID, partition: int, broker_id: int, now: int, ttl_ms: int
) -> CompactionLease | None:
    """Take (free or expired) or renew the partition's lease; its state while
    `broker_id` holds it, None when another broker holds a live lease or the topic is gone."""
    row = await s.fetchone(
        "SELECT id FROM topics WHERE topic_uuid = ?", (s.dialect.uuid(topic_id),)
    )
    if row is None:
        return None
    internal = int(row[0])
    await s.execute(
        "INSERT INTO compaction_state (topic_id, partition) VALUES (?, ?)"
        " ON CONFLICT (topic_id, partition) DO NOTHING",
        (internal, partition),
    )
    held = await s.fetchone(
        "UPDATE compaction_state SET lease_owner = ?, lease_expiry = ?"
        " WHERE topic_id = ? AND partition = ?"
        " AND (lease_owner = ? OR lease_owner = -1 OR lease_expiry < ?)"
        " RETURNING cleaned_offset, tombstones_due",
        (broker_id, now + ttl_ms, internal, partition, broker_id, now),
    )
    return None if held is None else CompactionLease(int(held[0]), int(held[1]))


async def release_compaction(
    s: Session, topic_id: UUID, partition: int, broker_id: int, state: CompactionLease
) -> bool:
    """Give the lease back and record the pass's state (the cleaned offset is never
    lowered), only while
    `broker_id` still holds it: a broker whose lease expired mid-pass records nothing."""
    row = await s.fetchone(
        "UPDATE compaction_state SET lease_owner = -1, lease_expiry = 0,"
        " cleaned_offset = CASE WHEN cleaned_offset > ? THEN cleaned_offset ELSE ? END,"
        " tombstones_due = ?"
        " WHERE topic_id = (SELECT id FROM topics WHERE topic_uuid = ?) AND partition = ?"
        " AND lease_owner = ? RETURNING partition",
        (
            state.cleaned_offset,
            state.cleaned_offset,
            state.tombstones_due_ms,
            s.dialect.uuid(topic_id),
            partition,
            broker_id,
        ),
    )
    return row is not None
