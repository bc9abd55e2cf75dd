"""The classic consumer group APIs: membership (JoinGroup, SyncGroup, Heartbeat,
LeaveGroup), offsets (OffsetCommit, OffsetFetch, OffsetDelete) and group admin (ListGroups,
DescribeGroups, DeleteGroups). The state machine is `lakelog.groups`."""

from __future__ import annotations

import asyncio
import dataclasses
import datetime
import time
from dataclasses import dataclass
from typing import Any

from lakelog.coordinator.group_types import OffsetCommit
from lakelog.groups import mixed
from lakelog.groups.group import GroupState, JoinRequest, JoinResult, SyncResult
from lakelog.groups.subscription import subscribed_topics
from lakelog.security.acl import Operation, ResourceType
from lakelog.server.api import authz
from lakelog.server.api.consumer_groups import (
    commit_error,
    consumer_group_of,
    describe_as_classic,
    fetch_error,
)
from lakelog.server.api.context import RequestContext, build
from lakelog.server.api.registry import handles
from lakelog.util.errors import ErrorCode
from lakelog.util.pacing import paced

OFFSET_COMMIT, OFFSET_FETCH, JOIN_GROUP, HEARTBEAT, LEAVE_GROUP, SYNC_GROUP = 8, 9, 11, 12, 13, 14
DESCRIBE_GROUPS, LIST_GROUPS, DELETE_GROUPS, OFFSET_DELETE = 15, 16, 42, 47
NO_THROTTLE = datetime.timedelta(0)
UNKNOWN_AUTHORIZED_OPERATIONS = -2147483648


async def _group_error(
    ctx: RequestContext, group_id: str, operation: Operation = Operation.READ
) -> ErrorCode | None:
    """The error every group request gets before reaching the group, if any: first, as
    Kafka, whether the caller may do `operation` on the group."""
    if not authz.group_allowed(ctx, group_id, operation):
        return ErrorCode.group_authorization_failed
    if not group_id:
        return ErrorCode.invalid_group_id
    if not await ctx.broker.groups.owns(group_id):
        return ErrorCode.not_coordinator
    return None


async def _has_consumer_group(ctx: RequestContext, group_id: str) -> bool:
    """The id is a consumer group with members: classic requests go to `groups.mixed`."""
    group = await ctx.broker.groups.consumer.get(group_id)
    return group is not None and not group.is_empty


def _client_host(ctx: RequestContext) -> str:
    return "/" + ctx.peer.rsplit(":", 1)[0] if ctx.peer else ""


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

    error = await _group_error(ctx, request.group_id)
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
        client_host=_client_host(ctx),
        session_timeout_ms=session_ms,
        rebalance_timeout_ms=rebalance_ms,
        protocol_type=request.protocol_type,
        protocols=[(p.name, bytes(p.metadata)) for p in request.protocols],
        require_known_member_id=ctx.api_version >= 4,
        supports_skip_assignment=ctx.api_version >= 9,
    )
    group = None
    if not await _has_consumer_group(ctx, request.group_id):
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

    error = await _group_error(ctx, request.group_id)
    if error is not None:
        return answer(SyncResult(error))
    groups = ctx.broker.groups
    if await _has_consumer_group(ctx, request.group_id):
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
    was_stable = group.state == GroupState.STABLE
    outcome = group.sync(
        request.generation_id,
        request.member_id,
        getattr(request, "group_instance_id", None),
        getattr(request, "protocol_type", None),
        getattr(request, "protocol_name", None),
        [(a.member_id, bytes(a.assignment)) for a in request.assignments],
        time.monotonic(),
    )
    if group.dirty and not was_stable and group.state == GroupState.STABLE:
        # The generation's assignment is durable before anyone starts consuming it.
        await groups.save(group)
    if isinstance(outcome, asyncio.Future):
        outcome = await outcome
    return answer(outcome)


# ---------------------------------------------------------------- Heartbeat, LeaveGroup


@handles(HEARTBEAT, 0, 4)
async def heartbeat(ctx: RequestContext, request: Any) -> Any:
    m = ctx.schema
    error = await _group_error(ctx, request.group_id)
    if error is None and await _has_consumer_group(ctx, request.group_id):
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
    error = await _group_error(ctx, request.group_id)
    results: list[ErrorCode] = []
    groups = ctx.broker.groups
    via_mixed = error is None and await _has_consumer_group(ctx, request.group_id)
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


# ---------------------------------------------------------------- offsets


@handles(OFFSET_COMMIT, 2, 9)
async def offset_commit(ctx: RequestContext, request: Any) -> Any:
    m = ctx.schema
    broker = ctx.broker
    generation = getattr(request, "generation_id_or_member_epoch", None)
    if generation is None:
        generation = request.generation_id
    error = await _group_error(ctx, request.group_id)
    consumer_group = await consumer_group_of(ctx, request.group_id) if error is None else None
    if consumer_group is not None:
        error = await commit_error(ctx, consumer_group, request, generation)
    elif error is None:
        group = await broker.groups.get(request.group_id, create=False)
        if group is not None:
            error = group.check_commit(
                generation, request.member_id, getattr(request, "group_instance_id", None)
            )
        elif generation >= 0 or request.member_id:
            error = (
                ErrorCode.unknown_member_id if request.member_id else ErrorCode.illegal_generation
            )
    if error == ErrorCode.none:
        error = None
    commits: list[OffsetCommit] = []
    topics = []
    max_metadata = broker.settings.offset_metadata_max_bytes
    for t in request.topics:
        topic = await broker.topics.get(t.name) if error is None else None
        readable = authz.topic_allowed(ctx, t.name, Operation.READ)
        partitions = []
        for p in t.partitions:
            code = error
            metadata = p.committed_metadata or ""  # Kafka stores null as "" (NO_METADATA)
            if code is None:
                if not readable:
                    code = ErrorCode.topic_authorization_failed
                elif topic is None or not 0 <= p.partition_index < topic.num_partitions:
                    code = ErrorCode.unknown_topic_or_partition
                elif metadata is not None and len(metadata.encode()) > max_metadata:
                    code = ErrorCode.offset_metadata_too_large
                else:
                    code = ErrorCode.none
                    commits.append(
                        OffsetCommit(
                            t.name,
                            p.partition_index,
                            p.committed_offset,
                            getattr(p, "committed_leader_epoch", -1),
                            metadata,
                        )
                    )
            partitions.append(
                build(
                    m.OffsetCommitResponsePartition,
                    partition_index=p.partition_index,
                    error_code=code,
                )
            )
        topics.append(build(m.OffsetCommitResponseTopic, name=t.name, partitions=tuple(partitions)))
    if commits:
        await broker.groups.commit_offsets(request.group_id, commits)
    return build(m.OffsetCommitResponse, throttle_time=NO_THROTTLE, topics=tuple(topics))


async def _fetch_group_offsets(
    ctx: RequestContext,
    group_id: str,
    topics: Any,
    require_stable: bool = False,
    member: tuple[str | None, int] = (None, -1),
) -> tuple[ErrorCode, list[tuple[str, list[Any]]]]:
    """(group error, [(topic, [CommittedOffset...])]) for one group. require_stable (v7+,
    KIP-447): partitions with offsets staged by an ongoing transaction answer
    UNSTABLE_OFFSET_COMMIT (offset -1) until it ends; the consumer retries. `member`
    (v9+): the KIP-848 member id and epoch, checked against a consumer group."""
    error = await _group_error(ctx, group_id, Operation.DESCRIBE)
    if error is None:
        error = await fetch_error(ctx, group_id, *member)
    if error is not None:
        return error, []
    asked = None if topics is None else [(t.name, i) for t in topics for i in t.partition_indexes]
    found = await ctx.broker.groups.fetch_offsets(group_id, asked)
    pending = await ctx.broker.coordinator.pending_txn_offsets(group_id) if require_stable else ()
    visible = authz.topics_allowed(ctx, {c.topic for c in found}, Operation.DESCRIBE)
    by_topic: dict[str, list[Any]] = {}
    for c in found:
        if c.topic not in visible:
            if asked is None:
                continue  # all offsets asked for: Kafka leaves such topics out
            c = _Unstable(c.topic, c.partition, error=ErrorCode.topic_authorization_failed)
        elif (c.topic, c.partition) in pending:
            c = _Unstable(c.topic, c.partition)
        by_topic.setdefault(c.topic, []).append(c)
    return ErrorCode.none, list(by_topic.items())


@dataclass(frozen=True, slots=True)
class _Unstable:
    """A partition whose committed offset is withheld: not stable yet (see
    require_stable), or (with its error) of a topic the caller may not describe."""

    topic: str
    partition: int
    offset: int = -1
    leader_epoch: int = -1
    metadata: str = ""
    error: ErrorCode = ErrorCode.unstable_offset_commit


@handles(OFFSET_FETCH, 1, 9)
async def offset_fetch(ctx: RequestContext, request: Any) -> Any:
    m = ctx.schema
    v8 = ctx.api_version >= 8
    group_cls = m.OffsetFetchResponseGroup if v8 else None
    topic_cls = m.OffsetFetchResponseTopics if v8 else m.OffsetFetchResponseTopic
    part_cls = m.OffsetFetchResponsePartitions if v8 else m.OffsetFetchResponsePartition

    def encode(topics: list[tuple[str, list[Any]]]) -> tuple[Any, ...]:
        return tuple(
            build(
                topic_cls,
                name=name,
                partitions=tuple(
                    build(
                        part_cls,
                        partition_index=c.partition,
                        committed_offset=c.offset,
                        committed_leader_epoch=c.leader_epoch,
                        metadata=c.metadata if c.offset >= 0 else "",
                        error_code=getattr(c, "error", ErrorCode.none),
                    )
                    for c in offsets
                ),
            )
            for name, offsets in topics
        )

    if v8:
        groups = []
        for g in request.groups:
            error, topics = await _fetch_group_offsets(
                ctx,
                g.group_id,
                g.topics,
                request.require_stable,
                (getattr(g, "member_id", None), getattr(g, "member_epoch", -1)),
            )
            groups.append(
                build(group_cls, group_id=g.group_id, topics=encode(topics), error_code=error)
            )
        return build(m.OffsetFetchResponse, throttle_time=NO_THROTTLE, groups=tuple(groups))
    error, topics = await _fetch_group_offsets(
        ctx, request.group_id, request.topics, getattr(request, "require_stable", False)
    )
    return build(
        m.OffsetFetchResponse, throttle_time=NO_THROTTLE, topics=encode(topics), error_code=error
    )


@handles(OFFSET_DELETE, 0, 0)
async def offset_delete(ctx: RequestContext, request: Any) -> Any:
    m = ctx.schema
    error = await _group_error(ctx, request.group_id, Operation.DELETE)
    group = None
    consumer_group = None
    if error is None:
        group = await ctx.broker.groups.get(request.group_id, create=False)
        consumer_group = await ctx.broker.groups.consumer.get(request.group_id)
        if (
            group is None
            and consumer_group is None
            and not await ctx.broker.groups.fetch_offsets(request.group_id, None)
        ):
            error = ErrorCode.group_id_not_found
    subscribed: set[str] = set()
    if group is not None and not group.is_empty:
        for member in group.members.values():
            subscribed |= subscribed_topics(member.metadata_for(group.protocol))
    if consumer_group is not None:
        subscribed |= consumer_group.topic_names()
    deleting: list[tuple[str, int]] = []
    topics = []
    for t in request.topics if error is None else ():
        codes = []
        readable = authz.topic_allowed(ctx, t.name, Operation.READ)
        for p in t.partitions:
            if not readable:
                codes.append(ErrorCode.topic_authorization_failed)
            elif t.name in subscribed:
                codes.append(ErrorCode.group_subscribed_to_topic)
            else:
                codes.append(ErrorCode.none)
                deleting.append((t.name, p.partition_index))
        topics.append(
            build(
                m.OffsetDeleteResponseTopic,
                name=t.name,
                partitions=tuple(
                    build(
                        m.OffsetDeleteResponsePartition,
                        partition_index=p.partition_index,
                        error_code=c,
                    )
                    for p, c in zip(t.partitions, codes, strict=True)
                ),
            )
        )
    if deleting:
        await ctx.broker.coordinator.delete_offsets(request.group_id, deleting)
    return build(
        m.OffsetDeleteResponse,
        error_code=error or ErrorCode.none,
        throttle_time=NO_THROTTLE,
        topics=tuple(topics),
    )


# ---------------------------------------------------------------- admin


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


@handles(DESCRIBE_GROUPS, 0, 5)
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
    error = await _group_error(ctx, group_id, Operation.DESCRIBE)
    consumer_group = None if error else await consumer_group_of(ctx, group_id)
    if consumer_group is not None:
        return await describe_as_classic(ctx, m, consumer_group)
    group = None if error else await ctx.broker.groups.get(group_id, create=False)
    if group is None:
        state = "Dead"
        if error == ErrorCode.group_authorization_failed:
            state = ""  # Kafka tells a caller who may not describe the group nothing
        elif error is None and await ctx.broker.groups.fetch_offsets(group_id, None):
            state = "Empty"  # known only by its committed offsets
        return build(
            m.DescribedGroup,
            error_code=error or ErrorCode.none,
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
        error = await _group_error(ctx, group_id, Operation.DELETE)
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
