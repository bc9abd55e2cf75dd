"""DescribeTopicPartitions (KIP-966): topics' partitions a page at a time.

Partitions are described as Metadata describes them (a stable pick among the live brokers
the client sees leads; every one of them is a replica and in sync), so the two APIs never
disagree. Eligible leader replicas are empty: with no replica logs there is nothing for
ELR to protect. Topics go in name order; a page ends after `response_partition_limit`
partitions (capped at 2000, as Kafka caps it) and `next_cursor` names where the next begins.
"""

from __future__ import annotations

import datetime
from typing import Any

from lakelog.coordinator.topic_types import TopicInfo
from lakelog.security.acl import Operation, ResourceType
from lakelog.server.api import authz
from lakelog.server.api.admin import TOPIC_AUTHORIZED_OPERATIONS
from lakelog.server.api.context import RequestContext, build
from lakelog.server.api.metadata import partition_entries
from lakelog.server.api.registry import handles
from lakelog.server.cluster.zones import client_zone
from lakelog.server.internal_topics import INTERNAL_TOPICS, is_internal
from lakelog.server.topics import topic_name_error
from lakelog.util.errors import ErrorCode

DESCRIBE_TOPIC_PARTITIONS_KEY = 75
MAX_PARTITIONS_PER_PAGE = 2000


def _page_limit(asked: int) -> int:
    return max(1, min(int(asked), MAX_PARTITIONS_PER_PAGE))


def _unknown(m: Any, name: str, error: ErrorCode) -> Any:
    return build(
        m.DescribeTopicPartitionsResponseTopic,
        error_code=error,
        name=name,
        topic_id=None,
        is_internal=False,
        partitions=(),
        topic_authorized_operations=TOPIC_AUTHORIZED_OPERATIONS,
    )


def _response(m: Any, topics: list[Any], cursor: Any = None) -> Any:
    return build(
        m.DescribeTopicPartitionsResponse,
        throttle_time=datetime.timedelta(0),
        topics=tuple(topics),
        next_cursor=cursor,
    )


@handles(DESCRIBE_TOPIC_PARTITIONS_KEY, 0, 0)
async def describe_topic_partitions(ctx: RequestContext, request: Any) -> Any:
    m = ctx.schema
    broker = ctx.broker
    cursor = request.cursor
    names = sorted({t.name for t in request.topics})
    if cursor is not None and names and cursor.topic_name not in names:
        # Kafka refuses a cursor outside the topics asked for; so does this broker.
        return _response(m, [_unknown(m, n, ErrorCode.invalid_request) for n in names])
    if cursor is not None and int(cursor.partition_index) < 0:
        return _response(m, [_unknown(m, n, ErrorCode.invalid_request) for n in names])
    known: dict[str, TopicInfo] = {t.name: t for t in await broker.topics.all()}
    known.update(INTERNAL_TOPICS)
    refused: set[str] = set()
    if not request.topics:
        names = sorted(known)  # no topics asked for: all of them
        if authz.enabled(ctx):  # but only those the caller may describe
            visible = authz.topics_allowed(ctx, names, Operation.DESCRIBE)
            names = [n for n in names if n in visible]
    elif authz.enabled(ctx):
        refused = set(names) - authz.topics_allowed(ctx, names, Operation.DESCRIBE)
    if cursor is not None:
        names = [n for n in names if n >= cursor.topic_name]

    brokers = broker.serving(await broker.live_brokers(), client_zone(ctx.client_id))
    broker_ids = tuple(sorted(b.broker_id for b in brokers))
    room = _page_limit(request.response_partition_limit)
    topics: list[Any] = []
    next_cursor = None
    for name in names:
        topic = known.get(name)
        if name in refused:
            topics.append(_unknown(m, name, ErrorCode.topic_authorization_failed))
            continue
        if topic is None:
            error = (
                ErrorCode.invalid_topic_exception
                if topic_name_error(name)
                else ErrorCode.unknown_topic_or_partition
            )
            topics.append(_unknown(m, name, error))
            continue
        first = (
            int(cursor.partition_index) if cursor is not None and name == cursor.topic_name else 0
        )
        if room == 0:
            next_cursor = build(m.Cursor, topic_name=name, partition_index=first)
            break
        last = min(topic.num_partitions, first + room)
        room -= last - first
        partitions = partition_entries(
            m.DescribeTopicPartitionsResponsePartition,
            brokers,
            broker_ids,
            topic.topic_id,
            range(first, last),
            eligible_leader_replicas=(),
            last_known_elr=(),
        )
        topics.append(
            build(
                m.DescribeTopicPartitionsResponseTopic,
                error_code=ErrorCode.none,
                name=topic.name,
                topic_id=topic.topic_id,
                is_internal=is_internal(topic.name),
                partitions=partitions,
                topic_authorized_operations=authz.operations(ctx, ResourceType.TOPIC, topic.name),
            )
        )
        if last < topic.num_partitions:
            next_cursor = build(m.Cursor, topic_name=name, partition_index=last)
            break
    return _response(m, topics, next_cursor)
