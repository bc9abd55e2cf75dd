"""ElectLeaders and partition reassignments: placement is computed, so there is nothing
to move or elect.

A partition's "leader" is a stable pick among the live brokers that do not look gone
(rendezvous hashing, see `lakelog.server.cluster.zones.partition_broker`) and every live broker is a
replica in sync, because the data lives in object storage, not on brokers. So:

- ElectLeaders changes nothing and answers as Kafka's controller does for a partition
  that already has the leader asked for: the leader a client sees is the one the cluster
  computes, and electing another would only be undone by the next computation (so it is
  the "preferred" one), and an unclean election is never needed since no replica can be
  behind. A named partition gets
  ELECTION_NOT_NEEDED (84), for both election types; a request naming no partitions
  ("all of them") gets every topic with no partition rows, because Kafka leaves out the
  partitions that need no election. Clients read 84 the way Kafka's tools do:
  kafka-leader-election.sh prints "Valid replica already elected for partitions ..." and
  exits 0, kafka-python's elect_leaders ignores it, and confluent-kafka's elect_leaders
  (like Java's Admin) reports it per partition as ELECTION_NOT_NEEDED.
- ListPartitionReassignments: none is ever in progress.
- AlterPartitionReassignments: a new replica list for a known partition is accepted as a
  no-op (Metadata keeps naming the live brokers); cancelling answers
  NO_REASSIGNMENT_IN_PROGRESS, as Kafka does when there is nothing to cancel.
"""

from __future__ import annotations

import datetime
from collections.abc import Iterable
from typing import Any

from lakelog.coordinator.topic_types import TopicInfo
from lakelog.security.acl import Operation
from lakelog.server.api import authz
from lakelog.server.api.context import RequestContext, build
from lakelog.server.api.registry import handles
from lakelog.util.errors import ErrorCode

ALTER_REASSIGNMENTS_KEY, LIST_REASSIGNMENTS_KEY, ELECT_LEADERS_KEY = 45, 46, 43
PREFERRED, UNCLEAN = 0, 1
AUTHORIZATION_FAILED = "Authorization failed."
_ZERO = datetime.timedelta(0)
UNKNOWN_PARTITION = "This server does not host this topic-partition."
NOT_NEEDED = "Leader election not needed for topic partition."


def _known(topic: TopicInfo | None, partition: int) -> bool:
    return topic is not None and 0 <= partition < topic.num_partitions


async def _topics(ctx: RequestContext) -> dict[str, TopicInfo]:
    return {t.name: t for t in await ctx.broker.topics.all()}


# ---------------------------------------------------------------- ElectLeaders


def _elect_asked(
    request: Any, known: dict[str, TopicInfo]
) -> Iterable[tuple[str, list[int] | None]]:
    """(topic, partitions) asked for, each partition once; (topic, None) for each topic
    when the request names none (Kafka's "every partition")."""
    if request.topic_partitions is None:
        return [(name, None) for name in sorted(known)]
    merged: dict[str, dict[int, None]] = {}
    for t in request.topic_partitions:
        merged.setdefault(t.topic, {}).update(dict.fromkeys(int(p) for p in t.partitions))
    return [(name, list(ps)) for name, ps in merged.items()]


def _election_answer(
    permitted: bool, election: int, name: str, topic: TopicInfo | None, partition: int
) -> tuple[ErrorCode, str | None]:
    """One named partition's answer, with Kafka's controller's codes and messages."""
    if not permitted:
        return ErrorCode.cluster_authorization_failed, AUTHORIZATION_FAILED
    if election not in (PREFERRED, UNCLEAN):
        return ErrorCode.invalid_request, f"Unknown election type {election}"
    if topic is None:
        return ErrorCode.unknown_topic_or_partition, f"No such topic as {name}"
    if not _known(topic, partition):
        return ErrorCode.unknown_topic_or_partition, f"No such partition as {name}-{partition}"
    return ErrorCode.election_not_needed, NOT_NEEDED


@handles(ELECT_LEADERS_KEY, 0, 2)
async def elect_leaders(ctx: RequestContext, request: Any) -> Any:
    m = ctx.schema
    known = await _topics(ctx)
    election = int(getattr(request, "election_type", PREFERRED))
    permitted = authz.cluster_allowed(ctx, Operation.ALTER)
    results = []
    for name, asked in _elect_asked(request, known):
        topic = known.get(name)
        answers = []
        # Every partition: Kafka answers only those it elected or could not (none here,
        # with permission and a known election type).
        partitions = asked if asked is not None else range(known[name].num_partitions)
        for p in partitions:
            error, message = _election_answer(permitted, election, name, topic, p)
            if asked is None and error == ErrorCode.election_not_needed:
                continue
            answers.append(
                build(m.PartitionResult, partition_id=p, error_code=error, error_message=message)
            )
        results.append(build(m.ReplicaElectionResult, topic=name, partition_result=tuple(answers)))
    return build(
        m.ElectLeadersResponse,
        throttle_time=_ZERO,
        error_code=ErrorCode.none if permitted else ErrorCode.cluster_authorization_failed,
        replica_election_results=tuple(results),
    )


# ---------------------------------------------------------------- reassignments


@handles(LIST_REASSIGNMENTS_KEY, 0, 0)
async def list_partition_reassignments(ctx: RequestContext, request: Any) -> Any:
    m = ctx.schema
    permitted = authz.cluster_allowed(ctx, Operation.DESCRIBE)
    return build(
        m.ListPartitionReassignmentsResponse,
        throttle_time=_ZERO,
        error_code=ErrorCode.none if permitted else ErrorCode.cluster_authorization_failed,
        error_message=None if permitted else AUTHORIZATION_FAILED,
        topics=(),
    )


def _reassignment_problem(topic: TopicInfo | None, partition: Any) -> tuple[ErrorCode, str | None]:
    index = int(partition.partition_index)
    if not _known(topic, index):
        return ErrorCode.unknown_topic_or_partition, UNKNOWN_PARTITION
    replicas = partition.replicas
    if replicas is None:
        return ErrorCode.no_reassignment_in_progress, "No reassignment is in progress."
    if not replicas:
        return ErrorCode.invalid_replica_assignment, "The replica list is empty."
    if len(set(replicas)) != len(replicas):
        return (
            ErrorCode.invalid_replica_assignment,
            f"Duplicate brokers in replica assignment: {list(replicas)}.",
        )
    if any(int(r) < 0 for r in replicas):
        return ErrorCode.invalid_replica_assignment, f"Invalid broker id in {list(replicas)}."
    return ErrorCode.none, None


@handles(ALTER_REASSIGNMENTS_KEY, 0, 1)
async def alter_partition_reassignments(ctx: RequestContext, request: Any) -> Any:
    m = ctx.schema
    known = await _topics(ctx)
    permitted = authz.cluster_allowed(ctx, Operation.ALTER)
    responses = []
    for t in request.topics:
        topic = known.get(t.name)
        partitions = []
        for p in t.partitions:
            error, message = (
                _reassignment_problem(topic, p)
                if permitted
                else (ErrorCode.cluster_authorization_failed, AUTHORIZATION_FAILED)
            )
            partitions.append(
                build(
                    m.ReassignablePartitionResponse,
                    partition_index=p.partition_index,
                    error_code=error,
                    error_message=message,
                )
            )
        responses.append(
            build(m.ReassignableTopicResponse, name=t.name, partitions=tuple(partitions))
        )
    return build(
        m.AlterPartitionReassignmentsResponse,
        throttle_time=_ZERO,
        allow_replication_factor_change=getattr(request, "allow_replication_factor_change", True),
        error_code=ErrorCode.none if permitted else ErrorCode.cluster_authorization_failed,
        error_message=None if permitted else AUTHORIZATION_FAILED,
        responses=tuple(responses),
    )
