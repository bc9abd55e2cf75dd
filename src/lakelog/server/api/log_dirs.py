"""DescribeLogDirs and AlterReplicaLogDirs: the one "log dir" a diskless broker has is
the object store.

Every broker serves every partition from the same objects, so each broker reports all
partitions asked for, under one log dir named by the store's URL (credentials, query and
fragment removed), with each partition's size as the batch coordinator counts it (the
bytes of its live batches in object storage). Nothing is ever copied between brokers, so
the offset lag is 0 and no replica is a "future" one. Object storage has no fixed
capacity: total and usable bytes are -1 (unknown), as Kafka's v4 fields allow.

v5 (KIP-1066, cordoned log dirs) is not advertised: kafka-python takes DescribeLogDirs v5
to mean a Kafka 4.3 broker and would then expect everything 4.3 serves.

AlterReplicaLogDirs asks a broker to move replicas between its local disks. A diskless
broker has none to move between: moving a partition to the one log dir it reports is a
no-op answered NONE (Kafka answers NONE for a replica already in, or not yet hosted in,
the named dir), and any other dir is one this broker does not have: LOG_DIR_NOT_FOUND,
as Kafka's LogManager answers for a path that is not among its `log.dirs`.
"""

from __future__ import annotations

import datetime
from typing import Any
from urllib.parse import urlsplit

from lakelog.coordinator.log_types import PartitionKey
from lakelog.coordinator.topic_types import TopicInfo
from lakelog.security.acl import Operation
from lakelog.server.api import authz
from lakelog.server.api.context import RequestContext, build
from lakelog.server.api.registry import handles
from lakelog.util.errors import ErrorCode

DESCRIBE_LOG_DIRS_KEY = 35
ALTER_REPLICA_LOG_DIRS_KEY = 34
UNKNOWN_BYTES = -1


def log_dir_name(storage_url: str) -> str:
    """The store's URL without anything secret in it (user info, query, fragment)."""
    parts = urlsplit(storage_url)
    host = parts.hostname or ""
    if parts.port is not None:
        host = f"{host}:{parts.port}"
    return f"{parts.scheme}://{host}{parts.path}" if parts.scheme else parts.path


def _wanted(request: Any, known: dict[str, TopicInfo]) -> list[tuple[TopicInfo, list[int]]]:
    """(topic, partitions) to report: all when topics is null; unknown topics and
    partitions are left out, as a Kafka broker leaves out replicas it does not host."""
    if request.topics is None:
        return [(known[n], list(range(known[n].num_partitions))) for n in sorted(known)]
    merged: dict[str, set[int]] = {}
    for t in request.topics:
        topic = known.get(t.topic)
        if topic is not None:
            merged.setdefault(t.topic, set()).update(
                int(p) for p in t.partitions if 0 <= int(p) < topic.num_partitions
            )
    return [(known[n], sorted(ps)) for n, ps in merged.items() if ps]


@handles(DESCRIBE_LOG_DIRS_KEY, 1, 4)
async def describe_log_dirs(ctx: RequestContext, request: Any) -> Any:
    m = ctx.schema
    if not authz.cluster_allowed(ctx, Operation.DESCRIBE):
        # Kafka: DESCRIBE on the cluster; v3+ says why, earlier versions list nothing.
        return build(
            m.DescribeLogDirsResponse,
            throttle_time=datetime.timedelta(0),
            error_code=ErrorCode.cluster_authorization_failed,
            results=(),
        )
    known = {t.name: t for t in await ctx.broker.topics.all()}
    wanted = _wanted(request, known)
    keys = [PartitionKey(t.topic_id, p) for t, ps in wanted for p in ps]
    infos = iter(await ctx.broker.coordinator.log_info(keys) if keys else [])
    topics = []
    for topic, partitions in wanted:
        described = []
        for p in partitions:
            info = next(infos)
            if info.error != ErrorCode.none:
                continue  # gone since the cache was read
            described.append(
                build(
                    m.DescribeLogDirsPartition,
                    partition_index=p,
                    partition_size=info.byte_size,
                    offset_lag=0,
                    is_future_key=False,
                )
            )
        topics.append(build(m.DescribeLogDirsTopic, name=topic.name, partitions=tuple(described)))
    result = build(
        m.DescribeLogDirsResult,
        error_code=ErrorCode.none,
        log_dir=log_dir_name(ctx.broker.settings.resolved_storage_url),
        topics=tuple(topics),
        total_bytes=UNKNOWN_BYTES,
        usable_bytes=UNKNOWN_BYTES,
    )
    return build(
        m.DescribeLogDirsResponse,
        throttle_time=datetime.timedelta(0),
        error_code=ErrorCode.none,
        results=(result,),
    )


@handles(ALTER_REPLICA_LOG_DIRS_KEY, 1, 2)
async def alter_replica_log_dirs(ctx: RequestContext, request: Any) -> Any:
    """Every partition answered: CLUSTER_AUTHORIZATION_FAILED without ALTER on the cluster
    (Kafka's check), NONE for this broker's one log dir, LOG_DIR_NOT_FOUND for any other."""
    m = ctx.schema
    ours = log_dir_name(ctx.broker.settings.resolved_storage_url)
    allowed = authz.cluster_allowed(ctx, Operation.ALTER)
    # A partition named under several dirs gets one answer (Kafka keys its result by
    # partition, the last dir named winning).
    codes: dict[str, dict[int, ErrorCode]] = {}
    for d in request.dirs:
        if not allowed:
            code = ErrorCode.cluster_authorization_failed
        elif str(d.path) == ours:
            code = ErrorCode.none
        else:
            code = ErrorCode.log_dir_not_found
        for t in d.topics:
            per_topic = codes.setdefault(str(t.name), {})
            for p in t.partitions:
                per_topic[int(p)] = code
    results = tuple(
        build(
            m.AlterReplicaLogDirTopicResult,
            topic_name=name,
            partitions=tuple(
                build(m.AlterReplicaLogDirPartitionResult, partition_index=p, error_code=c)
                for p, c in partitions.items()
            ),
        )
        for name, partitions in codes.items()
    )
    return build(
        m.AlterReplicaLogDirsResponse, throttle_time=datetime.timedelta(0), results=results
    )
