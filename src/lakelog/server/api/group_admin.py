"""Classic group admin: ListGroups, DescribeGroups and DeleteGroups."""

from __future__ import annotations

import dataclasses
from typing import Any

from lakelog.groups.group import GroupState
from lakelog.security.acl import Operation, ResourceType
from lakelog.server.api import authz
from lakelog.server.api.consumer_groups import (
    consumer_group_of,
    describe_as_classic,
)
from lakelog.server.api.context import RequestContext, build
from lakelog.server.api.group_common import (
    DELETE_GROUPS,
    DESCRIBE_GROUPS,
    LIST_GROUPS,
    NO_THROTTLE,
    UNKNOWN_AUTHORIZED_OPERATIONS,
    group_error,
)
from lakelog.server.api.registry import handles
from lakelog.util.errors import ErrorCode
from lakelog.util.pacing import paced

GROUP_ID_NOT_FOUND_VERSION = 6
"""DescribeGroups v6+ (KIP-1043) answers a group that does not exist GROUP_ID_NOT_FOUND,
with a message, where earlier versions describe it as a Dead group with no error."""


@handles(LIST_GROUPS, 0, 5)
async def list_groups(ctx: RequestContext, request: Any) -> Any:
    m = ctx.schema
    states = {s.lower() for s in getattr(request, "states_filter", ())}
    types = {t.lower() for t in getattr(request, "types_filter", ())}
    groups_coordinator = ctx.broker.groups
    # (protocol type, state, type) per group; a consumer group hides an empty classic
    # record (or bare offsets) of the same id.
    found: dict[str, tuple[str, str, str]] = {}
    for record in await groups_coordinator.list():
        found[record.group_id] = (record.protocol_type or "", record.state, "classic")
    for c in await groups_coordinator.consumer.records():
        if c.group_id not in found or found[c.group_id][1] == "Empty":
            found[c.group_id] = ("consumer", c.state, "consumer")
    for group_id in await ctx.broker.coordinator.list_share_groups():
        share_group = ctx.broker.share.groups.get(group_id)
        found[group_id] = ("share", share_group.state if share_group else "Empty", "share")
    listed = []
    every_group = authz.cluster_allowed(ctx, Operation.DESCRIBE)
    for group_id in sorted(found):
        protocol_type, state, group_type = found[group_id]
        if not await groups_coordinator.owns(group_id):
            continue
        if not every_group and not authz.group_allowed(ctx, group_id, Operation.DESCRIBE):
            continue  # Kafka lists only the groups the caller may describe
        if states and state.lower() not in states:
            continue
        if types and group_type not in types:
            continue
        listed.append(
            build(
                m.ListedGroup,
                group_id=group_id,
                protocol_type=protocol_type,
                group_state=state,
                group_type=group_type,
            )
        )
    return build(
        m.ListGroupsResponse,
        throttle_time=NO_THROTTLE,
        error_code=ErrorCode.none,
        groups=tuple(listed),
    )


@handles(DESCRIBE_GROUPS, 0, 6)
async def describe_groups(ctx: RequestContext, request: Any) -> Any:
    m = ctx.schema
    described = []
    # A group named twice is looked up once (a request may repeat one id thousands of
    # times; each lookup is a coordinator query).
    seen: dict[str, Any] = {}
    async for group_id in paced(request.groups):
        if group_id in seen:
            described.append(seen[group_id])
            continue
        seen[group_id] = await _describe_group(ctx, m, group_id)
        described.append(seen[group_id])
    if getattr(request, "include_authorized_operations", False):
        # KIP-430: with no authorizer every group operation is allowed.
        described = [
            dataclasses.replace(
                g, authorized_operations=authz.operations(ctx, ResourceType.GROUP, g.group_id)
            )
            if g.error_code == ErrorCode.none
            else g
            for g in described
        ]
    return build(m.DescribeGroupsResponse, throttle_time=NO_THROTTLE, groups=tuple(described))


async def _describe_group(ctx: RequestContext, m: Any, group_id: str) -> Any:
    error = await group_error(ctx, group_id, Operation.DESCRIBE)
    consumer_group = None if error else await consumer_group_of(ctx, group_id)
    if consumer_group is not None:
        return await describe_as_classic(ctx, m, consumer_group)
    group = None if error else await ctx.broker.groups.get(group_id, create=False)
    if group is None:
        state = "Dead"
        message = None
        if error == ErrorCode.group_authorization_failed:
            state = ""  # Kafka tells a caller who may not describe the group nothing
        elif error is None and await ctx.broker.groups.fetch_offsets(group_id, None):
            state = "Empty"  # known only by its committed offsets
        elif error is None and ctx.api_version >= GROUP_ID_NOT_FOUND_VERSION:
            error, message = ErrorCode.group_id_not_found, f"Group {group_id} not found."
        return build(
            m.DescribedGroup,
            error_code=error or ErrorCode.none,
            error_message=message,
            group_id=group_id,
            group_state=state,
            protocol_type="",
            protocol_data="",
            members=(),
            authorized_operations=UNKNOWN_AUTHORIZED_OPERATIONS,
        )
    stable = group.state == GroupState.STABLE
    members = tuple(
        build(
            m.DescribedGroupMember,
            member_id=mem.member_id,
            group_instance_id=mem.group_instance_id,
            client_id=mem.client_id,
            client_host=mem.client_host,
            member_metadata=mem.metadata_for(group.protocol) if stable else b"",
            member_assignment=mem.assignment if stable else b"",
        )
        for mem in group.members.values()
    )
    return build(
        m.DescribedGroup,
        error_code=ErrorCode.none,
        group_id=group_id,
        group_state=str(group.state),
        protocol_type=group.protocol_type or "",
        protocol_data=group.protocol or "",
        members=members,
        authorized_operations=UNKNOWN_AUTHORIZED_OPERATIONS,
    )


@handles(DELETE_GROUPS, 0, 2)
async def delete_groups(ctx: RequestContext, request: Any) -> Any:
    m = ctx.schema
    names = list(request.groups_names)
    # Each distinct group once, however often the request names it.
    errors: dict[str, ErrorCode] = {}
    mine = []
    async for group_id in paced(dict.fromkeys(names)):
        error = await group_error(ctx, group_id, Operation.DELETE)
        if error is not None:
            errors[group_id] = error
        else:
            mine.append(group_id)
    results = await ctx.broker.groups.delete(mine) if mine else []
    errors.update(zip(mine, results, strict=True))
    return build(
        m.DeleteGroupsResponse,
        throttle_time=NO_THROTTLE,
        results=tuple(
            [
                build(m.DeletableGroupResult, group_id=g, error_code=errors[g])
                async for g in paced(names)
            ]
        ),
    )
