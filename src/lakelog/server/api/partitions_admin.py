"""Partition administration: CreatePartitions (under the same partition caps as
CreateTopics, see `admin`) and DeleteRecords."""

from __future__ import annotations

import datetime
from collections import Counter
from collections.abc import Sequence
from typing import Any

from lakelog.config import Settings
from lakelog.coordinator.log_types import DeleteRecordsRequest, DeleteRecordsResult
from lakelog.coordinator.topic_types import CreatePartitionsRequest
from lakelog.security.acl import Operation
from lakelog.server.api import authz
from lakelog.server.api.admin import (
    AUTHORIZATION_FAILED,
    ClusterBudget,
    TopicProblem,
    per_topic_message,
    too_many_per_request,
)
from lakelog.server.api.context import RequestContext, build
from lakelog.server.api.registry import handles
from lakelog.server.internal_topics import is_internal
from lakelog.util.errors import ErrorCode

_ZERO = datetime.timedelta(0)


def _partitions_problem(
    current: int | None,
    name: str,
    count: int,
    assignments: Sequence[Any] | None,
    settings: Settings,
) -> TopicProblem | None:
    if current is None:
        return TopicProblem(
            ErrorCode.unknown_topic_or_partition, f"The topic '{name}' does not exist."
        )
    if count < current:
        return TopicProblem(
            ErrorCode.invalid_partitions,
            f"Topic currently has {current} partitions, which is higher than "
            f"the requested {count}.",
        )
    if count == current:
        return TopicProblem(
            ErrorCode.invalid_partitions, f"Topic already has {current} partitions."
        )
    if count > settings.max_partitions_per_topic:
        return TopicProblem(ErrorCode.policy_violation, per_topic_message(count, settings))
    if assignments is not None and len(assignments) != count - current:
        return TopicProblem(
            ErrorCode.invalid_replica_assignment,
            f"Attempted to add {count - current} additional partition(s), "
            f"but only {len(assignments)} assignment(s) were specified.",
        )
    return None


@handles(37, 0, 3)
async def create_partitions(ctx: RequestContext, request: Any) -> Any:
    m = ctx.schema
    settings = ctx.broker.settings
    counts = Counter(t.name for t in request.topics)
    current = {
        t.name: t.num_partitions for t in await ctx.broker.coordinator.get_topics(list(counts))
    }
    added = sum(max(0, int(t.count) - current[t.name]) for t in request.topics if t.name in current)
    refused = too_many_per_request(added, settings)
    if refused:
        return build(
            m.CreatePartitionsResponse,
            throttle_time=_ZERO,
            results=tuple(
                build(
                    m.CreatePartitionsTopicResult,
                    name=t.name,
                    error_code=ErrorCode.policy_violation,
                    error_message=refused,
                )
                for t in request.topics
            ),
        )
    budget = ClusterBudget(sum(t.num_partitions for t in await ctx.broker.topics.all()), settings)
    results: list[Any] = [None] * len(request.topics)
    todo: list[tuple[int, CreatePartitionsRequest]] = []
    for i, topic in enumerate(request.topics):
        if counts[topic.name] > 1:
            problem: TopicProblem | None = TopicProblem(
                ErrorCode.invalid_request, "Duplicate topic in request."
            )
        elif not authz.topic_allowed(ctx, topic.name, Operation.ALTER):
            problem = TopicProblem(ErrorCode.topic_authorization_failed, AUTHORIZATION_FAILED)
        elif is_internal(topic.name):
            # A group's partition is its id's hash modulo the count: it never changes.
            problem = TopicProblem(
                ErrorCode.invalid_partitions,
                f"The number of partitions of the internal topic {topic.name} cannot be changed.",
            )
        else:
            problem = _partitions_problem(
                current.get(topic.name), topic.name, int(topic.count), topic.assignments, settings
            )
        if problem is None:
            problem = budget.take(int(topic.count) - current[topic.name])
        if problem:
            results[i] = build(
                m.CreatePartitionsTopicResult,
                name=topic.name,
                error_code=problem.error,
                error_message=problem.message,
            )
        else:
            todo.append((i, CreatePartitionsRequest(topic.name, int(topic.count))))
    if todo:
        outcomes = await ctx.broker.coordinator.create_partitions(
            [r for _, r in todo], validate_only=request.validate_only
        )
        if not request.validate_only and any(o.error == ErrorCode.none for o in outcomes):
            ctx.broker.topics.invalidate()
        for (i, r), outcome in zip(todo, outcomes, strict=True):
            results[i] = build(
                m.CreatePartitionsTopicResult,
                name=r.name,
                error_code=outcome.error,
                error_message=outcome.message,
            )
    return build(m.CreatePartitionsResponse, throttle_time=_ZERO, results=tuple(results))


# ---------------------------------------------------------------- DeleteRecords


@handles(21, 0, 2)
async def delete_records(ctx: RequestContext, request: Any) -> Any:
    m = ctx.schema
    unknown = DeleteRecordsResult(ErrorCode.unknown_topic_or_partition)
    refused = DeleteRecordsResult(ErrorCode.topic_authorization_failed)
    internal = DeleteRecordsResult(ErrorCode.invalid_topic_exception)  # Kafka's ReplicaManager
    answers: list[list[DeleteRecordsResult | int]] = []
    asks: list[DeleteRecordsRequest] = []
    for topic in request.topics:
        info = await ctx.broker.topics.get(topic.name)
        deletable = authz.topic_allowed(ctx, topic.name, Operation.DELETE)
        row: list[DeleteRecordsResult | int] = []
        for p in topic.partitions:
            # The partition count is checked by the coordinator (the cache may lag).
            if not deletable:
                row.append(refused)
            elif is_internal(topic.name):
                row.append(internal)
            elif info is None or p.partition_index < 0:
                row.append(unknown)
            else:
                row.append(len(asks))
                asks.append(
                    DeleteRecordsRequest(info.topic_id, int(p.partition_index), int(p.offset))
                )
        answers.append(row)
    done = await ctx.broker.coordinator.delete_records(asks) if asks else []
    topics = []
    for topic, row in zip(request.topics, answers, strict=True):
        partitions = []
        for p, slot in zip(topic.partitions, row, strict=True):
            result = done[slot] if isinstance(slot, int) else slot
            partitions.append(
                build(
                    m.DeleteRecordsPartitionResult,
                    partition_index=p.partition_index,
                    low_watermark=result.low_watermark,
                    error_code=result.error,
                )
            )
        topics.append(
            build(m.DeleteRecordsTopicResult, name=topic.name, partitions=tuple(partitions))
        )
    return build(m.DeleteRecordsResponse, throttle_time=_ZERO, topics=tuple(topics))
