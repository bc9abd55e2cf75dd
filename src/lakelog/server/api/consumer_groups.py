"""The KIP-848 consumer group APIs: ConsumerGroupHeartbeat (68) and ConsumerGroupDescribe
(69). The state machine is `lakelog.groups.consumer_group`; placement is the classic
groups' (`owner_of` the group id over the live brokers)."""

from __future__ import annotations

import datetime
import uuid
from collections.abc import Mapping
from typing import Any

from lakelog.groups import consumer_protocol
from lakelog.groups.assignors import Assignment
from lakelog.groups.consumer_group import ConsumerGroup, HeartbeatRequest, HeartbeatResult
from lakelog.security.acl import Operation, ResourceType
from lakelog.server.api import authz
from lakelog.server.api.context import RequestContext, build
from lakelog.server.api.registry import handles
from lakelog.util.errors import ErrorCode

CONSUMER_GROUP_HEARTBEAT, CONSUMER_GROUP_DESCRIBE = 68, 69
NO_THROTTLE = datetime.timedelta(0)
UNKNOWN_AUTHORIZED_OPERATIONS = -2147483648
CLASSIC_MEMBER, CONSUMER_MEMBER = 0, 1
"""ConsumerGroupDescribe's member_type: which protocol the member speaks."""


def _ms(value: datetime.timedelta | None) -> int:
    return -1 if value is None else round(value.total_seconds() * 1000)


def _client_host(ctx: RequestContext) -> str:
    return "/" + ctx.peer.rsplit(":", 1)[0] if ctx.peer else ""


async def _precheck(ctx: RequestContext, request: Any) -> HeartbeatResult | None:
    """Errors a heartbeat gets before it reaches its group: as Kafka, READ on the group,
    then DESCRIBE on every topic it subscribes to by name."""
    if not authz.group_allowed(ctx, request.group_id, Operation.READ):
        return HeartbeatResult(ErrorCode.group_authorization_failed)
    names = request.subscribed_topic_names or ()
    hidden = set(names) - authz.topics_allowed(ctx, names, Operation.DESCRIBE)
    if hidden:
        return HeartbeatResult(
            ErrorCode.topic_authorization_failed,
            message=f"Unauthorized topics: {', '.join(sorted(hidden)[:10])}",
        )
    if not request.group_id:
        return HeartbeatResult(ErrorCode.invalid_request, message="GroupId can't be empty")
    if ctx.api_version >= 1 and not request.member_id:
        return HeartbeatResult(ErrorCode.invalid_request, message="MemberId can't be empty")
    groups = ctx.broker.groups
    if not await groups.owns(request.group_id):
        return HeartbeatResult(ErrorCode.not_coordinator)
    return None


def undescribed(m: Any, group_id: str, error: ErrorCode, not_found: str) -> Any:
    """A ConsumerGroupDescribe/ShareGroupDescribe entry for a group not described: its
    error (`not_found` the message of GROUP_ID_NOT_FOUND), an empty state when refused."""
    return build(
        m.DescribedGroup,
        error_code=error,
        error_message=not_found if error == ErrorCode.group_id_not_found else None,
        group_id=group_id,
        group_state="" if error == ErrorCode.group_authorization_failed else "Dead",
        group_epoch=-1,
        assignment_epoch=-1,
        assignor_name="",
        members=(),
        authorized_operations=UNKNOWN_AUTHORIZED_OPERATIONS,
    )


def asked_operations(ctx: RequestContext, request: Any, group_id: str) -> int:
    """KIP-430: the caller's operations on the group when the request asks for them."""
    if not request.include_authorized_operations:
        return UNKNOWN_AUTHORIZED_OPERATIONS
    return authz.operations(ctx, ResourceType.GROUP, group_id)


@handles(CONSUMER_GROUP_HEARTBEAT, 0, 1)
async def consumer_group_heartbeat(ctx: RequestContext, request: Any) -> Any:
    m = ctx.schema
    consumer = ctx.broker.groups.consumer
    result = await _precheck(ctx, request)
    if result is None:
        owned = request.topic_partitions
        heartbeat = HeartbeatRequest(
            member_id=request.member_id,
            member_epoch=request.member_epoch,
            instance_id=request.instance_id,
            rack_id=request.rack_id,
            rebalance_timeout_ms=_ms(request.rebalance_timeout),
            subscribed_topic_names=None
            if request.subscribed_topic_names is None
            else tuple(request.subscribed_topic_names),
            subscribed_topic_regex=getattr(request, "subscribed_topic_regex", None),
            server_assignor=request.server_assignor,
            owned=None
            if owned is None
            else frozenset((t.topic_id, p) for t in owned for p in t.partitions),
            client_id=ctx.client_id or "",
            client_host=_client_host(ctx),
            may_describe=(
                (lambda name: authz.topic_allowed(ctx, name, Operation.DESCRIBE))
                if authz.enabled(ctx)
                else None
            ),
        )
        result = await consumer.heartbeat(request.group_id, heartbeat)
    ok = result.error == ErrorCode.none
    assignment = None
    if ok and result.assignment is not None:
        assignment = build(
            m.Assignment,
            topic_partitions=tuple(
                build(m.TopicPartitions, topic_id=topic_id, partitions=tuple(parts))
                for topic_id, parts in _by_topic(result.assignment).items()
            ),
        )
    return build(
        m.ConsumerGroupHeartbeatResponse,
        throttle_time=NO_THROTTLE,
        error_code=result.error,
        error_message=result.message,
        member_id=result.member_id if ok else None,
        member_epoch=result.member_epoch if ok else 0,
        heartbeat_interval=datetime.timedelta(
            milliseconds=(await consumer.config_for(request.group_id)).heartbeat_interval_ms
            if ok
            else 0
        ),
        assignment=assignment,
    )


def _by_topic(assignment: Assignment) -> dict[uuid.UUID, list[int]]:
    out: dict[uuid.UUID, list[int]] = {}
    for topic_id, partition in sorted(assignment):
        out.setdefault(topic_id, []).append(partition)
    return out


@handles(CONSUMER_GROUP_DESCRIBE, 0, 1)
async def consumer_group_describe(ctx: RequestContext, request: Any) -> Any:
    m = ctx.schema
    groups = ctx.broker.groups
    names = {meta.topic_id: name for name, meta in (await groups.consumer.topics()).items()}
    described = []
    for group_id in dict.fromkeys(request.group_ids):
        error = None
        group = None
        if not authz.group_allowed(ctx, group_id, Operation.DESCRIBE):
            error = ErrorCode.group_authorization_failed
        elif not group_id:
            error = ErrorCode.invalid_group_id
        elif not await groups.owns(group_id):
            error = ErrorCode.not_coordinator
        else:
            group = await consumer_group_of(ctx, group_id)
            if group is None:
                error = ErrorCode.group_id_not_found
        if group is None:
            assert error is not None
            why = f"group {group_id} is not a consumer group"
            described.append(undescribed(m, group_id, error, why))
            continue
        described.append(_describe(m, group, names, asked_operations(ctx, request, group_id)))
    by_id = {d.group_id: d for d in described}
    return build(
        m.ConsumerGroupDescribeResponse,
        throttle_time=NO_THROTTLE,
        groups=tuple(by_id[g] for g in request.group_ids),
    )


def _describe(m: Any, group: ConsumerGroup, names: Mapping[uuid.UUID, str], operations: int) -> Any:
    def assignment(tps: Assignment) -> Any:
        return build(
            m.Assignment,
            topic_partitions=tuple(
                build(
                    m.TopicPartitions,
                    topic_id=topic_id,
                    topic_name=names.get(topic_id, ""),
                    partitions=tuple(parts),
                )
                for topic_id, parts in _by_topic(tps).items()
            ),
        )

    members = tuple(
        build(
            m.Member,
            member_id=member.member_id,
            instance_id=member.instance_id,
            rack_id=member.rack_id,
            member_epoch=member.member_epoch,
            client_id=member.client_id,
            client_host=member.client_host,
            subscribed_topic_names=member.subscribed_names,
            subscribed_topic_regex=member.subscribed_regex,
            assignment=assignment(member.assigned),
            target_assignment=assignment(group.target.get(member.member_id, frozenset())),
            member_type=CLASSIC_MEMBER if member.is_classic else CONSUMER_MEMBER,
        )
        for member in group.members.values()
    )
    return build(
        m.DescribedGroup,
        error_code=ErrorCode.none,
        group_id=group.group_id,
        group_state=group.state,
        group_epoch=group.group_epoch,
        assignment_epoch=group.assignment_epoch,
        assignor_name=group.assignor,
        members=members,
        authorized_operations=operations,
    )


# ---------------------------------------------------------------- offsets by member epoch


async def consumer_group_of(ctx: RequestContext, group_id: str) -> ConsumerGroup | None:
    """The consumer group whose rules an offset request follows: one with members, or an
    empty one when no classic group with members has the id."""
    groups = ctx.broker.groups
    group = await groups.consumer.get(group_id)
    if group is None or not group.is_empty:
        return group
    classic = await groups.get(group_id, create=False)
    return group if classic is None or classic.is_empty else None


async def commit_error(
    ctx: RequestContext, group: ConsumerGroup, request: Any, epoch: int
) -> ErrorCode | None:
    """OffsetCommit to a consumer group: a member commits with its member epoch (v9+)."""
    member = group.members.get(request.member_id)
    if ctx.api_version < 9 and member is not None and not member.is_classic:
        return ErrorCode.unsupported_version
    partitions = set()
    for t in request.topics:
        topic = await ctx.broker.topics.get(t.name)
        if topic is not None:
            partitions.update((topic.topic_id, p.partition_index) for p in t.partitions)
    error = group.check_commit(request.member_id, epoch, partitions)
    return None if error == ErrorCode.none else error


async def fetch_error(
    ctx: RequestContext, group_id: str, member_id: str | None, epoch: int
) -> ErrorCode | None:
    """OffsetFetch v9+ from a KIP-848 member: it must be a current member of the group.
    Without a member id (null, or empty from some clients) nothing is checked."""
    if not member_id:
        return None
    group = await consumer_group_of(ctx, group_id)
    if group is None:
        return None
    error = group.check_fetch(member_id, epoch)
    return None if error == ErrorCode.none else error


async def describe_as_classic(ctx: RequestContext, m: Any, group: ConsumerGroup) -> Any:
    """A DescribeGroups entry for a consumer group: protocol type "consumer", the assignor
    as the protocol, members' subscriptions and partitions in the classic encodings."""
    names = {
        meta.topic_id: name for name, meta in (await ctx.broker.groups.consumer.topics()).items()
    }
    return build(
        m.DescribedGroup,
        error_code=ErrorCode.none,
        group_id=group.group_id,
        group_state=group.state,
        protocol_type="consumer",
        protocol_data=group.assignor,
        members=tuple(
            build(
                m.DescribedGroupMember,
                member_id=member.member_id,
                group_instance_id=member.instance_id,
                client_id=member.client_id,
                client_host=member.client_host,
                member_metadata=consumer_protocol.subscription(group.subscribed_topics(member)),
                member_assignment=consumer_protocol.assignment(member.assigned, names),
            )
            for member in group.members.values()
        ),
        authorized_operations=UNKNOWN_AUTHORIZED_OPERATIONS,
    )
