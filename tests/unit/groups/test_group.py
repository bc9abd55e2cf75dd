"""The classic group state machine, driven directly with a fake clock value."""

from __future__ import annotations

import asyncio

import pytest

from lakelog.groups.group import Group, GroupConfig, GroupState, JoinRequest, JoinResult
from lakelog.util.errors import ErrorCode

CONFIG = GroupConfig(
    initial_rebalance_delay_s=0.0, min_session_timeout_ms=1000, max_session_timeout_ms=60_000
)


def _join(
    member_id: str = "",
    instance: str | None = None,
    protocols=None,
    session_ms: int = 10_000,
    protocol_type: str = "consumer",
) -> JoinRequest:
    return JoinRequest(
        member_id,
        instance,
        "client",
        "/127.0.0.1",
        session_ms,
        session_ms,
        protocol_type,
        protocols or [("range", b"meta")],
        require_known_member_id=True,
    )


async def _member(group: Group, now: float = 0.0, **kw) -> str:
    """A new member through the KIP-394 handshake; returns its id (join left pending)."""
    first = group.join(_join(**kw), now)
    if isinstance(first, JoinResult) and first.error == ErrorCode.member_id_required:
        return first.member_id
    raise AssertionError(first)


async def _stable_group(*instances: str | None) -> tuple[Group, list[str]]:
    """Members join within the initial delay, so one rebalance takes them all."""
    group = Group("g", GroupConfig(0.1, 1000, 60_000))
    futures = []
    for instance in instances:
        if instance is None:
            member_id = await _member(group)
            futures.append(group.join(_join(member_id), 0.0))
        else:
            futures.append(group.join(_join(instance=instance), 0.0))
    group.tick(0.2)
    results = [f if isinstance(f, JoinResult) else await f for f in futures]
    ids = [r.member_id for r in results]
    leader = results[0].leader
    generation = results[0].generation
    sync = group.sync(
        generation, leader, None, "consumer", "range", [(m, m.encode()) for m in ids], 0.0
    )
    assert not isinstance(sync, JoinResult)
    group.assignment_saved(generation, ErrorCode.none, 0.0)  # what the coordinator does
    return group, ids


async def _rebalanced_pair() -> tuple[Group, str, str, int]:
    """A Stable one-member group that a second member joined: both have their JoinGroup
    answers of the new generation (first is the leader), neither has synced."""
    group, (first,) = await _stable_group(None)
    second = await _member(group, 1.0)
    f2 = group.join(_join(second), 1.0)
    f1 = group.join(_join(first), 1.0)
    r1, r2 = await f1, await f2
    assert r1.leader == first and r2.generation == r1.generation
    assert group.state == GroupState.COMPLETING_REBALANCE
    return group, first, second, r1.generation


async def test_sync_answers_go_out_together_once_the_assignment_is_saved() -> None:
    """Kafka's order: the follower that synced first and the leader are answered in one
    step, only when the leader's assignment is durable; until then the group is still
    CompletingRebalance (heartbeats fine, a restart comes back Stable)."""
    group, first, second, generation = await _rebalanced_pair()
    follower = group.sync(generation, second, None, None, None, [], 1.1)
    assignments = [(first, b"p0"), (second, b"p1")]
    leader = group.sync(generation, first, None, None, None, assignments, 1.2)
    assert isinstance(follower, asyncio.Future) and isinstance(leader, asyncio.Future)
    await asyncio.sleep(0)
    assert not follower.done() and not leader.done()
    assert group.state == GroupState.COMPLETING_REBALANCE and group.assignment_pending
    assert group.heartbeat(generation, second, None, 1.3) == ErrorCode.none
    assert group.record(0).state == GroupState.STABLE  # what the save writes
    late = group.sync(generation, second, None, None, None, [], 1.3)  # a retried sync
    group.assignment_saved(generation, ErrorCode.none, 1.4)
    assert leader.done() and late.done()  # type: ignore[union-attr]
    assert (await leader).assignment == b"p0" and (await late).assignment == b"p1"  # type: ignore[misc]
    assert group.state == GroupState.STABLE


async def test_unsaved_assignment_fails_every_sync_and_rebalances() -> None:
    group, first, second, generation = await _rebalanced_pair()
    follower = group.sync(generation, second, None, None, None, [], 1.1)
    leader = group.sync(generation, first, None, None, None, [(first, b"p0")], 1.2)
    group.assignment_saved(generation, ErrorCode.coordinator_not_available, 1.3)
    for pending in (follower, leader):
        assert (await pending).error == ErrorCode.coordinator_not_available  # type: ignore[misc]
    assert group.state == GroupState.PREPARING_REBALANCE and not group.assignment_pending


async def test_a_join_during_the_save_wins_over_the_old_assignment() -> None:
    group, first, _, generation = await _rebalanced_pair()
    leader = group.sync(generation, first, None, None, None, [(first, b"p0")], 1.1)
    third = await _member(group, 1.2)
    group.join(_join(third), 1.2)
    assert (await leader).error == ErrorCode.rebalance_in_progress  # type: ignore[misc]
    group.assignment_saved(generation, ErrorCode.none, 1.3)  # too late: nothing happens
    assert group.state == GroupState.PREPARING_REBALANCE


async def test_kip394_then_single_member_generation() -> None:
    group, (member,) = await _stable_group(None)
    assert group.state == GroupState.STABLE and group.generation == 1
    assert group.leader == member
    synced = group.sync(1, member, None, None, None, [], 0.0)
    assert synced.assignment == member.encode()
    assert group.heartbeat(1, member, None, 1.0) == ErrorCode.none


async def test_second_member_triggers_rebalance_and_both_get_new_generation() -> None:
    group, (first,) = await _stable_group(None)
    second = await _member(group, 1.0)
    f2 = group.join(_join(second), 1.0)
    assert group.state == GroupState.PREPARING_REBALANCE
    assert group.heartbeat(1, first, None, 1.0) == ErrorCode.rebalance_in_progress
    f1 = group.join(_join(first), 1.0)  # the old member rejoins: the join completes
    r1, r2 = await f1, await f2
    assert r1.generation == r2.generation == 2
    assert r1.leader == first and {m[0] for m in r1.members} == {first, second}
    assert r2.members == ()


async def test_members_that_do_not_rejoin_are_dropped_at_rebalance_timeout() -> None:
    group, (first,) = await _stable_group(None)
    second = await _member(group, 1.0)
    f2 = group.join(_join(second), 1.0)
    group.tick(1.0 + 10.5)  # past the rebalance timeout (10 s)
    result = await f2
    assert result.error == ErrorCode.none and first not in group.members
    assert group.generation == 2 and result.leader == second


async def test_errors_for_unknown_member_and_stale_generation() -> None:
    group, (member,) = await _stable_group(None)
    assert group.heartbeat(1, "nobody", None, 0.0) == ErrorCode.unknown_member_id
    assert group.heartbeat(0, member, None, 0.0) == ErrorCode.illegal_generation
    assert group.sync(7, member, None, None, None, [], 0.0).error == ErrorCode.illegal_generation
    assert group.check_commit(0, member, None) == ErrorCode.illegal_generation
    assert group.check_commit(1, "nobody", None) == ErrorCode.unknown_member_id
    assert group.check_commit(-1, "", None) == ErrorCode.unknown_member_id  # group active
    assert group.check_commit(-1, "own-id", None) == ErrorCode.unknown_member_id
    result = group.join(_join(protocol_type="other"), 0.0)
    assert isinstance(result, JoinResult)
    assert result.error == ErrorCode.inconsistent_group_protocol


async def test_session_expiry_and_leave_empty_the_group() -> None:
    group, (a, b) = await _stable_group(None, None)
    generation = group.generation
    group.heartbeat(generation, b, None, 5.0)
    group.tick(10.5)  # a's session (10 s from 0) expired, b heartbeated at 5
    assert a not in group.members and group.state == GroupState.PREPARING_REBALANCE
    rejoin = group.join(_join(b), 10.6)
    assert (await rejoin).generation == generation + 1
    assert group.leave(b, None, 11.0) == ErrorCode.none
    assert group.state == GroupState.EMPTY and group.is_empty
    assert group.check_commit(-1, "", None) == ErrorCode.none
    # A client that names its own member id (KIP-1082) outside the group: a simple commit.
    assert group.check_commit(-1, "own-id", None) == ErrorCode.none


async def test_static_member_restart_keeps_assignment_without_rebalance() -> None:
    group, (static_leader, static_other) = await _stable_group("i-1", "i-2")
    generation = group.generation
    back = group.join(_join(instance="i-2"), 3.0)  # restarted: no member id
    assert isinstance(back, JoinResult) and back.error == ErrorCode.none
    assert back.generation == generation and group.state == GroupState.STABLE
    assert back.member_id != static_other
    synced = group.sync(generation, back.member_id, "i-2", None, None, [], 3.0)
    assert synced.assignment == static_other.encode()
    # The old incarnation is fenced.
    assert group.heartbeat(generation, static_other, "i-2", 3.0) == ErrorCode.fenced_instance_id
    assert group.heartbeat(generation, static_leader, "i-1", 3.0) == ErrorCode.none


async def test_restore_from_record_resumes_generation() -> None:
    group, ids = await _stable_group(None, None)
    record = group.record(123)
    restored = Group.restore(record, CONFIG, now=100.0)
    assert restored.state == GroupState.STABLE and restored.generation == group.generation
    assert set(restored.members) == set(ids)
    assert restored.heartbeat(group.generation, ids[0], None, 101.0) == ErrorCode.none
    synced = restored.sync(group.generation, ids[1], None, None, None, [], 101.0)
    assert synced.assignment == ids[1].encode()


@pytest.mark.parametrize("delay", [0.5])
async def test_initial_rebalance_delay_waits_for_more_members(delay: float) -> None:
    group = Group("g", GroupConfig(delay, 1000, 60_000))
    a = await _member(group, 0.0)
    fa = group.join(_join(a), 0.0)
    group.tick(0.2)
    assert not fa.done()  # still inside the delay
    b = await _member(group, 0.3)
    fb = group.join(_join(b), 0.3)
    group.tick(0.9)
    ra, rb = await fa, await fb
    assert ra.generation == rb.generation == 1 and len(ra.members) == 2


async def test_static_leader_restart_does_not_rebalance() -> None:
    group, (leader, _other) = await _stable_group("i-1", "i-2")
    assert group.leader == leader
    generation = group.generation
    back = group.join(_join(instance="i-1"), 3.0)
    assert isinstance(back, JoinResult) and back.error == ErrorCode.none
    assert group.state == GroupState.STABLE and back.generation == generation
    assert back.leader == leader  # the old id: the new incarnation acts as a follower
    assert group.leader == back.member_id
    synced = group.sync(generation, back.member_id, "i-1", None, None, [], 3.0)
    assert synced.assignment == leader.encode()


async def test_group_max_size_refuses_a_new_member_only() -> None:
    """group.max.size counts members and members still in the KIP-394 handshake; a member
    already in the group rejoins, a static member replaces itself."""
    group = Group("g", GroupConfig(0.0, 1000, 60_000, max_size=2))
    first = await _member(group)
    static = group.join(_join(instance="static-1"), 0.0)  # static: no handshake
    assert not isinstance(static, JoinResult), static
    refused = group.join(_join(), 0.0)
    assert isinstance(refused, JoinResult)
    assert refused.error == ErrorCode.group_max_size_reached
    joined = group.join(_join(first), 0.0)
    assert not isinstance(joined, JoinResult) or joined.error != ErrorCode.group_max_size_reached
    again = group.join(_join(instance="static-1"), 0.0)
    assert not isinstance(again, JoinResult) or again.error != ErrorCode.group_max_size_reached
