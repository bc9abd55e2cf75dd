"""ShareGroupHeartbeat (76) and ShareGroupDescribe (77): share group membership, served
by the group's coordinator broker (`GroupCoordinator.owns`, as for the other groups)."""

from __future__ import annotations

import datetime
import uuid
from collections.abc import Mapping
from typing import Any

from lakelog.groups.share.groups import Assignment, Heartbeat, HeartbeatAnswer, ShareGroup
from lakelog.security.acl import Operation
from lakelog.server.api import authz
from lakelog.server.api.consumer_groups import asked_operations, undescribed
from lakelog.server.api.context import RequestContext, build
from lakelog.server.api.registry import handles
from lakelog.util.errors import ErrorCode

SHARE_GROUP_HEARTBEAT, SHARE_GROUP_DESCRIBE = 76, 77
NO_THROTTLE = datetime.timedelta(0)
ASSIGNOR = "simple"


def _by_topic(assignment: Assignment) -> dict[uuid.UUID, list[int]]:
    out: dict[uuid.UUID, list[int]] = {}
    for topic_id, partition in sorted(assignment):
        out.setdefault(topic_id, []).append(partition)
    return out


@handles(SHARE_GROUP_HEARTBEAT, 1, 1)
async def share_group_heartbeat(ctx: RequestContext, request: Any) -> Any:
    m = ctx.schema
    answer: HeartbeatAnswer
    if not request.group_id:
        answer = HeartbeatAnswer(ErrorCode.invalid_request, "GroupId can't be empty.")
    elif not request.member_id:
        answer = HeartbeatAnswer(ErrorCode.invalid_request, "MemberId can't be empty.")
    elif request.member_epoch < -1:
        answer = HeartbeatAnswer(ErrorCode.invalid_request, "MemberEpoch is invalid.")
    elif not authz.group_allowed(ctx, request.group_id, Operation.READ):
        answer = HeartbeatAnswer(ErrorCode.group_authorization_failed)
    elif request.subscribed_topic_names and len(
        authz.topics_allowed(ctx, request.subscribed_topic_names, Operation.DESCRIBE)
    ) < len(set(request.subscribed_topic_names)):
        answer = HeartbeatAnswer(ErrorCode.topic_authorization_failed)
    elif not await ctx.broker.groups.owns(request.group_id):
        answer = HeartbeatAnswer(ErrorCode.not_coordinator)
    else:
        host = "/" + ctx.peer.rsplit(":", 1)[0] if ctx.peer else ""
        names = request.subscribed_topic_names
        answer = await ctx.broker.share.heartbeat(
            request.group_id,
            Heartbeat(
                member_id=request.member_id,
                member_epoch=request.member_epoch,
                subscribed=None if names is None else tuple(names),
                rack_id=request.rack_id,
                client_id=ctx.client_id or "",
                client_host=host,
            ),
        )
    ok = answer.error == ErrorCode.none
    assignment = None
    if ok and answer.assignment is not None:
        assignment = build(
            m.Assignment,
            topic_partitions=tuple(
                build(m.TopicPartitions, topic_id=topic_id, partitions=tuple(parts))
                for topic_id, parts in _by_topic(answer.assignment).items()
            ),
        )
    interval = 0
    if ok:
        config = await ctx.broker.group_configs.effective(request.group_id)
        interval = config.share_heartbeat_interval_ms
    return build(
        m.ShareGroupHeartbeatResponse,
        throttle_time=NO_THROTTLE,
        error_code=answer.error,
        error_message=answer.message,
        member_id=answer.member_id if ok else None,
        member_epoch=answer.member_epoch if ok else 0,
        heartbeat_interval=datetime.timedelta(milliseconds=interval),
        assignment=assignment,
    )


@handles(SHARE_GROUP_DESCRIBE, 1, 1)
async def share_group_describe(ctx: RequestContext, request: Any) -> Any:
    m = ctx.schema
    names = {t.topic_id: t.name for t in await ctx.broker.topics.all()}
    described = []
    for group_id in dict.fromkeys(request.group_ids):
        error: ErrorCode | None = None
        group: ShareGroup | None = None
        if not group_id:
            error = ErrorCode.invalid_group_id
        elif not authz.group_allowed(ctx, group_id, Operation.DESCRIBE):
            error = ErrorCode.group_authorization_failed
        elif not await ctx.broker.groups.owns(group_id):
            error = ErrorCode.not_coordinator
        else:
            group = ctx.broker.share.groups.get(group_id)
            if group is None and await ctx.broker.share.is_share_group(group_id):
                group = ShareGroup(group_id)
            if group is None:
                error = ErrorCode.group_id_not_found
            else:
                config = await ctx.broker.group_configs.effective(group_id)
                ctx.broker.share.groups.expire(group, config.share_session_timeout_ms)
        if group is None:
            assert error is not None
            described.append(undescribed(m, group_id, error, f"Group {group_id} not found."))
            continue
        described.append(_describe(m, group, names, asked_operations(ctx, request, group_id)))
    return build(m.ShareGroupDescribeResponse, throttle_time=NO_THROTTLE, groups=tuple(described))


def _describe(m: Any, group: ShareGroup, names: Mapping[uuid.UUID, str], operations: int) -> Any:
    members = tuple(
        build(
            m.Member,
            member_id=member.member_id,
            rack_id=member.rack_id,
            member_epoch=member.member_epoch,
            client_id=member.client_id,
            client_host=member.client_host,
            subscribed_topic_names=member.subscribed,
            assignment=build(
                m.Assignment,
                topic_partitions=tuple(
                    build(
                        m.TopicPartitions,
                        topic_id=topic_id,
                        topic_name=names.get(topic_id, ""),
                        partitions=tuple(parts),
                    )
                    for topic_id, parts in _by_topic(member.assignment).items()
                ),
            ),
        )
        for member in group.members.values()
    )
    return build(
        m.DescribedGroup,
        error_code=ErrorCode.none,
        group_id=group.group_id,
        group_state=group.state,
        group_epoch=group.group_epoch,
        assignment_epoch=group.group_epoch,
        assignor_name=ASSIGNOR,
        members=members,
        authorized_operations=operations,
    )
