"""Topic administration: CreateTopics and DeleteTopics, with the checks a topic's name and
partition count pass (CreatePartitions, in `partitions_admin`, shares them).

Durability comes from object storage, not replicas, so any replication factor >= 1 is
accepted and only recorded (clients' suites create topics with 3 on a one-broker cluster).
Errors and messages follow Kafka so tools show what their users expect.

Partition counts are capped before anything is written (`max_partitions_per_topic`,
`max_partitions_per_request`, `max_partitions`): a request past a cap gets
POLICY_VIOLATION, which is what Kafka's controller answers for a request creating more
than its 10,000 partitions ("Excessively large number of partitions per request.").
"""

from __future__ import annotations

import dataclasses
import datetime
import re
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from typing import Any
from uuid import UUID

from lakelog.config import Settings
from lakelog.coordinator.topic_types import CreateTopicRequest
from lakelog.log.topic_config import validate
from lakelog.security.acl import Operation
from lakelog.server.api import authz
from lakelog.server.api.config_entries import topic_entries
from lakelog.server.api.context import RequestContext, build
from lakelog.server.api.encoded import compact_length, encode_entity
from lakelog.server.api.raw import RawResponse
from lakelog.server.api.registry import handles
from lakelog.server.internal_topics import INTERNAL_TOPICS, internal_topic_by_id, is_internal
from lakelog.tables import table_config
from lakelog.util.errors import ErrorCode
from lakelog.util.pacing import paced

MAX_TOPIC_NAME_LENGTH = 249
_LEGAL_NAME = re.compile(r"[a-zA-Z0-9._-]+")
_ZERO = datetime.timedelta(0)

# AclOperation codes of the cluster resource (CREATE, ALTER, DESCRIBE, CLUSTER_ACTION,
# DESCRIBE_CONFIGS, ALTER_CONFIGS, IDEMPOTENT_WRITE): with no authorizer all are allowed.
CLUSTER_AUTHORIZED_OPERATIONS = sum(1 << op for op in (5, 7, 8, 9, 10, 11, 12))
# KIP-430: a topic's operations (READ, WRITE, CREATE, DELETE, ALTER, DESCRIBE,
# DESCRIBE_CONFIGS, ALTER_CONFIGS), all allowed with no authorizer, as Kafka answers then.
TOPIC_AUTHORIZED_OPERATIONS = sum(1 << op for op in (3, 4, 5, 6, 7, 8, 10, 11))
# A group's (READ, DELETE, DESCRIBE).
GROUP_AUTHORIZED_OPERATIONS = sum(1 << op for op in (3, 6, 8))
OPERATIONS_NOT_REQUESTED = -(2**31)
BROKER_ENDPOINTS = 1
AUTHORIZATION_FAILED = "Authorization failed."
EXCESSIVE_PARTITIONS = "Excessively large number of partitions per request."


def topic_name_problem(name: str | None) -> str | None:
    """Kafka's rules for a topic name: why it is illegal, or None."""
    if not name:
        return "Topic name is illegal, it can't be empty"
    if name in (".", ".."):
        return 'Topic name cannot be "." or ".."'
    if len(name) > MAX_TOPIC_NAME_LENGTH:
        return (
            f"Topic name is illegal, it can't be longer than {MAX_TOPIC_NAME_LENGTH} "
            f"characters, topic name: {name}"
        )
    if not _LEGAL_NAME.fullmatch(name):
        return (
            f'Topic name "{name}" is illegal, it contains a character other than ASCII '
            "alphanumerics, '.', '_' and '-'"
        )
    return None


def collides(name: str, existing: Iterable[str]) -> str | None:
    """The existing topic whose name differs only in '.' versus '_' (metric names clash)."""
    key = name.replace(".", "_")
    for other in existing:
        if other != name and other.replace(".", "_") == key:
            return other
    return None


class CollisionIndex:
    """`collides` for many names at once: one pass over the existing topics, then a lookup
    per name (a request of thousands of topics against a cluster of thousands stays
    linear)."""

    def __init__(self, existing: Iterable[str]) -> None:
        self._by_key: dict[str, list[str]] = {}
        for name in existing:
            self._by_key.setdefault(name.replace(".", "_"), []).append(name)

    def collides(self, name: str) -> str | None:
        for other in self._by_key.get(name.replace(".", "_"), ()):
            if other != name:
                return other
        return None


class TopicProblem(Exception):
    """One topic of a request is refused with this error code and message."""

    def __init__(self, error: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.error = error
        self.message = message


def plan_topic(topic: Any, settings: Settings) -> CreateTopicRequest:
    """Check one CreatableTopic and resolve its defaults; TopicProblem if it is refused."""
    problem = topic_name_problem(topic.name)
    if problem:
        raise TopicProblem(ErrorCode.invalid_topic_exception, problem)
    num_partitions = int(topic.num_partitions)
    replication_factor = int(topic.replication_factor)
    if topic.assignments:
        if num_partitions != -1 or replication_factor != -1:
            raise TopicProblem(
                ErrorCode.invalid_request,
                "Both numPartitions or replicationFactor and replicasAssignments were set. "
                "Both cannot be used at the same time.",
            )
        num_partitions, replication_factor = _check_assignments(topic.assignments)
    else:
        if num_partitions == -1:
            num_partitions = settings.num_partitions
        if replication_factor == -1:
            replication_factor = settings.default_replication_factor
        if num_partitions <= 0:
            raise TopicProblem(
                ErrorCode.invalid_partitions,
                "Number of partitions was set to an invalid non-positive value.",
            )
        if replication_factor <= 0:
            raise TopicProblem(
                ErrorCode.invalid_replication_factor,
                "Replication factor was set to an invalid non-positive value.",
            )
    if num_partitions > settings.max_partitions_per_topic:
        raise TopicProblem(ErrorCode.policy_violation, per_topic_message(num_partitions, settings))
    configs: dict[str, str] = {}
    for config in topic.configs:
        if config.value is None:
            raise TopicProblem(
                ErrorCode.invalid_config,
                f"Null value not supported for topic configs: {config.name}",
            )
        configs[config.name] = config.value
    problem = validate(configs) or table_config.check_change({}, configs)
    if problem:
        raise TopicProblem(ErrorCode.invalid_config, problem)
    return CreateTopicRequest(topic.name, num_partitions, replication_factor, configs)


def per_topic_message(count: int, settings: Settings) -> str:
    return (
        f"A topic may have at most {settings.max_partitions_per_topic} partitions "
        f"(max_partitions_per_topic), not {count}."
    )


def requested_partitions(topic: Any, settings: Settings) -> int:
    """How many partitions a CreatableTopic asks for, counted as Kafka's controller counts
    them for its per-request cap (before any other check)."""
    if topic.assignments:
        return len(topic.assignments)
    count = int(topic.num_partitions)
    return settings.num_partitions if count == -1 else max(count, 0)


def too_many_per_request(count: int, settings: Settings) -> str | None:
    """The refusal message when one request would create `count` new partitions."""
    if count <= settings.max_partitions_per_request:
        return None
    return (
        f"{EXCESSIVE_PARTITIONS} It asks for {count}; the limit is "
        f"{settings.max_partitions_per_request} (max_partitions_per_request)."
    )


class ClusterBudget:
    """Partitions left under `max_partitions`, spent topic by topic in request order."""

    def __init__(self, existing: int, settings: Settings) -> None:
        self.existing = existing
        self.limit = settings.max_partitions

    def take(self, count: int) -> TopicProblem | None:
        if self.existing + count > self.limit:
            return TopicProblem(
                ErrorCode.policy_violation,
                f"The cluster may have at most {self.limit} partitions (max_partitions); "
                f"it has {self.existing}, and this would add {count}.",
            )
        self.existing += count
        return None


def _check_assignments(assignments: Sequence[Any]) -> tuple[int, int]:
    """Partition count and replication factor from manual assignments (Kafka's checks,
    except that broker ids need not be live: any broker serves any partition here)."""
    indexes = sorted(int(a.partition_index) for a in assignments)
    if indexes != list(range(len(indexes))):
        raise TopicProblem(
            ErrorCode.invalid_replica_assignment, "Partitions should be 0-based and consecutive."
        )
    sizes = {len(a.broker_ids) for a in assignments}
    for a in assignments:
        if not a.broker_ids:
            raise TopicProblem(
                ErrorCode.invalid_replica_assignment,
                f"Partition {a.partition_index} has no replicas.",
            )
        if len(set(a.broker_ids)) != len(a.broker_ids):
            raise TopicProblem(
                ErrorCode.invalid_replica_assignment,
                f"Duplicate brokers not allowed in replica assignment: "
                f"{list(a.broker_ids)} for partition {a.partition_index}.",
            )
    if len(sizes) != 1:
        raise TopicProblem(
            ErrorCode.invalid_replica_assignment,
            "All partitions should have the same number of replicas.",
        )
    return len(indexes), sizes.pop()


# ---------------------------------------------------------------- CreateTopics


def _created(
    m: Any,
    plan: CreateTopicRequest,
    topic_id: UUID | None,
    settings: Settings,
    described: dict[tuple[tuple[str, str], ...], tuple[Any, ...]],
    cluster: Mapping[str, str] | None = None,
    own: Mapping[str, str] | None = None,
) -> Any:
    """A created topic's result; v5+ lists the topic's configs as DescribeConfigs would
    (`settings` the static ones, `cluster` and `own` the dynamic broker layers), built
    once per distinct set of configs in the request (`described`): 10,000 topics each
    describing its 30 configs took seconds of the event loop, even with validate_only."""
    configs: tuple[Any, ...] = ()
    if hasattr(m, "CreatableTopicConfigs"):  # v5+
        key = tuple(sorted(plan.configs.items()))
        if key not in described:
            described[key] = tuple(
                build(
                    m.CreatableTopicConfigs,
                    name=e.name,
                    value=e.value,
                    read_only=e.read_only,
                    config_source=int(e.source),
                    is_sensitive=False,
                )
                for e in topic_entries(plan.configs, settings, cluster, own)
            )
        configs = described[key]
    return build(
        m.CreatableTopicResult,
        name=plan.name,
        topic_id=topic_id,
        error_code=ErrorCode.none,
        error_message=None,
        num_partitions=plan.num_partitions,
        replication_factor=plan.replication_factor,
        configs=configs,
    )


def _create_failed(m: Any, name: str, error: ErrorCode, message: str | None) -> Any:
    return build(
        m.CreatableTopicResult,
        name=name,
        topic_id=None,
        error_code=error,
        error_message=message,
        num_partitions=-1,
        replication_factor=-1,
        configs=(),
    )


@handles(19, 2, 7)
async def create_topics(ctx: RequestContext, request: Any) -> Any:
    m = ctx.schema
    settings = ctx.broker.settings
    refused = too_many_per_request(
        sum(requested_partitions(t, settings) for t in request.topics), settings
    )
    if refused:
        return build(
            m.CreateTopicsResponse,
            throttle_time=_ZERO,
            topics=tuple(
                _create_failed(m, t.name, ErrorCode.policy_violation, refused)
                for t in request.topics
            ),
        )
    counts = Counter(t.name for t in request.topics)
    known = await ctx.broker.topics.all()
    existing = {t.name for t in known}
    collisions = CollisionIndex([*existing, *INTERNAL_TOPICS])
    budget = ClusterBudget(sum(t.num_partitions for t in known), settings)
    results: list[Any] = [None] * len(request.topics)
    plans: list[tuple[int, CreateTopicRequest]] = []
    for i, topic in enumerate(request.topics):
        if counts[topic.name] > 1:
            results[i] = _create_failed(
                m, topic.name, ErrorCode.invalid_request, "Duplicate topic name."
            )
            continue
        if not authz.may_create_topic(ctx, topic.name):
            results[i] = _create_failed(
                m, topic.name, ErrorCode.topic_authorization_failed, AUTHORIZATION_FAILED
            )
            continue
        if is_internal(topic.name):  # it exists, as in Kafka
            results[i] = _create_failed(
                m,
                topic.name,
                ErrorCode.topic_already_exists,
                f"Topic '{topic.name}' already exists.",
            )
            continue
        try:
            plan = plan_topic(topic, settings)
        except TopicProblem as problem:
            results[i] = _create_failed(m, topic.name, problem.error, problem.message)
            continue
        other = collisions.collides(plan.name)
        if other:
            results[i] = _create_failed(
                m,
                topic.name,
                ErrorCode.invalid_topic_exception,
                f"Topic '{plan.name}' collides with existing topic: {other}",
            )
            continue
        over = None if plan.name in existing else budget.take(plan.num_partitions)
        if over:
            results[i] = _create_failed(m, topic.name, over.error, over.message)
            continue
        plans.append((i, plan))
    if plans:
        outcomes = await ctx.broker.coordinator.create_topics(
            [p for _, p in plans], validate_only=request.validate_only
        )
        if not request.validate_only and any(o.error == ErrorCode.none for o in outcomes):
            ctx.broker.topics.invalidate()
        described: dict[tuple[tuple[str, str], ...], tuple[Any, ...]] = {}
        dynamic = ctx.broker.dynamic_configs
        for (i, plan), outcome in zip(plans, outcomes, strict=True):
            if outcome.error == ErrorCode.none:
                results[i] = _created(
                    m,
                    plan,
                    outcome.topic_id,
                    dynamic.static,
                    described,
                    dynamic.cluster,
                    dynamic.own,
                )
                if getattr(results[i], "configs", ()) and not authz.topic_allowed(
                    ctx, plan.name, Operation.DESCRIBE_CONFIGS
                ):  # Kafka shows a topic's configs only to who may describe them
                    results[i] = dataclasses.replace(
                        results[i],
                        configs=(),
                        topic_config_error_code=ErrorCode.topic_authorization_failed,
                    )
            else:
                message = outcome.message
                if outcome.error == ErrorCode.topic_already_exists and not message:
                    message = f"Topic '{plan.name}' already exists."
                results[i] = _create_failed(m, plan.name, outcome.error, message)
    if ctx.api_version < 5:
        return build(m.CreateTopicsResponse, throttle_time=_ZERO, topics=tuple(results))
    return splice_create_topics(m, results)


def splice_create_topics(m: Any, results: Sequence[Any]) -> RawResponse:
    """A CreateTopics v5+ answer with each distinct config list encoded once (results share
    them, see `_created`): 10,000 topics' 300,000 config entries took kio 2 s to encode.
    In these versions a result ends with its configs array and its tagged fields (none
    here), and the response with its topics array and its tagged fields."""
    arrays: dict[int, bytes] = {}
    parts: list[bytes] = []
    for result in results:
        configs = result.configs
        if not configs:
            parts.append(encode_entity(m.CreatableTopicResult, result))
            continue
        array = arrays.get(id(configs))
        if array is None:
            array = arrays[id(configs)] = compact_length(len(configs)) + b"".join(
                encode_entity(m.CreatableTopicConfigs, c) for c in configs
            )
        bare = encode_entity(m.CreatableTopicResult, dataclasses.replace(result, configs=()))
        parts.append(bare[:-2] + array + bare[-1:])
    empty = encode_entity(
        m.CreateTopicsResponse, build(m.CreateTopicsResponse, throttle_time=_ZERO, topics=())
    )
    return RawResponse([b"".join([empty[:-2], compact_length(len(parts)), *parts, empty[-1:]])])


# ---------------------------------------------------------------- DeleteTopics


def _deleted(
    m: Any, name: str | None, topic_id: UUID | None, error: ErrorCode, message: str | None = None
) -> Any:
    return build(
        m.DeletableTopicResult,
        name=name,
        topic_id=topic_id,
        error_code=error,
        error_message=message,
    )


def _internal(name: str) -> str:
    return f"Topic '{name}' is an internal topic and cannot be deleted."


@handles(20, 1, 6)
async def delete_topics(ctx: RequestContext, request: Any) -> Any:
    m = ctx.schema
    if ctx.api_version >= 6:
        wanted = [(t.name, t.topic_id) for t in request.topics]
    else:
        wanted = [(name, None) for name in request.topic_names]
    results: list[Any] = [None] * len(wanted)
    names: list[tuple[int, str]] = []
    async for i, (name, topic_id) in paced(enumerate(wanted)):
        if topic_id is not None and topic_id.int == 0:
            topic_id = None
        if name is not None and topic_id is not None:
            results[i] = _deleted(
                m,
                name,
                topic_id,
                ErrorCode.invalid_request,
                "You may not specify both topic name and topic id.",
            )
        elif topic_id is not None:
            topic = await ctx.broker.topics.get_by_id(topic_id)
            internal = internal_topic_by_id(topic_id)
            if internal is not None:
                results[i] = _deleted(
                    m, None, topic_id, ErrorCode.invalid_topic_exception, _internal(internal.name)
                )
            elif topic is None:
                results[i] = _deleted(
                    m,
                    None,
                    topic_id,
                    ErrorCode.unknown_topic_id,
                    "This server does not host this topic ID.",
                )
            elif not authz.topic_allowed(ctx, topic.name, Operation.DELETE):
                results[i] = _deleted(
                    m, None, topic_id, ErrorCode.topic_authorization_failed, AUTHORIZATION_FAILED
                )
            else:
                names.append((i, topic.name))
        elif name is None:
            results[i] = _deleted(
                m,
                None,
                None,
                ErrorCode.invalid_request,
                "Neither topic name nor id were specified.",
            )
        elif not authz.topic_allowed(ctx, name, Operation.DELETE):
            results[i] = _deleted(
                m, name, None, ErrorCode.topic_authorization_failed, AUTHORIZATION_FAILED
            )
        elif is_internal(name):
            results[i] = _deleted(m, name, None, ErrorCode.invalid_topic_exception, _internal(name))
        else:
            names.append((i, name))
    counts = Counter(name for _, name in names)
    unique = [(i, name) for i, name in names if counts[name] == 1]
    for i, name in names:
        if counts[name] > 1:
            results[i] = _deleted(
                m, name, wanted[i][1], ErrorCode.invalid_request, "Duplicate topic in request."
            )
    if unique:
        outcomes = await ctx.broker.coordinator.delete_topics([n for _, n in unique])
        if any(o.error == ErrorCode.none for o in outcomes):
            ctx.broker.topics.invalidate()
        for (i, name), outcome in zip(unique, outcomes, strict=True):
            message = None
            if outcome.error == ErrorCode.unknown_topic_or_partition:
                message = "This server does not host this topic-partition."
            results[i] = _deleted(m, name, outcome.topic_id, outcome.error, message)
    return build(m.DeleteTopicsResponse, throttle_time=_ZERO, responses=tuple(results))
