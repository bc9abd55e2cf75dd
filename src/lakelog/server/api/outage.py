"""Answers for requests whose handler hit a backend outage (see `lakelog.server.cluster.outage`).

Kafka clients retry on retriable error codes and reconnect when a connection drops; a
dropped connection also loses every pipelined request on it. So when the coordinator
database or object storage is down, each API answers with the error its clients retry
for, echoing every topic, partition, group or resource of the request so that clients
match answers to what they asked.

The responses are built from kio's response classes: every field gets a neutral value
(its schema default, -1 for ids and offsets, empty strings and arrays), the error fields
get the API's code, and the `Echo` rules copy identifiers from request to response. Only
Metadata has a builder of its own: it names this broker, so clients keep a broker to ask.
"""

from __future__ import annotations

import dataclasses
import datetime
import logging
import typing
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from kio.index import load_response_schema

from lakelog.server.api.context import RequestContext
from lakelog.server.api.raw import NO_RESPONSE
from lakelog.server.cluster.outage import RateLimitedLog, is_outage
from lakelog.util import metrics
from lakelog.util.errors import ErrorCode

log = logging.getLogger(__name__)
_warn = RateLimitedLog(log)

MESSAGE = "backend temporarily unavailable; retry"
_ERROR_FIELDS = ("error_code", "partition_error_code")
_ZERO_INTS = frozenset({"session_id"})
"""Integer fields whose neutral value is 0, not -1 (Fetch: no fetch session)."""


@dataclass(frozen=True, slots=True)
class Echo:
    """Copy the request list `request` into the response list `response`, one entry per
    item: `ids` pairs (request attribute, response field) for struct items; `key` names
    the response field for plain items (names, ids, partition numbers)."""

    request: str
    response: str
    ids: tuple[tuple[str, str], ...] = ()
    key: str = ""
    children: tuple[Echo, ...] = ()


@dataclass(frozen=True, slots=True)
class Plan:
    code: ErrorCode
    echoes: tuple[Echo, ...] = ()
    top_level: bool = True
    """False: the response's own error_code stays NONE (Fetch: a top-level error means a
    fetch-session problem to clients; partitions carry the outage)."""


_PARTITIONS_BY_INDEX = Echo("partitions", "partitions", (("partition_index", "partition_index"),))
_NAMED_TOPICS = Echo("topics", "topics", (("name", "name"),), children=(_PARTITIONS_BY_INDEX,))
_PLAIN_PARTITIONS = Echo("partition_indexes", "partitions", key="partition_index")
_TXN_PARTITIONS = Echo("partitions", "results_by_partition", key="partition_index")
_SHARE_TOPICS = Echo(
    "topics",
    "responses",
    (("topic_id", "topic_id"),),
    children=(_PARTITIONS_BY_INDEX,),
)
_RESOURCES = (("resource_type", "resource_type"), ("resource_name", "resource_name"))

STORAGE = ErrorCode.kafka_storage_error
COORDINATOR = ErrorCode.coordinator_not_available
CONTROLLER = ErrorCode.not_controller
TIMED_OUT = ErrorCode.request_timed_out

PLANS: dict[int, Plan] = {
    # Data path, per partition: clients refresh metadata and retry (librdkafka, Java).
    0: Plan(
        STORAGE,
        (
            Echo(
                "topic_data",
                "responses",
                (("name", "name"),),
                children=(Echo("partition_data", "partition_responses", (("index", "index"),)),),
            ),
        ),
    ),
    1: Plan(
        STORAGE,
        (
            Echo(
                "topics",
                "responses",
                (("topic", "topic"),),
                children=(Echo("partitions", "partitions", (("partition", "partition_index"),)),),
            ),
        ),
        top_level=False,
    ),
    2: Plan(STORAGE, (_NAMED_TOPICS,)),
    21: Plan(STORAGE, (_NAMED_TOPICS,)),  # DeleteRecords
    23: Plan(  # OffsetForLeaderEpoch
        STORAGE,
        (
            Echo(
                "topics",
                "topics",
                (("topic", "topic"),),
                children=(Echo("partitions", "partitions", (("partition", "partition"),)),),
            ),
        ),
    ),
    # DescribeProducers is partition-scoped: Java's admin retries NOT_LEADER_OR_FOLLOWER.
    61: Plan(
        ErrorCode.not_leader_or_follower,
        (Echo("topics", "topics", (("name", "name"),), children=(_PLAIN_PARTITIONS,)),),
    ),
    # Groups: COORDINATOR_NOT_AVAILABLE makes every client look the coordinator up again
    # and retry (Heartbeat and OffsetCommit handle no other coordinator error everywhere).
    8: Plan(COORDINATOR, (_NAMED_TOPICS,)),  # OffsetCommit
    9: Plan(  # OffsetFetch: v1-7 one group, v8+ a list of groups
        COORDINATOR,
        (
            Echo("topics", "topics", (("name", "name"),), children=(_PLAIN_PARTITIONS,)),
            Echo(
                "groups",
                "groups",
                (("group_id", "group_id"),),
                children=(
                    Echo("topics", "topics", (("name", "name"),), children=(_PLAIN_PARTITIONS,)),
                ),
            ),
        ),
    ),
    10: Plan(COORDINATOR, (Echo("coordinator_keys", "coordinators", key="key"),)),
    11: Plan(COORDINATOR),  # JoinGroup
    12: Plan(COORDINATOR),  # Heartbeat
    13: Plan(  # LeaveGroup
        COORDINATOR,
        (
            Echo(
                "members",
                "members",
                (("member_id", "member_id"), ("group_instance_id", "group_instance_id")),
            ),
        ),
    ),
    14: Plan(COORDINATOR),  # SyncGroup
    15: Plan(COORDINATOR, (Echo("groups", "groups", key="group_id"),)),  # DescribeGroups
    16: Plan(COORDINATOR),  # ListGroups
    42: Plan(COORDINATOR, (Echo("groups_names", "results", key="group_id"),)),  # DeleteGroups
    47: Plan(COORDINATOR, (_NAMED_TOPICS,)),  # OffsetDelete
    68: Plan(COORDINATOR),  # ConsumerGroupHeartbeat
    69: Plan(COORDINATOR, (Echo("group_ids", "groups", key="group_id"),)),  # ConsumerGroupDescribe
    # Share groups (KIP-932): membership and offsets at the coordinator; ShareFetch and
    # ShareAcknowledge answer per partition (a top-level error means a share-session problem).
    76: Plan(COORDINATOR),  # ShareGroupHeartbeat
    77: Plan(COORDINATOR, (Echo("group_ids", "groups", key="group_id"),)),  # ShareGroupDescribe
    78: Plan(STORAGE, (_SHARE_TOPICS,), top_level=False),  # ShareFetch
    79: Plan(STORAGE, (_SHARE_TOPICS,), top_level=False),  # ShareAcknowledge
    90: Plan(  # DescribeShareGroupOffsets
        COORDINATOR, (Echo("groups", "groups", (("group_id", "group_id"),)),)
    ),
    91: Plan(COORDINATOR),  # AlterShareGroupOffsets
    92: Plan(COORDINATOR),  # DeleteShareGroupOffsets
    # Transactions: COORDINATOR_NOT_AVAILABLE, retried after a coordinator lookup.
    22: Plan(COORDINATOR),  # InitProducerId
    24: Plan(  # AddPartitionsToTxn: v0-3 one transaction, v4+ a batch of them
        COORDINATOR,
        (
            Echo(
                "v3_and_below_topics",
                "results_by_topic_v3_and_below",
                (("name", "name"),),
                children=(_TXN_PARTITIONS,),
            ),
            Echo(
                "transactions",
                "results_by_transaction",
                (("transactional_id", "transactional_id"),),
                children=(
                    Echo(
                        "topics",
                        "topic_results",
                        (("name", "name"),),
                        children=(_TXN_PARTITIONS,),
                    ),
                ),
            ),
        ),
    ),
    25: Plan(COORDINATOR),  # AddOffsetsToTxn
    26: Plan(COORDINATOR),  # EndTxn
    28: Plan(COORDINATOR, (_NAMED_TOPICS,)),  # TxnOffsetCommit
    65: Plan(  # DescribeTransactions
        COORDINATOR, (Echo("transactional_ids", "transaction_states", key="transactional_id"),)
    ),
    66: Plan(COORDINATOR),  # ListTransactions
    # Topic admin belongs to Kafka's controller: NOT_CONTROLLER makes admin clients
    # refresh metadata and retry until their own timeout.
    19: Plan(CONTROLLER, (Echo("topics", "topics", (("name", "name"),)),)),
    20: Plan(
        CONTROLLER,
        (
            Echo("topic_names", "responses", key="name"),
            Echo("topics", "responses", (("name", "name"), ("topic_id", "topic_id"))),
        ),
    ),
    37: Plan(CONTROLLER, (Echo("topics", "results", (("name", "name"),)),)),
    43: Plan(  # ElectLeaders
        CONTROLLER,
        (
            Echo(
                "topic_partitions",
                "replica_election_results",
                (("topic", "topic"),),
                children=(Echo("partitions", "partition_result", key="partition_id"),),
            ),
        ),
    ),
    45: Plan(  # AlterPartitionReassignments
        CONTROLLER,
        (Echo("topics", "responses", (("name", "name"),), children=(_PARTITIONS_BY_INDEX,)),),
    ),
    46: Plan(CONTROLLER),  # ListPartitionReassignments
    55: Plan(CONTROLLER),  # DescribeQuorum (answers without the backend; here for the table)
    # Configs and cluster description: REQUEST_TIMED_OUT, retriable in every client.
    32: Plan(TIMED_OUT, (Echo("resources", "results", _RESOURCES),)),
    33: Plan(TIMED_OUT, (Echo("resources", "responses", _RESOURCES),)),
    44: Plan(TIMED_OUT, (Echo("resources", "responses", _RESOURCES),)),
    60: Plan(TIMED_OUT),  # DescribeCluster
    # SCRAM users (KIP-554): describe has a top-level error; alter answers per user.
    50: Plan(TIMED_OUT),  # DescribeUserScramCredentials
    51: Plan(  # AlterUserScramCredentials
        CONTROLLER,
        (
            Echo("deletions", "results", (("name", "user"),)),
            Echo("upsertions", "results", (("name", "user"),)),
        ),
    ),
    29: Plan(TIMED_OUT),  # DescribeAcls
    30: Plan(TIMED_OUT, (Echo("creations", "results"),)),  # CreateAcls
    31: Plan(TIMED_OUT, (Echo("filters", "filter_results"),)),  # DeleteAcls
    35: Plan(TIMED_OUT),  # DescribeLogDirs: see `_log_dirs`
    34: Plan(STORAGE),  # AlterReplicaLogDirs: see `_replica_log_dirs`
    75: Plan(
        TIMED_OUT, (Echo("topics", "topics", (("name", "name"),)),)
    ),  # DescribeTopicPartitions
}


def answer_outage(ctx: RequestContext, request: Any, exc: BaseException) -> Any | None:
    """The response for a request whose handler raised `exc`, or None when `exc` is not an
    outage or the API has no outage answer (the caller re-raises)."""
    if not is_outage(exc) or not dataclasses.is_dataclass(request):
        return None
    builder = BUILDERS.get(ctx.api_key)
    plan = PLANS.get(ctx.api_key)
    if builder is None and plan is None:
        return None
    from lakelog.server.api.registry import HANDLERS

    spec = HANDLERS.get(ctx.api_key)
    api = spec.handler.__name__ if spec else str(ctx.api_key)
    metrics.request_outage_total.labels(api=api).inc()
    _warn.warning(
        "answering %s v%d from %s with a retriable error: %s", api, ctx.api_version, ctx.peer, exc
    )
    if ctx.api_key == 0 and getattr(request, "acks", 1) == 0:
        return NO_RESPONSE  # acks=0: the client expects no answer
    if builder is not None:
        return builder(ctx, request)
    assert plan is not None
    return build_outage_response(ctx.api_key, ctx.api_version, request, plan, ctx)


def build_outage_response(
    api_key: int, version: int, request: Any, plan: Plan, ctx: RequestContext | None = None
) -> Any:
    """The error response of `plan` for `request` (api_key/version), as a kio object."""
    cluster_id = None if ctx is None else ctx.broker.cluster_id
    return build_plan_response(api_key, version, request, plan, MESSAGE, cluster_id)


def build_plan_response(
    api_key: int,
    version: int,
    request: Any,
    plan: Plan,
    message: str,
    cluster_id: str | None = None,
) -> Any:
    """The response of `api_key`/`version` with `plan`'s code (and `message` where the
    response has one) in its error fields, echoing `request` by `plan`'s rules."""
    cls = load_response_schema(api_key, version)
    extra = {} if cluster_id is None else {"cluster_id": cluster_id}
    return _entity(
        cls, plan.code, request, plan.echoes, extra, own_error=plan.top_level, message=message
    )


def has_top_level_error(api_key: int, version: int) -> bool:
    """True if the response of `api_key`/`version` has an error code of its own."""
    fields = load_response_schema(api_key, version).__dataclass_fields__
    return any(name in fields for name in _ERROR_FIELDS)


def build_error_response(
    api_key: int, version: int, code: ErrorCode, message: str, cluster_id: str | None = None
) -> Any | None:
    """The response of `api_key`/`version` that carries `code` in its top-level error field
    and nothing else (no request to echo: for requests whose body does not decode), or None
    when that response has no top-level error code."""
    cls = load_response_schema(api_key, version)
    if "error_code" not in cls.__dataclass_fields__:
        return None
    extra = {} if cluster_id is None else {"cluster_id": cluster_id}
    return _entity(cls, code, None, (), extra, message=message)


def _metadata(ctx: RequestContext, request: Any) -> Any:
    """Metadata with nothing from the database: this broker alone, and each requested
    topic LEADER_NOT_AVAILABLE (clients wait and ask again). The handler itself already
    answers from cached topics and brokers when it has them."""
    cls = load_response_schema(ctx.api_key, ctx.api_version)
    m = ctx.schema
    me = ctx.broker.self_info()
    where = {"node_id": me.broker_id, "host": me.host, "port": me.port, "rack": me.rack}
    broker = _entity(m.MetadataResponseBroker, ErrorCode.none, None, (), where)
    topics = tuple(
        _entity(
            m.MetadataResponseTopic,
            ErrorCode.leader_not_available,
            None,
            (),
            {"name": t.name, "topic_id": getattr(t, "topic_id", None), "is_internal": False},
        )
        for t in (request.topics or ())
    )
    fields = {
        "brokers": (broker,),
        "topics": topics,
        "cluster_id": ctx.broker.cluster_id,
        "controller_id": me.broker_id,
        "cluster_authorized_operations": -2147483648,
    }
    return _entity(cls, ErrorCode.none, None, (), fields, own_error=False)


def _log_dirs(ctx: RequestContext, request: Any) -> Any:
    """DescribeLogDirs: its one log dir (the object store) unreadable. Versions 1-2 have no
    top-level error code, so the code goes on the log dir as well."""
    cls = load_response_schema(ctx.api_key, ctx.api_version)
    m = ctx.schema
    code = PLANS[ctx.api_key].code
    result = _entity(m.DescribeLogDirsResult, code, None, (), {"log_dir": "", "topics": ()})
    return _entity(cls, code, None, (), {"results": (result,)})


def _replica_log_dirs(ctx: RequestContext, request: Any) -> Any:
    """AlterReplicaLogDirs: every partition asked for KAFKA_STORAGE_ERROR (the request
    nests partitions under dirs, the response under topics alone)."""
    cls = load_response_schema(ctx.api_key, ctx.api_version)
    m = ctx.schema
    code = PLANS[ctx.api_key].code
    partitions: dict[str, set[int]] = {}
    for d in request.dirs:
        for t in d.topics:
            partitions.setdefault(str(t.name), set()).update(int(p) for p in t.partitions)
    results = tuple(
        _entity(
            m.AlterReplicaLogDirTopicResult,
            code,
            None,
            (),
            {
                "topic_name": name,
                "partitions": tuple(
                    _entity(
                        m.AlterReplicaLogDirPartitionResult,
                        code,
                        None,
                        (),
                        {"partition_index": p},
                    )
                    for p in sorted(ps)
                ),
            },
        )
        for name, ps in partitions.items()
    )
    return _entity(cls, code, None, (), {"results": results})


BUILDERS: dict[int, Callable[[RequestContext, Any], Any]] = {
    3: _metadata,
    34: _replica_log_dirs,
    35: _log_dirs,
}


# -- generic construction from kio classes


def _entity(
    cls: type,
    code: ErrorCode,
    source: Any,
    echoes: tuple[Echo, ...],
    extra: dict[str, Any],
    *,
    own_error: bool = True,
    message: str = MESSAGE,
) -> Any:
    """An instance of kio class `cls`: neutral values, `code` and `message` in its error
    fields (unless `own_error` is false; echoed entries always get them), lists echoed
    from `source`, then `extra` (only the fields `cls` has)."""
    fields = {f.name: _neutral(f) for f in dataclasses.fields(cls)}
    if own_error:
        for name in _ERROR_FIELDS:
            if name in fields:
                fields[name] = code
        if "error_message" in fields:
            fields["error_message"] = message
    for echo in echoes:
        if echo.response not in fields or source is None or not hasattr(source, echo.request):
            continue
        item_cls = _item_class(cls, echo.response)
        fields[echo.response] = tuple(
            _entity(item_cls, code, item, echo.children, _ids(echo, item), message=message)
            for item in getattr(source, echo.request) or ()
        )
    fields.update((k, v) for k, v in extra.items() if k in fields)
    return cls(**fields)


def _ids(echo: Echo, item: Any) -> dict[str, Any]:
    if not echo.ids:
        return {echo.key: item}
    return {rsp: getattr(item, req) for req, rsp in echo.ids if hasattr(item, req)}


def _item_class(cls: type, field_name: str) -> type:
    """The entry class of list field `field_name` (`tuple[X, ...]` or `tuple[X, ...] | None`)."""
    hint = cls.__dataclass_fields__[field_name].type
    for candidate in (hint, *typing.get_args(hint)):
        if typing.get_origin(candidate) is tuple:
            return typing.get_args(candidate)[0]  # type: ignore[no-any-return]
    raise TypeError(f"{cls.__name__}.{field_name} is not a list")


def _neutral(f: dataclasses.Field[Any]) -> Any:
    """What an error response carries in a field nobody asked about."""
    if f.default is not dataclasses.MISSING:
        return f.default
    if f.default_factory is not dataclasses.MISSING:
        return f.default_factory()
    hint = f.type
    args = typing.get_args(hint)
    if any(typing.get_origin(a) is tuple for a in (hint, *args)):
        return ()
    if type(None) in args:
        return None
    kind = f.metadata.get("kafka_type")
    if kind == "error_code":
        return ErrorCode.none
    if kind == "string":
        return ""
    if kind in ("int8", "int16", "int32", "int64"):
        return 0 if f.name in _ZERO_INTS else -1
    if kind == "timedelta_i32":
        return datetime.timedelta(0)
    if kind == "bool":
        return False
    if kind in ("bytes", "records"):
        return b""
    if kind == "uuid":
        return uuid.UUID(int=0)
    if kind == "datetime_i64":
        return datetime.datetime.fromtimestamp(0, tz=datetime.UTC)
    if dataclasses.is_dataclass(hint):
        return _entity(hint, ErrorCode.none, None, (), {}, own_error=False)  # type: ignore[arg-type]
    raise TypeError(f"no neutral value for field {f.name} ({hint})")
