"""The classic group offset APIs: OffsetCommit, OffsetFetch and OffsetDelete."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

from lakelog.coordinator.group_types import GroupOffsetCommit, OffsetCommit
from lakelog.groups.subscription import subscribed_topics
from lakelog.security.acl import Operation
from lakelog.server.api import authz
from lakelog.server.api.consumer_groups import (
    commit_error,
    consumer_group_of,
    fetch_error,
)
from lakelog.server.api.context import RequestContext, build
from lakelog.server.api.group_common import (
    NO_THROTTLE,
    OFFSET_COMMIT,
    OFFSET_DELETE,
    OFFSET_FETCH,
    group_error,
)
from lakelog.server.api.registry import handles
from lakelog.server.internal_topics import internal_topic
from lakelog.util.errors import ErrorCode


@handles(OFFSET_COMMIT, 2, 9)
async def offset_commit(ctx: RequestContext, request: Any) -> Any:
    m = ctx.schema
    broker = ctx.broker
    generation = getattr(request, "generation_id_or_member_epoch", None)
    if generation is None:
        generation = request.generation_id
    error = await group_error(ctx, request.group_id)
    consumer_group = await consumer_group_of(ctx, request.group_id) if error is None else None
    if consumer_group is not None:
        error = await commit_error(ctx, consumer_group, request, generation)
    elif error is None:
        group = await broker.groups.get(request.group_id, create=False)
        if group is not None:
            error = group.check_commit(
                generation, request.member_id, getattr(request, "group_instance_id", None)
            )
        elif generation >= 0:
            # Generation -1 to a group that does not exist is a "simple group" commit,
            # accepted whatever member id it names (Kafka's OffsetMetadataManager).
            error = (
                ErrorCode.unknown_member_id if request.member_id else ErrorCode.illegal_generation
            )
    if error == ErrorCode.none:
        error = None
    commits: list[OffsetCommit] = []
    topics = []
    max_metadata = broker.settings.offset_metadata_max_bytes
    for t in request.topics:
        topic = (
            (await broker.topics.get(t.name) or internal_topic(t.name)) if error is None else None
        )
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
        # Written with the other commits that queue meanwhile (groups.offset_commits). Once
        # queued its place is fixed: the connection's next request may go on; the answer
        # waits until the write is durable.
        written = await broker.groups.offset_commits.submit(
            GroupOffsetCommit(request.group_id, commits)
        )
        ctx.pass_turn()
        await asyncio.shield(written)
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
    error = await group_error(ctx, group_id, Operation.DESCRIBE)
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
    error = await group_error(ctx, request.group_id, Operation.DELETE)
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
