"""Classic-protocol members inside a KIP-848 consumer group: the online upgrade.

When a `group.protocol=consumer` member joins a Stable classic group of protocol type
"consumer", the group becomes a consumer group (`upgrade`): every classic member keeps its
partitions, at a member epoch equal to the classic generation, and goes on speaking
JoinGroup/SyncGroup/Heartbeat/LeaveGroup, which this module translates:

- Heartbeat answers REBALANCE_IN_PROGRESS while the member has not reached its target, so
  it rejoins;
- JoinGroup is one reconciliation step: the partitions its subscription says it still
  owns (none for an eager client, which gave everything up before rejoining) confirm
  revocations; the answer's generation is the member epoch. The member is never the
  leader: the server assignor decides;
- SyncGroup hands it the partitions it may use now, in the classic encoding.

So classic and consumer members share one assignment under one rule (no partition is
given while another member still owns it), and the group's classic members can be
replaced by consumer members one at a time. The way back (`downgrade`): once the last
consumer-protocol member has left a group that still has classic members and these have
reached the new target, it becomes a classic group again at a generation equal to their
member epoch, each keeping its partitions, and a classic rebalance starts.
No I/O; `ConsumerGroups` drives it.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping

from lakelog.coordinator.group_types import GroupMemberRecord, GroupRecord
from lakelog.groups import consumer_protocol
from lakelog.groups.consumer_group import (
    EMPTY,
    ConsumerGroup,
    ConsumerGroupConfig,
    ConsumerMember,
    TopicMeta,
)
from lakelog.groups.group import (
    Group,
    GroupConfig,
    GroupState,
    JoinRequest,
    JoinResult,
    SyncResult,
)
from lakelog.groups.subscription import subscribed_topics
from lakelog.util.errors import ErrorCode

CONSUMER = "consumer"


def can_upgrade(classic: Group) -> bool:
    """Kafka's precondition, simplified: a Stable group of consumers (not Connect, not
    mid-rebalance, where parked JoinGroup/SyncGroup calls would be lost)."""
    return classic.protocol_type == CONSUMER and classic.state == GroupState.STABLE


def upgrade(
    classic: Group, config: ConsumerGroupConfig, topics: Mapping[str, TopicMeta], now: float
) -> ConsumerGroup:
    """The consumer group a Stable classic group becomes, every member keeping what it
    has: the current assignment is the target at an epoch equal to the generation."""
    group = ConsumerGroup(
        classic.group_id,
        config,
        group_epoch=classic.generation,
        assignment_epoch=classic.generation,
    )
    for m in classic.members.values():
        names = tuple(sorted(subscribed_topics(m.metadata_for(classic.protocol))))
        assigned = _ids(consumer_protocol.assigned_partitions(m.assignment), topics)
        preferred = [(n, md) for n, md in m.protocols if n == classic.protocol]
        member = ConsumerMember(
            m.member_id,
            m.group_instance_id,
            client_id=m.client_id,
            client_host=m.client_host,
            subscribed_names=names,
            rebalance_timeout_ms=m.rebalance_timeout_ms,
            member_epoch=classic.generation,
            previous_epoch=classic.generation,
            assigned=assigned,
            classic_session_ms=m.session_timeout_ms,
            classic_protocols=tuple(preferred + [p for p in m.protocols if p not in preferred]),
            session_deadline=now + m.session_timeout_ms / 1000,
        )
        group.members[m.member_id] = member
        group.target[m.member_id] = assigned
    group._refresh_metadata(topics)
    group._touch()
    return group


def _ids(partitions: list[tuple[str, int]], topics: Mapping[str, TopicMeta]) -> frozenset:
    return frozenset(
        (topics[name].topic_id, p)
        for name, p in partitions
        if name in topics and 0 <= p < topics[name].partitions
    )


def settled(group: ConsumerGroup, member: ConsumerMember) -> bool:
    return (
        member.member_epoch == group.assignment_epoch
        and not member.revoking
        and member.assigned == group.target.get(member.member_id, EMPTY)
    )


def join(
    group: ConsumerGroup, req: JoinRequest, topics: Mapping[str, TopicMeta], now: float
) -> JoinResult:
    if req.protocol_type != CONSUMER or not req.protocols:
        return JoinResult(ErrorCode.inconsistent_group_protocol, member_id=req.member_id)
    member_id = req.member_id
    if not member_id:
        member_id = f"{req.client_id}-{uuid.uuid4()}"
        if req.group_instance_id is None and req.require_known_member_id:
            return JoinResult(ErrorCode.member_id_required, member_id=member_id)
    member = group.members.get(member_id)
    changed = False
    if member is None and req.group_instance_id is not None:
        old = group._by_instance(req.group_instance_id)
        if old is not None:  # a static member back under a new id takes its place
            del group.members[old.member_id]
            group.target[member_id] = group.target.pop(old.member_id, EMPTY)
            old.member_id = member_id
            old.static_left = False
            group.members[member_id] = member = old
            group._touch()
    if member is None:
        member = ConsumerMember(member_id, req.group_instance_id)
        group.members[member_id] = member
        changed = True
    member.client_id, member.client_host = req.client_id, req.client_host
    member.rebalance_timeout_ms = req.rebalance_timeout_ms
    member.classic_session_ms = req.session_timeout_ms
    member.classic_protocols = tuple(req.protocols)
    metadata = req.protocols[0][1]
    names = tuple(sorted(subscribed_topics(metadata)))
    if names != member.subscribed_names:
        member.subscribed_names = names
        changed = True
    member.session_deadline = now + req.session_timeout_ms / 1000
    if group._refresh_metadata(topics):
        changed = True
    if changed:
        group._bump()
    group._touch()
    owned = _ids(consumer_protocol.owned_partitions(metadata), topics)
    group._reconcile(member, owned, now)
    # What it must give up and does not own (an eager client gave everything up before
    # rejoining) is released already: take the next step at once.
    group._reconcile(member, owned, now)
    return JoinResult(
        ErrorCode.none,
        member_id=member_id,
        generation=member.member_epoch,
        protocol_type=CONSUMER,
        protocol_name=req.protocols[0][0],
        leader="",
    )


def sync(
    group: ConsumerGroup, member_id: str, generation: int, names: Mapping[uuid.UUID, str]
) -> SyncResult:
    member = group.members.get(member_id)
    if member is None or not member.is_classic:
        return SyncResult(ErrorCode.unknown_member_id)
    if generation != member.member_epoch:
        return SyncResult(ErrorCode.illegal_generation)
    return SyncResult(
        ErrorCode.none,
        protocol_type=CONSUMER,
        protocol_name=member.classic_protocols[0][0] if member.classic_protocols else None,
        assignment=consumer_protocol.assignment(member.assigned, names),
    )


def heartbeat(group: ConsumerGroup, member_id: str, generation: int, now: float) -> ErrorCode:
    member = group.members.get(member_id)
    if member is None or not member.is_classic:
        return ErrorCode.unknown_member_id
    if generation != member.member_epoch:
        return ErrorCode.illegal_generation
    member.session_deadline = now + member.session_timeout_ms(group.config) / 1000
    return ErrorCode.none if settled(group, member) else ErrorCode.rebalance_in_progress


def leave(group: ConsumerGroup, member_id: str, instance_id: str | None) -> ErrorCode:
    member = group.members.get(member_id) if member_id else None
    if member is None and instance_id is not None:
        member = group._by_instance(instance_id)
    if member is None:
        return ErrorCode.unknown_member_id
    group._remove([member.member_id])
    return ErrorCode.none


def should_downgrade(group: ConsumerGroup) -> bool:
    """Only classic members are left, and all of them have reached the current target,
    so their member epoch is the classic generation they go on with (their commits stay
    valid through the change)."""
    return (
        bool(group.members)
        and group.group_epoch == group.assignment_epoch
        and all(m.is_classic and settled(group, m) for m in group.members.values())
    )


def downgrade(
    group: ConsumerGroup, config: GroupConfig, names: Mapping[uuid.UUID, str], now: float
) -> Group:
    """The classic group the consumer group's classic members continue in, already
    rebalancing; the consumer group is left empty (its epoch kept)."""
    members = list(group.members.values())
    supported = [{n for n, _ in m.classic_protocols} for m in members]
    preferred = [n for n, _ in members[0].classic_protocols]
    protocol = next((n for n in preferred if all(n in s for s in supported)), preferred[0])
    record = GroupRecord(
        group.group_id,
        str(GroupState.STABLE),
        CONSUMER,
        protocol,
        group.group_epoch,
        members[0].member_id,
        tuple(
            GroupMemberRecord(
                m.member_id,
                m.instance_id,
                m.client_id,
                m.client_host,
                m.rebalance_timeout_ms,
                m.classic_session_ms or config.min_session_timeout_ms,
                m.classic_protocols,
                consumer_protocol.assignment(m.owns, names),
            )
            for m in members
        ),
    )
    classic = Group.restore(record, config, now)
    classic.start_rebalance(now)
    group.members.clear()
    group.target.clear()
    group._touch()
    return classic
