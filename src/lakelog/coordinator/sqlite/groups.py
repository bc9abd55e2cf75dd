"""Consumer-group storage in SQLite: committed offsets and classic group records.
Each function runs inside a transaction its caller opened. Member metadata and assignments
are opaque bytes, stored as BLOBs so no encoding can mangle them."""

from __future__ import annotations

import sqlite3
from collections import defaultdict
from collections.abc import Sequence
from typing import Any

from lakelog.coordinator.group_rows import (
    GROUP_COLUMNS,
    MEMBER_COLUMNS,
    group_record,
    member_record,
)
from lakelog.coordinator.interface import (
    CommittedOffset,
    GroupMemberRecord,
    GroupRecord,
    OffsetCommit,
)
from lakelog.errors import ErrorCode

EMPTY = "Empty"
"""Kafka's name for a group without members: its offsets may expire."""

_OFFSET_COLUMNS = "topic, partition, committed_offset, leader_epoch, metadata, commit_time"

# -- offsets


def commit_offsets(
    conn: sqlite3.Connection, group_id: str, offsets: Sequence[OffsetCommit], now_ms: int
) -> None:
    conn.executemany(
        f"INSERT INTO group_offsets (group_id, {_OFFSET_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?)"
        " ON CONFLICT (group_id, topic, partition) DO UPDATE SET"
        " committed_offset = excluded.committed_offset, leader_epoch = excluded.leader_epoch,"
        " metadata = excluded.metadata, commit_time = excluded.commit_time",
        [
            (group_id, o.topic, o.partition, o.offset, o.leader_epoch, o.metadata, now_ms)
            for o in offsets
        ],
    )


def fetch_offsets(
    conn: sqlite3.Connection, group_id: str, partitions: Sequence[tuple[str, int]] | None
) -> list[CommittedOffset]:
    if partitions is None:
        rows = conn.execute(
            f"SELECT {_OFFSET_COLUMNS} FROM group_offsets WHERE group_id = ?"
            " ORDER BY topic, partition",
            (group_id,),
        ).fetchall()
        return [CommittedOffset(*row) for row in rows]
    results: list[CommittedOffset] = []
    for topic, partition in partitions:
        row = conn.execute(
            f"SELECT {_OFFSET_COLUMNS} FROM group_offsets"
            " WHERE group_id = ? AND topic = ? AND partition = ?",
            (group_id, topic, partition),
        ).fetchone()
        results.append(
            CommittedOffset(topic, partition, -1) if row is None else CommittedOffset(*row)
        )
    return results


def delete_offsets(
    conn: sqlite3.Connection, group_id: str, partitions: Sequence[tuple[str, int]]
) -> None:
    conn.executemany(
        "DELETE FROM group_offsets WHERE group_id = ? AND topic = ? AND partition = ?",
        [(group_id, topic, partition) for topic, partition in partitions],
    )


def expire_offsets(conn: sqlite3.Connection, committed_before_ms: int) -> int:
    """Only groups nobody is in may lose offsets: a live group's are still in use."""
    cursor = conn.execute(
        "DELETE FROM group_offsets WHERE commit_time < ? AND group_id NOT IN"
        " (SELECT group_id FROM groups WHERE state != ?)",
        (committed_before_ms, EMPTY),
    )
    return cursor.rowcount


# -- group records


def save_group(conn: sqlite3.Connection, group: GroupRecord) -> None:
    """Rewrite the record whole: the members' rows go with the old record (cascade)."""
    conn.execute("DELETE FROM groups WHERE group_id = ?", (group.group_id,))
    conn.execute(
        f"INSERT INTO groups ({GROUP_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?)",
        (
            group.group_id,
            group.state,
            group.protocol_type,
            group.protocol,
            group.generation,
            group.leader,
            group.updated_at,
        ),
    )
    conn.executemany(
        f"INSERT INTO group_members ({MEMBER_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
        [
            (
                group.group_id,
                position,
                m.member_id,
                m.group_instance_id,
                m.client_id,
                m.client_host,
                m.rebalance_timeout_ms,
                m.session_timeout_ms,
                bytes(m.assignment),
            )
            for position, m in enumerate(group.members)
        ],
    )
    conn.executemany(
        "INSERT INTO group_member_protocols (group_id, member_position, position, name,"
        " metadata) VALUES (?, ?, ?, ?, ?)",
        [
            (group.group_id, member_position, position, name, bytes(metadata))
            for member_position, m in enumerate(group.members)
            for position, (name, metadata) in enumerate(m.protocols)
        ],
    )


def load_group(conn: sqlite3.Connection, group_id: str) -> GroupRecord | None:
    where, args = "WHERE group_id = ?", (group_id,)
    groups = _load_groups(conn, where, args)
    return groups[0] if groups else None


def list_groups(conn: sqlite3.Connection) -> list[GroupRecord]:
    """Recorded groups and offset-only ones (Empty, no protocol type), by group id."""
    recorded = _load_groups(conn, "", ())
    known = {g.group_id for g in recorded}
    offset_only = [
        GroupRecord(group_id=row[0], state=EMPTY)
        for row in conn.execute("SELECT DISTINCT group_id FROM group_offsets")
        if row[0] not in known
    ]
    return sorted(recorded + offset_only, key=lambda g: g.group_id)


def delete_groups(conn: sqlite3.Connection, group_ids: Sequence[str]) -> list[ErrorCode]:
    results: list[ErrorCode] = []
    for group_id in group_ids:
        records = conn.execute("DELETE FROM groups WHERE group_id = ?", (group_id,)).rowcount
        offsets = conn.execute("DELETE FROM group_offsets WHERE group_id = ?", (group_id,)).rowcount
        results.append(ErrorCode.none if records or offsets else ErrorCode.group_id_not_found)
    return results


def _load_groups(conn: sqlite3.Connection, where: str, args: tuple[Any, ...]) -> list[GroupRecord]:
    """The groups matching `where` (over columns all three tables share), members and
    protocols included, in three queries however many groups there are."""
    protocols: defaultdict[tuple[str, int], list[tuple[str, bytes]]] = defaultdict(list)
    for group_id, member_position, name, metadata in conn.execute(
        "SELECT group_id, member_position, name, metadata FROM group_member_protocols"
        f" {where} ORDER BY group_id, member_position, position",
        args,
    ):
        protocols[(group_id, member_position)].append((name, bytes(metadata)))
    members: defaultdict[str, list[GroupMemberRecord]] = defaultdict(list)
    for row in conn.execute(
        f"SELECT {MEMBER_COLUMNS} FROM group_members {where} ORDER BY group_id, position",
        args,
    ):
        members[row[0]].append(member_record(row, protocols[(row[0], row[1])]))
    rows = conn.execute(
        f"SELECT {GROUP_COLUMNS} FROM groups {where} ORDER BY group_id", args
    ).fetchall()
    return [group_record(row, members[row[0]]) for row in rows]
