"""DescribeQuorum: Lakelog has no KRaft quorum to describe.

Cluster metadata lives in the batch coordinator's database (SQLite or PostgreSQL), which
is its single source of truth; there is no `__cluster_metadata` Raft log, no voters and no
observers. A Kafka controller answers UNKNOWN_TOPIC_OR_PARTITION for any partition that is
not its Raft log, so every partition asked for gets that error here, with a message (v2)
saying why; the request itself succeeds. Inventing voters from the live brokers would
mislead a tool that acts on them.
"""

from __future__ import annotations

from typing import Any

from lakelog.security.acl import Operation
from lakelog.server.api import authz
from lakelog.server.api.context import RequestContext, build
from lakelog.server.api.registry import handles
from lakelog.util.errors import ErrorCode

DESCRIBE_QUORUM_KEY = 55
NO_QUORUM = (
    "Lakelog has no KRaft metadata quorum: cluster metadata lives in the batch "
    "coordinator database."
)


@handles(DESCRIBE_QUORUM_KEY, 0, 2)
async def describe_quorum(ctx: RequestContext, request: Any) -> Any:
    m = ctx.schema
    topics = tuple(
        build(
            m.TopicData,
            topic_name=t.topic_name,
            partitions=tuple(
                build(
                    m.PartitionData,
                    partition_index=p.partition_index,
                    error_code=ErrorCode.unknown_topic_or_partition,
                    error_message=NO_QUORUM,
                    leader_id=-1,
                    leader_epoch=-1,
                    high_watermark=-1,
                    current_voters=(),
                    observers=(),
                )
                for p in t.partitions
            ),
        )
        for t in request.topics
    )
    if not authz.cluster_allowed(ctx, Operation.DESCRIBE):
        return build(
            m.DescribeQuorumResponse,
            error_code=ErrorCode.cluster_authorization_failed,
            error_message="Authorization failed.",
            topics=(),
            nodes=(),
        )
    return build(
        m.DescribeQuorumResponse,
        error_code=ErrorCode.none,
        error_message=None,
        topics=topics,
        nodes=(),
    )
