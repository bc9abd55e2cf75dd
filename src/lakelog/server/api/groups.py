"""The classic consumer group APIs' membership: JoinGroup, SyncGroup, Heartbeat and
LeaveGroup. Offsets are in `group_offsets`, group admin (ListGroups, DescribeGroups,
DeleteGroups) in `group_admin`, what they share in `group_common`. The state machine is
`lakelog.groups`."""

from __future__ import annotations

import asyncio
import logging
import time
from typing import TYPE_CHECKING, Any

from lakelog.groups import mixed
from lakelog.groups.group import Group, JoinRequest, JoinResult, SyncResult
from lakelog.server.api.context import RequestContext, build
from lakelog.server.api.group_common import (
    HEARTBEAT,
    JOIN_GROUP,
    LEAVE_GROUP,
    NO_THROTTLE,
    SYNC_GROUP,
    client_host,
    group_error,
    has_consumer_group,
)
from lakelog.server.api.registry import handles
from lakelog.server.cluster.outage import log_failure
from lakelog.util.errors import ErrorCode

if TYPE_CHECKING:
    from lakelog.groups.coordinator import GroupCoordinator

log = logging.getLogger(__name__)

# ---------------------------------------------------------------- JoinGroup


@handles(JOIN_GROUP, 0, 9)
async def join_group(ctx: RequestContext, request: Any) -> Any:
    m = ctx.schema

    def answer(result: JoinResult) -> Any:
        return build(
            m.JoinGroupResponse,
            throttle_time=NO_THROTTLE,
            error_code=result.error,
            generation_id=result.generation,
            protocol_type=result.protocol_type,
            protocol_name=result.protocol_name or ("" if ctx.api_version < 7 else None),
            leader=result.leader,
            skip_assignment=result.skip_assignment,
            member_id=result.member_id,
            members=tuple(
                build(
                    m.JoinGroupResponseMember, member_id=mid, group_instance_id=iid, metadata=meta
                )
                for mid, iid, meta in result.members
            ),
        )

    error = await group_error(ctx, request.group_id)
    if error is not None:
        return answer(JoinResult(error, member_id=request.member_id))
    groups = ctx.broker.groups
    session_ms = int(request.session_timeout.total_seconds() * 1000)
    rebalance = getattr(request, "rebalance_timeout", None)
    rebalance_ms = int(rebalance.total_seconds() * 1000) if rebalance else session_ms
    config = groups.config
    if not config.min_session_timeout_ms <= session_ms <= config.max_session_timeout_ms:
        return answer(JoinResult(ErrorCode.invalid_session_timeout, member_id=request.member_id))
    join = JoinRequest(
        member_id=request.member_id,
        group_instance_id=getattr(request, "group_instance_id", None),
        client_id=ctx.client_id or "",
        client_host=client_host(ctx),
        session_timeout_ms=session_ms,
        rebalance_timeout_ms=rebalance_ms,
        protocol_type=request.protocol_type,
        protocols=[(p.name, bytes(p.metadata)) for p in request.protocols],
        require_known_member_id=ctx.api_version >= 4,
        supports_skip_assignment=ctx.api_version >= 9,
    )
    group = None
    if not await has_consumer_group(ctx, request.group_id):
        group = await groups.get(request.group_id, create=True)
    if group is None or groups.consumer.has_members(request.group_id):
        # A classic member of an upgraded group (`lakelog.groups.mixed`); checked again
        # after the last wait, so a join never parks in a group that was just upgraded.
        joined = await groups.consumer.classic_call(
            request.group_id, lambda g, topics, now: mixed.join(g, join, topics, now)
        )
        return answer(joined or JoinResult(ErrorCode.coordinator_not_available))
    outcome = group.join(join, time.monotonic())
    groups.save_later(group)
    if isinstance(outcome, asyncio.Future):
        outcome = await outcome
        groups.save_later(group)
    return answer(outcome)


# ---------------------------------------------------------------- SyncGroup


@handles(SYNC_GROUP, 0, 5)
async def sync_group(ctx: RequestContext, request: Any) -> Any:
    m = ctx.schema

    def answer(result: SyncResult) -> Any:
        return build(
            m.SyncGroupResponse,
            throttle_time=NO_THROTTLE,
            error_code=result.error,
            protocol_type=result.protocol_type,
            protocol_name=result.protocol_name,
            assignment=result.assignment,
        )

    error = await group_error(ctx, request.group_id)
    if error is not None:
        return answer(SyncResult(error))
    groups = ctx.broker.groups
    if await has_consumer_group(ctx, request.group_id):
        synced = await groups.consumer.classic_call(
            request.group_id,
            lambda g, topics, now: mixed.sync(
                g,
                request.member_id,
                request.generation_id,
                {meta.topic_id: name for name, meta in topics.items()},
            ),
        )
        return answer(synced or SyncResult(ErrorCode.coordinator_not_available))
    group = await groups.get(request.group_id, create=False)
    if group is None:
        return answer(SyncResult(ErrorCode.unknown_member_id))
    was_pending = group.assignment_pending
    outcome = group.sync(
        request.generation_id,
        request.member_id,
        getattr(request, "group_instance_id", None),
        getattr(request, "protocol_type", None),
        getattr(request, "protocol_name", None),
        [(a.member_id, bytes(a.assignment)) for a in request.assignments],
        time.monotonic(),
    )
    if group.assignment_pending and not was_pending:
        # The leader's assignment: durable before anyone starts consuming it, then every
        # member of the generation is answered at once (`Group.assignment_saved`).
        await _save_assignment(groups, group)
    if isinstance(outcome, asyncio.Future):
        outcome = await outcome
    return answer(outcome)


async def _save_assignment(groups: GroupCoordinator, group: Group) -> None:
    """Save the leader's assignment, then answer the generation's SyncGroups: all with
    their assignments, or all with COORDINATOR_NOT_AVAILABLE (and a new rebalance) when
    it could not be saved, as Kafka answers a failed group metadata append."""
    generation = group.generation
    error = ErrorCode.coordinator_not_available
    try:
        await groups.save(group)
        error = ErrorCode.none
    except Exception:
        log_failure(log, "saving the assignment of group %s failed", group.group_id)
    finally:
        group.assignment_saved(generation, error, time.monotonic())
        groups.save_later(group)


# ---------------------------------------------------------------- Heartbeat, LeaveGroup


@handles(HEARTBEAT, 0, 4)
async def heartbeat(ctx: RequestContext, request: Any) -> Any:
    m = ctx.schema
    error = await group_error(ctx, request.group_id)
    if error is None and await has_consumer_group(ctx, request.group_id):
        error = await ctx.broker.groups.consumer.classic_call(
            request.group_id,
            lambda g, topics, now: mixed.heartbeat(
                g, request.member_id, request.generation_id, now
            ),
        )
        error = ErrorCode.coordinator_not_available if error is None else error
    elif error is None:
        group = await ctx.broker.groups.get(request.group_id, create=False)
        error = (
            ErrorCode.unknown_member_id
            if group is None
            else group.heartbeat(
                request.generation_id,
                request.member_id,
                getattr(request, "group_instance_id", None),
                time.monotonic(),
            )
        )
    return build(m.HeartbeatResponse, throttle_time=NO_THROTTLE, error_code=error)


@handles(LEAVE_GROUP, 0, 5)
async def leave_group(ctx: RequestContext, request: Any) -> Any:
    m = ctx.schema
    if ctx.api_version >= 3:
        leaving = [(x.member_id, x.group_instance_id) for x in request.members]
    else:
        leaving = [(request.member_id, None)]
    error = await group_error(ctx, request.group_id)
    results: list[ErrorCode] = []
    groups = ctx.broker.groups
    via_mixed = error is None and await has_consumer_group(ctx, request.group_id)
    group = None
    if error is None and not via_mixed:
        group = await groups.get(request.group_id, create=False)
        via_mixed = groups.consumer.has_members(request.group_id)  # upgraded meanwhile
    if via_mixed:
        left = await ctx.broker.groups.consumer.classic_call(
            request.group_id,
            lambda g, topics, now: [mixed.leave(g, mid, iid) for mid, iid in leaving],
        )
        results = left or [ErrorCode.coordinator_not_available] * len(leaving)
        if ctx.api_version < 3:
            error = results[0]
    elif error is None:
        now = time.monotonic()
        for member_id, instance_id in leaving:
            results.append(
                ErrorCode.unknown_member_id
                if group is None
                else group.leave(member_id, instance_id, now)
            )
        if group is not None:
            groups.save_later(group)
        if ctx.api_version < 3:
            error = results[0]
    return build(
        m.LeaveGroupResponse,
        throttle_time=NO_THROTTLE,
        error_code=error or ErrorCode.none,
        members=tuple(
            build(m.MemberResponse, member_id=mid, group_instance_id=iid, error_code=e)
            for (mid, iid), e in zip(leaving, results, strict=False)
        )
        if ctx.api_version >= 3
        else (),
    )
