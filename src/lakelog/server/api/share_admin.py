"""The share-group offset admin APIs (KIP-932): DescribeShareGroupOffsets (90),
AlterShareGroupOffsets (91), DeleteShareGroupOffsets (92). A share group's "offset" on a
partition is its share-partition start offset; altering or deleting it needs the group
to be empty, as in Kafka, and goes through the same compare-and-set as ShareFetch."""

from __future__ import annotations

import datetime
from typing import Any
from uuid import UUID

from lakelog.coordinator.log_types import PartitionKey
from lakelog.coordinator.topic_types import TopicInfo
from lakelog.groups.share.partitions import ShareKey
from lakelog.groups.share.state import SharePartitionState
from lakelog.security.acl import Operation
from lakelog.server.api import authz
from lakelog.server.api.context import RequestContext, build
from lakelog.server.api.registry import handles
from lakelog.util.errors import ErrorCode

DESCRIBE_OFFSETS, ALTER_OFFSETS, DELETE_OFFSETS = 90, 91, 92
NO_THROTTLE = datetime.timedelta(0)
NO_EPOCH = -1


async def _group_error(
    ctx: RequestContext, group_id: str, operation: Operation = Operation.DESCRIBE
) -> ErrorCode | None:
    """Kafka's checks: DESCRIBE on the group to describe its offsets, READ to alter them,
    DELETE to delete them."""
    if not group_id:
        return ErrorCode.invalid_group_id
    if not authz.group_allowed(ctx, group_id, operation):
        return ErrorCode.group_authorization_failed
    if not await ctx.broker.groups.owns(group_id):
        return ErrorCode.not_coordinator
    if not await ctx.broker.share.is_share_group(group_id):
        return ErrorCode.group_id_not_found
    return None


@handles(DESCRIBE_OFFSETS, 0, 1)
async def describe_share_group_offsets(ctx: RequestContext, request: Any) -> Any:
    m = ctx.schema
    broker = ctx.broker
    by_id = {t.topic_id: t for t in await broker.topics.all()}
    groups = []
    for g in request.groups:
        error = await _group_error(ctx, g.group_id)
        topics: list[Any] = []
        if error is None:
            topics = await _describe_group(ctx, m, g, by_id)
        groups.append(
            build(
                m.DescribeShareGroupOffsetsResponseGroup,
                group_id=g.group_id,
                topics=tuple(topics),
                error_code=error or ErrorCode.none,
                error_message=None,
            )
        )
    return build(
        m.DescribeShareGroupOffsetsResponse, throttle_time=NO_THROTTLE, groups=tuple(groups)
    )


async def _describe_group(
    ctx: RequestContext, m: Any, g: Any, by_id: dict[UUID, TopicInfo]
) -> list[Any]:
    broker = ctx.broker
    stored = await broker.coordinator.load_share_partitions(g.group_id, [])
    starts = {(UUID(r.topic_id), r.partition): r.start_offset for r in stored if r is not None}
    wanted: list[tuple[TopicInfo | None, str, list[int]]] = []
    if g.topics is None:
        names: dict[UUID, list[int]] = {}
        for topic_id, partition in sorted(starts):
            names.setdefault(topic_id, []).append(partition)
        wanted = [
            (by_id.get(tid), by_id[tid].name, ps) for tid, ps in names.items() if tid in by_id
        ]
    else:
        by_name = {t.name: t for t in by_id.values()}
        wanted = [(by_name.get(t.topic_name), t.topic_name, list(t.partitions)) for t in g.topics]
    keys = [PartitionKey(t.topic_id, p) for t, _, ps in wanted if t is not None for p in ps]
    infos = dict(zip(keys, await broker.coordinator.log_info(keys), strict=True)) if keys else {}
    out = []
    for topic, name, partitions in wanted:
        rows = []
        for p in partitions:
            if topic is None or not 0 <= p < topic.num_partitions:
                rows.append(
                    build(
                        m.DescribeShareGroupOffsetsResponsePartition,
                        partition_index=p,
                        start_offset=-1,
                        leader_epoch=NO_EPOCH,
                        lag=-1,
                        error_code=ErrorCode.unknown_topic_or_partition,
                        error_message=None,
                    )
                )
                continue
            start = starts.get((topic.topic_id, p), -1)
            info = infos.get(PartitionKey(topic.topic_id, p))
            lag = -1
            if start >= 0 and info is not None and info.error == ErrorCode.none:
                lag = max(0, info.high_watermark - start)
            rows.append(
                build(
                    m.DescribeShareGroupOffsetsResponsePartition,
                    partition_index=p,
                    start_offset=start,
                    leader_epoch=NO_EPOCH,
                    lag=lag,
                    error_code=ErrorCode.none,
                    error_message=None,
                )
            )
        out.append(
            build(
                m.DescribeShareGroupOffsetsResponseTopic,
                topic_name=name,
                topic_id=topic.topic_id if topic else None,
                partitions=tuple(rows),
            )
        )
    return out


@handles(ALTER_OFFSETS, 0, 0)
async def alter_share_group_offsets(ctx: RequestContext, request: Any) -> Any:
    m = ctx.schema
    broker = ctx.broker
    error = await _group_error(ctx, request.group_id, Operation.READ)
    if error is None and await broker.share.has_members(request.group_id):
        error = ErrorCode.non_empty_group
    if error is not None:
        return build(
            m.AlterShareGroupOffsetsResponse,
            throttle_time=NO_THROTTLE,
            error_code=error,
            error_message=None,
            responses=(),
        )
    config = await broker.group_configs.effective(request.group_id)
    targets: dict[ShareKey, int] = {}
    answers: list[tuple[str, TopicInfo | None, list[tuple[int, ErrorCode]]]] = []
    for t in request.topics:
        topic = await broker.topics.get(t.topic_name)
        rows = []
        for p in t.partitions:
            index = int(p.partition_index)
            if topic is None or not 0 <= index < topic.num_partitions:
                rows.append((index, ErrorCode.unknown_topic_or_partition))
                continue
            info = (await broker.coordinator.log_info([PartitionKey(topic.topic_id, index)]))[0]
            if not info.log_start_offset <= int(p.start_offset) <= info.high_watermark:
                rows.append((index, ErrorCode.offset_out_of_range))
                continue
            targets[ShareKey(str(topic.topic_id), index)] = int(p.start_offset)
            rows.append((index, ErrorCode.none))
        answers.append((t.topic_name, topic, rows))

    def reset(key: ShareKey, state: SharePartitionState) -> bool:
        state.reset(targets[key])
        return True

    done = await broker.share.partitions.update(request.group_id, list(targets), config, reset)
    responses = []
    for name, topic, rows in answers:
        parts = []
        for index, err in rows:
            lost = topic is not None and ShareKey(str(topic.topic_id), index) not in done
            if err == ErrorCode.none and lost:
                err = ErrorCode.concurrent_transactions  # lost compare-and-set races
            parts.append(
                build(
                    m.AlterShareGroupOffsetsResponsePartition,
                    partition_index=index,
                    error_code=err,
                    error_message=None,
                )
            )
        responses.append(
            build(
                m.AlterShareGroupOffsetsResponseTopic,
                topic_name=name,
                topic_id=topic.topic_id if topic else None,
                partitions=tuple(parts),
            )
        )
    return build(
        m.AlterShareGroupOffsetsResponse,
        throttle_time=NO_THROTTLE,
        error_code=ErrorCode.none,
        error_message=None,
        responses=tuple(responses),
    )


@handles(DELETE_OFFSETS, 0, 0)
async def delete_share_group_offsets(ctx: RequestContext, request: Any) -> Any:
    m = ctx.schema
    broker = ctx.broker
    error = await _group_error(ctx, request.group_id, Operation.DELETE)
    if error is None and await broker.share.has_members(request.group_id):
        error = ErrorCode.non_empty_group
    if error is not None:
        return build(
            m.DeleteShareGroupOffsetsResponse,
            throttle_time=NO_THROTTLE,
            error_code=error,
            error_message=None,
            responses=(),
        )
    responses = []
    for t in request.topics:
        topic = await broker.topics.get(t.topic_name)
        err = ErrorCode.unknown_topic_or_partition
        if topic is not None:
            keys = [(str(topic.topic_id), p) for p in range(topic.num_partitions)]
            await broker.coordinator.delete_share_partitions(request.group_id, keys)
            err = ErrorCode.none
        responses.append(
            build(
                m.DeleteShareGroupOffsetsResponseTopic,
                topic_name=t.topic_name,
                topic_id=topic.topic_id if topic else None,
                error_code=err,
                error_message=None,
            )
        )
    broker.share.partitions.forget(request.group_id)
    return build(
        m.DeleteShareGroupOffsetsResponse,
        throttle_time=NO_THROTTLE,
        error_code=ErrorCode.none,
        error_message=None,
        responses=tuple(responses),
    )
