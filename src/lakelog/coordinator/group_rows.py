"""Group records from database rows, for every coordinator: both schemas store groups in
the same columns, so one reader serves SQLite and PostgreSQL."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from lakelog.coordinator.group_types import GroupMemberRecord, GroupRecord

GROUP_COLUMNS = "group_id, state, protocol_type, protocol, generation, leader, updated_at"
MEMBER_COLUMNS = (
    "group_id, position, member_id, group_instance_id, client_id, client_host,"
    " rebalance_timeout_ms, session_timeout_ms, assignment"
)


def member_record(
    row: tuple[Any, ...], protocols: Iterable[tuple[str, bytes]]
) -> GroupMemberRecord:
    """A member from a MEMBER_COLUMNS row and its (name, metadata) protocols."""
    return GroupMemberRecord(
        member_id=row[2],
        group_instance_id=row[3],
        client_id=row[4],
        client_host=row[5],
        rebalance_timeout_ms=row[6],
        session_timeout_ms=row[7],
        protocols=tuple(protocols),
        assignment=bytes(row[8]),
    )


def group_record(row: tuple[Any, ...], members: Sequence[GroupMemberRecord]) -> GroupRecord:
    """A group from a GROUP_COLUMNS row and its members."""
    return GroupRecord(
        group_id=row[0],
        state=row[1],
        protocol_type=row[2],
        protocol=row[3],
        generation=row[4],
        leader=row[5],
        members=tuple(members),
        updated_at=row[6],
    )
