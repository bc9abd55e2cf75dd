"""Offset commits written together (`commit_offset_batch`): each request answered as if
it ran alone, a later commit of a partition wins even within one batch, and a batch large
enough to leave SQLite's VALUES list for its JSON form is written whole."""

from __future__ import annotations

from contract_support import new_topic
from test_coordinator_txn import NOW, init

from lakelog.coordinator import BatchCoordinator
from lakelog.coordinator.group_types import GroupOffsetCommit, OffsetCommit
from lakelog.coordinator.txn_types import TxnOffsetCommitRequest, TxnRef
from lakelog.util.errors import ErrorCode


async def offsets(c: BatchCoordinator, group_id: str, *partitions: int) -> list[int]:
    return [o.offset for o in await c.fetch_offsets(group_id, [("in", p) for p in partitions])]


async def test_a_later_commit_wins_within_one_batch(coordinator: BatchCoordinator) -> None:
    await new_topic(coordinator, name="in", partitions=2)
    answers = await coordinator.commit_offset_batch(
        [
            GroupOffsetCommit("g", [OffsetCommit("in", 0, 10), OffsetCommit("in", 1, 5)]),
            GroupOffsetCommit("h", [OffsetCommit("in", 0, 7, 3, "meta")]),
            GroupOffsetCommit("g", [OffsetCommit("in", 0, 4, 2, "later")]),
        ],
        NOW,
    )
    assert answers == [[ErrorCode.none] * 2, [ErrorCode.none], [ErrorCode.none]]
    assert await offsets(coordinator, "g", 0, 1) == [4, 5]  # lower, but later: it wins
    [g0] = await coordinator.fetch_offsets("g", [("in", 0)])
    assert (g0.leader_epoch, g0.metadata, g0.commit_time) == (2, "later", NOW)
    [h0] = await coordinator.fetch_offsets("h", [("in", 0)])
    assert (h0.offset, h0.leader_epoch, h0.metadata) == (7, 3, "meta")
    # A later batch replaces what an earlier one wrote.
    await coordinator.commit_offset_batch([GroupOffsetCommit("g", [OffsetCommit("in", 1, 9)])], NOW)
    assert await offsets(coordinator, "g", 0, 1) == [4, 9]


async def test_each_txn_commit_is_checked_alone(coordinator: BatchCoordinator) -> None:
    await new_topic(coordinator, name="in", partitions=2)
    ref = await init(coordinator, "tx")
    other = await init(coordinator, "tx2")
    assert await coordinator.add_offsets_to_txn(ref, "g", NOW) == ErrorCode.none
    fenced = TxnRef(ref.transactional_id, ref.producer_id, ref.producer_epoch - 1)
    unknown = TxnRef("nobody", 12345, 0)
    answers = await coordinator.commit_offset_batch(
        [
            TxnOffsetCommitRequest(ref, "g", [OffsetCommit("in", 0, 30), OffsetCommit("in", 1, 1)]),
            GroupOffsetCommit("g", [OffsetCommit("in", 0, 3)]),
            TxnOffsetCommitRequest(fenced, "g", [OffsetCommit("in", 0, 99)]),
            TxnOffsetCommitRequest(other, "g", [OffsetCommit("in", 1, 99)]),  # g not added
            TxnOffsetCommitRequest(unknown, "g", [OffsetCommit("in", 1, 99)]),
            TxnOffsetCommitRequest(ref, "h", [OffsetCommit("in", 1, 99)]),  # h not added
            TxnOffsetCommitRequest(ref, "g", [OffsetCommit("in", 0, 31)]),  # later: wins
        ],
        NOW,
    )
    assert answers == [
        [ErrorCode.none, ErrorCode.none],
        [ErrorCode.none],
        [ErrorCode.producer_fenced],
        [ErrorCode.invalid_txn_state],
        [ErrorCode.invalid_producer_id_mapping],
        [ErrorCode.invalid_txn_state],
        [ErrorCode.none],
    ]
    assert await offsets(coordinator, "g", 0, 1) == [3, -1]  # staged ones wait for the end
    assert await coordinator.pending_txn_offsets("g") == {("in", 0), ("in", 1)}
    assert await coordinator.end_txn(ref, True, NOW) == ErrorCode.none
    assert await offsets(coordinator, "g", 0, 1) == [31, 1]
    assert await coordinator.pending_txn_offsets("h") == set()


async def test_a_large_batch_is_written_whole(coordinator: BatchCoordinator) -> None:
    await new_topic(coordinator, name="in", partitions=1)
    groups = [f"g{i}" for i in range(3000)]
    items = [
        GroupOffsetCommit(g, [OffsetCommit("in", 0, i, -1, "ü" * (i % 3))])
        for i, g in enumerate(groups)
    ]
    items.append(GroupOffsetCommit("g7", [OffsetCommit("in", 0, 1)]))
    answers = await coordinator.commit_offset_batch(items, NOW)
    assert answers == [[ErrorCode.none]] * len(items)
    for i in (0, 1, 2999):
        [o] = await coordinator.fetch_offsets(groups[i], [("in", 0)])
        assert (o.offset, o.metadata) == (i, "ü" * (i % 3))
    assert await offsets(coordinator, "g7", 0) == [1]


async def test_an_empty_batch_writes_nothing(coordinator: BatchCoordinator) -> None:
    assert await coordinator.commit_offset_batch([], NOW) == []
    assert await coordinator.commit_offset_batch([GroupOffsetCommit("g", [])], NOW) == [[]]
    assert await coordinator.fetch_offsets("g", None) == []
