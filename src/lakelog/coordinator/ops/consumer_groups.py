"""KIP-848 consumer group records: one row per group, its document stored whole."""

from __future__ import annotations

from typing import Any

from lakelog.coordinator.engine import Session
from lakelog.coordinator.interface import ConsumerGroupRecord

_COLUMNS = "group_id, state, group_epoch, revision, document, updated_at"


async def save(s: Session, group: ConsumerGroupRecord) -> bool:
    """Upsert unless the stored revision is as new: two saves of one group that finish
    out of order (or a former coordinator's late save) never roll the group back."""
    written = await s.fetchall(
        f"INSERT INTO consumer_groups ({_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?)"
        " ON CONFLICT (group_id) DO UPDATE SET state = excluded.state,"
        " group_epoch = excluded.group_epoch, revision = excluded.revision,"
        " document = excluded.document, updated_at = excluded.updated_at"
        " WHERE consumer_groups.revision < excluded.revision RETURNING 1",
        (
            group.group_id,
            group.state,
            group.group_epoch,
            group.revision,
            group.document,
            group.updated_at,
        ),
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
