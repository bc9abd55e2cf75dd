"""Consumer-group storage in PostgreSQL: committed offsets and classic group records.
Each function runs inside a transaction its caller opened. Member metadata and assignments
are opaque bytes, stored as BYTEA so no encoding can mangle them."""

from __future__ import annotations

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
from lakelog.coordinator.postgres.rows import Conn
from lakelog.coordinator.sqlite.groups import EMPTY
from lakelog.errors import ErrorCode

_OFFSET_COLUMNS = "topic, partition, committed_offset, leader_epoch, metadata, commit_time"

# -- offsets


async def commit_offsets(
    conn: Conn, group_id: str, offsets: Sequence[OffsetCommit], now_ms: int
) -> None:
    # Sorted (stably: a repeated partition's last value still wins), so two commits of
    # one group lock its rows in the same order and never deadlock.
    ordered = sorted(offsets, key=lambda o: (o.topic, o.partition))
    if not ordered:
        return
    async with conn.cursor() as cursor:
        await cursor.executemany(
            f"INSERT INTO group_offsets (group_id, {_OFFSET_COLUMNS})"
            " VALUES (%s, %s, %s, %s, %s, %s, %s)"
            " ON CONFLICT (group_id, topic, partition) DO UPDATE SET"
            " committed_offset = excluded.committed_offset,"
            " leader_epoch = excluded.leader_epoch,"
            " metadata = excluded.metadata, commit_time = excluded.commit_time",
            [
                (group_id, o.topic, o.partition, o.offset, o.leader_epoch, o.metadata, now_ms)
                for o in ordered
            ],
        )


async def fetch_offsets(
    conn: Conn, group_id: str, partitions: Sequence[tuple[str, int]] | None
) -> list[CommittedOffset]:
    if partitions is None:
        cursor = await conn.execute(
            f"SELECT {_OFFSET_COLUMNS} FROM group_offsets WHERE group_id = %s"
            " ORDER BY topic, partition",
            (group_id,),
        )
        return [CommittedOffset(*row) for row in await cursor.fetchall()]
    cursor = await conn.execute(
        f"SELECT k.i, {_OFFSET_COLUMNS} FROM unnest(%s::text[], %s::int[])"
        " WITH ORDINALITY AS k (t, p, i)"
        " JOIN group_offsets o ON o.group_id = %s AND o.topic = k.t AND o.partition = k.p",
        ([t for t, _ in partitions], [p for _, p in partitions], group_id),
    )
    found = {row[0]: CommittedOffset(*row[1:]) for row in await cursor.fetchall()}
    return [
        found.get(i, CommittedOffset(topic, partition, -1))
        for i, (topic, partition) in enumerate(partitions, start=1)
    ]


async def delete_offsets(conn: Conn, group_id: str, partitions: Sequence[tuple[str, int]]) -> None:
    await conn.execute(
        "DELETE FROM group_offsets o USING unnest(%s::text[], %s::int[]) AS k (t, p)"
        " WHERE o.group_id = %s AND o.topic = k.t AND o.partition = k.p",
        ([t for t, _ in partitions], [p for _, p in partitions], group_id),
    )


async def expire_offsets(conn: Conn, committed_before_ms: int) -> int:
    """Only groups nobody is in may lose offsets: a live group's are still in use."""
    cursor = await conn.execute(
        "WITH gone AS (DELETE FROM group_offsets WHERE commit_time < %s AND group_id NOT IN"
        " (SELECT group_id FROM groups WHERE state != %s) RETURNING 1)"
        " SELECT COUNT(*) FROM gone",
        (committed_before_ms, EMPTY),
    )
    row = await cursor.fetchone()
    return int(row[0]) if row else 0


# -- group records


async def save_group(conn: Conn, group: GroupRecord) -> None:
    """Rewrite the record whole. The upsert locks the group's row first, so concurrent
    saves of one group take turns instead of colliding on its members' keys."""
    await conn.execute(
        f"INSERT INTO groups ({GROUP_COLUMNS}) VALUES (%s, %s, %s, %s, %s, %s, %s)"
        " ON CONFLICT (group_id) DO UPDATE SET state = excluded.state,"
        " protocol_type = excluded.protocol_type, protocol = excluded.protocol,"
        " generation = excluded.generation, leader = excluded.leader,"
        " updated_at = excluded.updated_at",
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
    # The members' protocols go with them (cascade).
    await conn.execute("DELETE FROM group_members WHERE group_id = %s", (group.group_id,))
    members = list(enumerate(group.members))
    if not members:
        return
    async with conn.cursor() as cursor:
        await cursor.executemany(
            f"INSERT INTO group_members ({MEMBER_COLUMNS})"
            " VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s)",
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
                for position, m in members
            ],
        )
        protocols = [
            (group.group_id, member_position, position, name, bytes(metadata))
            for member_position, m in members
            for position, (name, metadata) in enumerate(m.protocols)
        ]
        if protocols:
            await cursor.executemany(
                "INSERT INTO group_member_protocols (group_id, member_position, position,"
                " name, metadata) VALUES (%s, %s, %s, %s, %s)",
                protocols,
            )


async def load_group(conn: Conn, group_id: str) -> GroupRecord | None:
    groups = await _load_groups(conn, "WHERE group_id = %s", (group_id,))
    return groups[0] if groups else None


async def list_groups(conn: Conn) -> list[GroupRecord]:
    """Recorded groups and offset-only ones (Empty, no protocol type), by group id."""
    recorded = await _load_groups(conn, "", ())
    known = {g.group_id for g in recorded}
    cursor = await conn.execute("SELECT DISTINCT group_id FROM group_offsets")
    offset_only = [
        GroupRecord(group_id=row[0], state=EMPTY)
        for row in await cursor.fetchall()
        if row[0] not in known
    ]
    return sorted(recorded + offset_only, key=lambda g: g.group_id)


async def delete_groups(conn: Conn, group_ids: Sequence[str]) -> list[ErrorCode]:
    results: list[ErrorCode] = []
    for group_id in group_ids:
        cursor = await conn.execute(
            "WITH records AS (DELETE FROM groups WHERE group_id = %s RETURNING 1),"
            " offsets AS (DELETE FROM group_offsets WHERE group_id = %s RETURNING 1)"
            " SELECT (SELECT COUNT(*) FROM records) + (SELECT COUNT(*) FROM offsets)",
            (group_id, group_id),
        )
        row = await cursor.fetchone()
        results.append(ErrorCode.none if row and row[0] else ErrorCode.group_id_not_found)
    return results


async def _load_groups(conn: Conn, where: str, args: tuple[Any, ...]) -> list[GroupRecord]:
    """The groups matching `where` (over columns all three tables share), members and
    protocols included, in three queries however many groups there are."""
    protocols: defaultdict[tuple[str, int], list[tuple[str, bytes]]] = defaultdict(list)
    cursor = await conn.execute(
        "SELECT group_id, member_position, name, metadata FROM group_member_protocols"
        f" {where} ORDER BY group_id, member_position, position",
        args,
    )
    for group_id, member_position, name, metadata in await cursor.fetchall():
        protocols[(group_id, member_position)].append((name, bytes(metadata)))
    members: defaultdict[str, list[GroupMemberRecord]] = defaultdict(list)
    cursor = await conn.execute(
        f"SELECT {MEMBER_COLUMNS} FROM group_members {where} ORDER BY group_id, position",
        args,
    )
    for row in await cursor.fetchall():
        members[row[0]].append(member_record(row, protocols[(row[0], row[1])]))
    cursor = await conn.execute(
        f"SELECT {GROUP_COLUMNS} FROM groups {where} ORDER BY group_id", args
    )
    return [group_record(row, members[row[0]]) for row in await cursor.fetchall()]
