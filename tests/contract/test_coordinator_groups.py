"""Consumer groups: committed offsets (keyed by topic name) and classic group records."""

from __future__ import annotations

import dataclasses

from contract_support import OpenInstance

from lakelog.coordinator import BatchCoordinator
from lakelog.coordinator.group_types import (
    CommittedOffset,
    GroupMemberRecord,
    GroupRecord,
    OffsetCommit,
)
from lakelog.util.errors import ErrorCode

AWKWARD = bytes(range(256)) + b"\x00\x00\xff\xfe\xc3\x28"
"""Every byte value, zeros, and sequences that are not UTF-8."""


def member(member_id: str, metadata: bytes = AWKWARD, assignment: bytes = b"") -> GroupMemberRecord:
    return GroupMemberRecord(
        member_id=member_id,
        group_instance_id=None,
        client_id=f"client-{member_id}",
        client_host="/10.0.0.1",
        rebalance_timeout_ms=300_000,
        session_timeout_ms=45_000,
        protocols=(("cooperative-sticky", metadata), ("range", b"\x00")),
        assignment=assignment,
    )


def stable(group_id: str, generation: int = 1) -> GroupRecord:
    return GroupRecord(
        group_id=group_id,
        state="Stable",
        protocol_type="consumer",
        protocol="cooperative-sticky",
        generation=generation,
        leader="m-1",
        members=(
            member("m-1", assignment=b"\x00\x01\x80\xff" * 3),
            dataclasses.replace(member("m-2", metadata=b""), group_instance_id="static-2"),
        ),
        updated_at=1_700_000_000_000,
    )


async def test_commit_and_fetch(coordinator: BatchCoordinator) -> None:
    await coordinator.commit_offsets(
        "g",
        [
            OffsetCommit("b", 1, 20, leader_epoch=3, metadata="meta"),
            OffsetCommit("a", 0, 5),
            OffsetCommit("b", 0, 10, metadata=""),
        ],
        now_ms=1_000,
    )
    fetched = await coordinator.fetch_offsets("g", [("b", 1), ("a", 7), ("a", 0), ("zz", 0)])
    assert fetched == [
        CommittedOffset("b", 1, 20, leader_epoch=3, metadata="meta", commit_time=1_000),
        CommittedOffset("a", 7, -1),
        CommittedOffset("a", 0, 5, commit_time=1_000),
        CommittedOffset("zz", 0, -1),
    ]
    assert await coordinator.fetch_offsets("g", None) == [
        CommittedOffset("a", 0, 5, commit_time=1_000),
        CommittedOffset("b", 0, 10, metadata="", commit_time=1_000),
        CommittedOffset("b", 1, 20, leader_epoch=3, metadata="meta", commit_time=1_000),
    ]
    # Groups are separate; an unknown group has nothing.
    assert await coordinator.fetch_offsets("other", None) == []
    assert await coordinator.fetch_offsets("other", [("a", 0)]) == [CommittedOffset("a", 0, -1)]


async def test_recommit_replaces(coordinator: BatchCoordinator) -> None:
    await coordinator.commit_offsets("g", [OffsetCommit("t", 0, 5, 1, "old")], now_ms=1_000)
    await coordinator.commit_offsets("g", [OffsetCommit("t", 0, 3)], now_ms=2_000)
    assert await coordinator.fetch_offsets("g", None) == [
        CommittedOffset("t", 0, 3, -1, None, 2_000)
    ]


async def test_delete_offsets(coordinator: BatchCoordinator) -> None:
    commits = [OffsetCommit("t", p, 10 * p) for p in range(3)]
    await coordinator.commit_offsets("g", commits, now_ms=1)
    await coordinator.commit_offsets("h", commits, now_ms=1)
    await coordinator.delete_offsets("g", [("t", 0), ("t", 2), ("missing", 0)])
    assert [o.partition for o in await coordinator.fetch_offsets("g", None)] == [1]
    assert len(await coordinator.fetch_offsets("h", None)) == 3


async def test_save_and_load_round_trip(coordinator: BatchCoordinator) -> None:
    assert await coordinator.load_group("g") is None
    group = stable("g")
    await coordinator.save_group(group)
    assert await coordinator.load_group("g") == group
    empty = GroupRecord("e", "Empty", protocol_type="consumer", generation=4)
    await coordinator.save_group(empty)
    assert await coordinator.load_group("e") == empty
    assert await coordinator.load_group("g") == group


async def test_save_replaces(coordinator: BatchCoordinator) -> None:
    await coordinator.save_group(stable("g", generation=1))
    smaller = dataclasses.replace(
        stable("g", generation=2),
        state="CompletingRebalance",
        leader="m-3",
        members=(member("m-3", metadata=b"\xff"),),
    )
    await coordinator.save_group(smaller)
    assert await coordinator.load_group("g") == smaller
    await coordinator.save_group(GroupRecord("g", "Empty", "consumer", generation=3))
    assert await coordinator.load_group("g") == GroupRecord("g", "Empty", "consumer", generation=3)


async def test_list_groups(coordinator: BatchCoordinator) -> None:
    assert await coordinator.list_groups() == []
    await coordinator.save_group(stable("b"))
    await coordinator.commit_offsets("b", [OffsetCommit("t", 0, 1)], now_ms=1)
    await coordinator.commit_offsets("a", [OffsetCommit("t", 0, 1)], now_ms=1)
    await coordinator.save_group(GroupRecord("c", "Empty", "consumer", generation=2))
    assert await coordinator.list_groups() == [
        GroupRecord("a", "Empty", protocol_type=None),
        stable("b"),
        GroupRecord("c", "Empty", "consumer", generation=2),
    ]


async def test_delete_groups(coordinator: BatchCoordinator) -> None:
    await coordinator.save_group(stable("both"))
    await coordinator.commit_offsets("both", [OffsetCommit("t", 0, 1)], now_ms=1)
    await coordinator.commit_offsets("offsets-only", [OffsetCommit("t", 0, 1)], now_ms=1)
    await coordinator.save_group(GroupRecord("record-only", "Empty"))
    await coordinator.save_group(stable("kept"))
    await coordinator.commit_offsets("kept", [OffsetCommit("t", 0, 1)], now_ms=1)

    results = await coordinator.delete_groups(["both", "unknown", "offsets-only", "record-only"])
    assert results == [
        ErrorCode.none,
        ErrorCode.group_id_not_found,
        ErrorCode.none,
        ErrorCode.none,
    ]
    assert [g.group_id for g in await coordinator.list_groups()] == ["kept"]
    assert await coordinator.load_group("both") is None
    assert await coordinator.fetch_offsets("both", None) == []
    assert len(await coordinator.fetch_offsets("kept", None)) == 1
    assert await coordinator.delete_groups(["both"]) == [ErrorCode.group_id_not_found]


async def test_expire_offsets(coordinator: BatchCoordinator) -> None:
    old, new = 1_000, 5_000
    for group_id in ["no-record", "empty", "stable"]:
        await coordinator.commit_offsets(group_id, [OffsetCommit("t", 0, 1)], now_ms=old)
        await coordinator.commit_offsets(group_id, [OffsetCommit("t", 1, 1)], now_ms=new)
    await coordinator.save_group(GroupRecord("empty", "Empty", "consumer", generation=3))
    await coordinator.save_group(stable("stable"))

    assert await coordinator.expire_offsets(committed_before_ms=old) == 0  # strictly before
    assert await coordinator.expire_offsets(committed_before_ms=new) == 2
    for group_id in ["no-record", "empty"]:
        assert [o.partition for o in await coordinator.fetch_offsets(group_id, None)] == [1]
    assert len(await coordinator.fetch_offsets("stable", None)) == 2
    # The Empty group keeps its record; the record-less one lives on through its offset.
    assert [g.group_id for g in await coordinator.list_groups()] == ["empty", "no-record", "stable"]

    assert await coordinator.expire_offsets(committed_before_ms=new + 1) == 2
    assert [g.group_id for g in await coordinator.list_groups()] == ["empty", "stable"]


async def test_state_survives_reopen(open_instance: OpenInstance) -> None:
    first = await open_instance()
    await first.save_group(stable("g"))
    await first.commit_offsets("g", [OffsetCommit("t", 0, 42, 7, "m")], now_ms=9)
    await first.close()

    again = await open_instance()
    assert await again.load_group("g") == stable("g")
    assert await again.fetch_offsets("g", [("t", 0)]) == [CommittedOffset("t", 0, 42, 7, "m", 9)]


async def test_instances_share_groups(open_instance: OpenInstance) -> None:
    a, b = await open_instance(), await open_instance()
    await a.commit_offsets("g", [OffsetCommit("t", 0, 1)], now_ms=1)
    await a.save_group(stable("g", generation=5))
    assert await b.fetch_offsets("g", [("t", 0)]) == [CommittedOffset("t", 0, 1, commit_time=1)]
    assert await b.load_group("g") == stable("g", generation=5)
    await b.commit_offsets("g", [OffsetCommit("t", 0, 2)], now_ms=2)
    [committed] = await a.fetch_offsets("g", [("t", 0)])
    assert committed.offset == 2


async def test_deleting_a_topic_deletes_its_committed_offsets(
    coordinator: BatchCoordinator,
) -> None:
    from lakelog.coordinator.group_types import OffsetCommit
    from lakelog.coordinator.topic_types import CreateTopicRequest

    await coordinator.create_topics([CreateTopicRequest("doomed", 1, 1)])
    await coordinator.commit_offsets(
        "g", [OffsetCommit("doomed", 0, 5), OffsetCommit("kept", 0, 7)], 1
    )
    await coordinator.delete_topics(["doomed"])
    found = await coordinator.fetch_offsets("g", None)
    assert [(c.topic, c.offset) for c in found] == [("kept", 7)]
