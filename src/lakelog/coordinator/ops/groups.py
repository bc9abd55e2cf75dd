"""Consumer-group storage: committed offsets and classic group records. Member metadata
and assignments are opaque bytes (BLOB, BYTEA), so no encoding can mangle them."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from typing import Any

from lakelog.coordinator.engine import Session
from lakelog.coordinator.group_rows import (
    GROUP_COLUMNS,
    MEMBER_COLUMNS,
    group_record,
    member_record,
)
from lakelog.coordinator.group_types import (
    CommittedOffset,
    GroupMemberRecord,
    GroupRecord,
    OffsetCommit,
)
from lakelog.coordinator.offsets_topic_records import (
    OffsetsTopicRecord,
    group_metadata_key,
    group_metadata_value,
    offset_commit_records,
    offset_tombstones,
    partition_for,
)
from lakelog.coordinator.ops import offsets_topic
from lakelog.coordinator.ops.rows import now_ms
from lakelog.util.errors import ErrorCode

EMPTY = "Empty"
"""Kafka's name for a group without members: its offsets may expire."""

_OFFSET_COLUMNS = "topic, partition, committed_offset, leader_epoch, metadata, commit_time"
_KEY_COLUMNS = (("t", "text"), ("p", "int"))

# -- offsets


async def commit_offsets(
    s: Session, group_id: str, offsets: Sequence[OffsetCommit], now_ms: int
) -> None:
    await write_offsets(s, [(group_id, o) for o in offsets], now_ms)


_WRITTEN_OFFSETS = (
    ("g", "text"),
    ("t", "text"),
    ("p", "int"),
    ("o", "bigint"),
    ("e", "int"),
    ("m", "text"),
)


async def write_offsets(
    s: Session, offsets: Sequence[tuple[str, OffsetCommit]], now_ms: int
) -> None:
    """Store (replace) committed offsets of any number of groups in one statement. A
    partition given twice keeps its later offset, as in Kafka (one statement may not
    update a row twice); rows are written in (group, topic, partition) order, so two
    writers lock shared rows in the same order and never deadlock."""
    latest: dict[tuple[str, str, int], OffsetCommit] = {}
    for group_id, o in offsets:
        latest[(group_id, o.topic, o.partition)] = o
    if not latest:
        return
    rows = [
        (group_id, topic, partition, o.offset, o.leader_epoch, o.metadata)
        for (group_id, topic, partition), o in sorted(latest.items(), key=lambda kv: kv[0])
    ]
    keys, params = s.dialect.keyset("k", _WRITTEN_OFFSETS, rows)
    # WHERE true: SQLite needs it to parse ON CONFLICT after INSERT ... SELECT.
    await s.execute(
        f"INSERT INTO group_offsets (group_id, {_OFFSET_COLUMNS})"
        f" SELECT k.g, k.t, k.p, k.o, k.e, k.m, ? FROM {keys} WHERE true"
        " ON CONFLICT (group_id, topic, partition) DO UPDATE SET"
        " committed_offset = excluded.committed_offset, leader_epoch = excluded.leader_epoch,"
        " metadata = excluded.metadata, commit_time = excluded.commit_time",
        [now_ms, *params],
    )
    # The records in the order sent: a repeated partition's last commit is the last record.
    records = [
        record
        for group_id, o in offsets
        for record in offset_commit_records(
            group_id, [(o.topic, o.partition, o.offset, o.leader_epoch, o.metadata)], now_ms
        )
    ]
    await offsets_topic.append(s, records)


async def fetch_offsets(
    s: Session, group_id: str, partitions: Sequence[tuple[str, int]] | None
) -> list[CommittedOffset]:
    if partitions is None:
        rows = await s.fetchall(
            f"SELECT {_OFFSET_COLUMNS} FROM group_offsets WHERE group_id = ?"
            " ORDER BY topic, partition",
            (group_id,),
        )
        return [CommittedOffset(*row) for row in rows]
    keys, params = s.dialect.keyset("k", _KEY_COLUMNS, partitions, ordinality="i")
    rows = await s.fetchall(
        f"SELECT k.i, {', '.join('o.' + c for c in _OFFSET_COLUMNS.split(', '))} FROM {keys}"
        " JOIN group_offsets o ON o.group_id = ? AND o.topic = k.t AND o.partition = k.p",
        [*params, group_id],
    )
    found = {row[0]: CommittedOffset(*row[1:]) for row in rows}
    return [
        found.get(i, CommittedOffset(topic, partition, -1))
        for i, (topic, partition) in enumerate(partitions, start=1)
    ]


async def delete_offsets(s: Session, group_id: str, partitions: Sequence[tuple[str, int]]) -> None:
    keys, params = s.dialect.keyset("k", _KEY_COLUMNS, partitions)
    gone = await s.fetchall(
        "DELETE FROM group_offsets WHERE group_id = ?"
        f" AND (topic, partition) IN (SELECT k.t, k.p FROM {keys}) RETURNING topic, partition",
        [group_id, *params],
    )
    await offsets_topic.append(
        s, offset_tombstones([(group_id, t, p) for t, p in sorted(gone)], now_ms())
    )


async def expire_offsets(s: Session, committed_before_ms: int) -> int:
    """Only groups nobody is in may lose offsets: a live group's are still in use."""
    gone = await s.fetchall(
        "DELETE FROM group_offsets WHERE commit_time < ? AND group_id NOT IN"
        " (SELECT group_id FROM groups WHERE state != ?) AND group_id NOT IN"
        " (SELECT group_id FROM consumer_groups WHERE state != ?)"
        " RETURNING group_id, topic, partition",
        (committed_before_ms, EMPTY, EMPTY),
    )
    await offsets_topic.append(s, offset_tombstones(sorted(gone), now_ms()))
    return len(gone)


# -- group records


async def save_group(s: Session, group: GroupRecord) -> None:
    """Rewrite the record whole. The upsert locks the group's row first, so concurrent
    saves of one group take turns instead of colliding on its members' keys."""
    await s.execute(
        f"INSERT INTO groups ({GROUP_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?)"
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
    await s.execute("DELETE FROM group_members WHERE group_id = ?", (group.group_id,))
    members = list(enumerate(group.members))
    await s.executemany(
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
            for position, m in members
        ],
    )
    await s.executemany(
        "INSERT INTO group_member_protocols (group_id, member_position, position, name,"
        " metadata) VALUES (?, ?, ?, ?, ?)",
        [
            (group.group_id, member_position, position, name, bytes(metadata))
            for member_position, m in members
            for position, (name, metadata) in enumerate(m.protocols)
        ],
    )
    await offsets_topic.append(
        s,
        [
            OffsetsTopicRecord(
                partition_for(group.group_id),
                group_metadata_key(group.group_id),
                group_metadata_value(group),
                group.updated_at,
            )
        ],
    )


async def load_group(s: Session, group_id: str) -> GroupRecord | None:
    groups = await _load_groups(s, "WHERE group_id = ?", (group_id,))
    return groups[0] if groups else None


async def list_groups(s: Session) -> list[GroupRecord]:
    """Recorded groups and offset-only ones (Empty, no protocol type), by group id."""
    recorded = await _load_groups(s, "", ())
    known = {g.group_id for g in recorded}
    offset_only = [
        GroupRecord(group_id=row[0], state=EMPTY)
        for row in await s.fetchall("SELECT DISTINCT group_id FROM group_offsets")
        if row[0] not in known
    ]
    return sorted(recorded + offset_only, key=lambda g: g.group_id)


async def delete_groups(s: Session, group_ids: Sequence[str]) -> list[ErrorCode]:
    """A deleted group's configs go with it (as in Kafka), but configs alone do not make a
    group: a group with nothing else is still GROUP_ID_NOT_FOUND. A share group's record
    and share-partition states go too. `__consumer_offsets` gets a tombstone per offset
    and one for a classic group's metadata."""
    for group_id in group_ids:
        await s.execute("DELETE FROM group_configs WHERE group_id = ?", (group_id,))
    sent = [
        (
            await s.send("DELETE FROM groups WHERE group_id = ? RETURNING 1", (group_id,)),
            await s.send("DELETE FROM consumer_groups WHERE group_id = ? RETURNING 1", (group_id,)),
            await s.send(
                "DELETE FROM group_offsets WHERE group_id = ? RETURNING topic, partition",
                (group_id,),
            ),
            await s.send("DELETE FROM share_groups WHERE group_id = ? RETURNING 1", (group_id,)),
            await s.send(
                "DELETE FROM share_partitions WHERE group_id = ? RETURNING 1", (group_id,)
            ),
        )
        for group_id in group_ids
    ]
    results: list[ErrorCode] = []
    now = now_ms()
    tombstones: list[OffsetsTopicRecord] = []
    for group_id, pending in zip(group_ids, sent, strict=True):
        found = [await p.fetchall() for p in pending]
        results.append(ErrorCode.none if any(found) else ErrorCode.group_id_not_found)
        offsets = sorted((group_id, t, p) for t, p in found[2])
        tombstones += offset_tombstones(offsets, now)
        if found[0]:
            tombstones.append(
                OffsetsTopicRecord(partition_for(group_id), group_metadata_key(group_id), None, now)
            )
    await offsets_topic.append(s, tombstones)
    return results


async def _load_groups(s: Session, where: str, args: tuple[Any, ...]) -> list[GroupRecord]:
    """The groups matching `where` (over columns all three tables share), members and
    protocols included, in three queries (one round trip) however many groups there are."""
    protocol_rows = await s.send(
        "SELECT group_id, member_position, name, metadata FROM group_member_protocols"
        f" {where} ORDER BY group_id, member_position, position",
        args,
    )
    member_rows = await s.send(
        f"SELECT {MEMBER_COLUMNS} FROM group_members {where} ORDER BY group_id, position",
        args,
    )
    group_rows = await s.send(f"SELECT {GROUP_COLUMNS} FROM groups {where} ORDER BY group_id", args)
    protocols: defaultdict[tuple[str, int], list[tuple[str, bytes]]] = defaultdict(list)
    for group_id, member_position, name, metadata in await protocol_rows.fetchall():
        protocols[(group_id, member_position)].append((name, bytes(metadata)))
    members: defaultdict[str, list[GroupMemberRecord]] = defaultdict(list)
    for row in await member_rows.fetchall():
        members[row[0]].append(member_record(row, protocols[(row[0], row[1])]))
    return [group_record(row, members[row[0]]) for row in await group_rows.fetchall()]
