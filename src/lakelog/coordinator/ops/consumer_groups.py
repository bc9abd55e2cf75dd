"""KIP-848 consumer group records: one row per group, its document stored whole."""

from __future__ import annotations

from typing import Any

from lakelog.coordinator.engine import Session
from lakelog.coordinator.group_types import ConsumerGroupRecord

_COLUMNS = "group_id, state, group_epoch, revision, document, updated_at"


async def save(s: Session, group: ConsumerGroupRecord, expected: int) -> bool:
    """Compare and set on the revision: a save lands only on the state its writer last
    saw, so a former coordinator's late save, or two brokers that both think they own
    the group for a moment, never overwrite each other's progress."""
    values = (
        group.group_id,
        group.state,
        group.group_epoch,
        group.revision,
        group.document,
        group.updated_at,
    )
    if expected == 0:
        written = await s.fetchall(
            f"INSERT INTO consumer_groups ({_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?)"
            " ON CONFLICT (group_id) DO NOTHING RETURNING 1",
            values,
        )
    else:
        written = await s.fetchall(
            "UPDATE consumer_groups SET state = ?, group_epoch = ?, revision = ?,"
            " document = ?, updated_at = ? WHERE group_id = ? AND revision = ? RETURNING 1",
            (*values[1:], group.group_id, expected),
        )
    return bool(written)


async def load(s: Session, group_id: str) -> ConsumerGroupRecord | None:
    row = await s.fetchone(
        f"SELECT {_COLUMNS} FROM consumer_groups WHERE group_id = ?", (group_id,)
    )
    return None if row is None else _record(row)


async def list_all(s: Session) -> list[ConsumerGroupRecord]:
    rows = await s.fetchall(f"SELECT {_COLUMNS} FROM consumer_groups ORDER BY group_id")
    return [_record(row) for row in rows]


def _record(row: tuple[Any, ...]) -> ConsumerGroupRecord:
    return ConsumerGroupRecord(*row)
