"""Metadata and FindCoordinator: which brokers serve what.

A diskless partition has no leader of its own: every live broker can serve it, so the
"leader" is a stable pick among live brokers and the replica list is all of them.

A known topic's entry depends only on the API version, the brokers the client sees and the
topic itself, so its encoded bytes are kept (`EncodedTopics`) and the answer is spliced
from them: Metadata for all of 20,000 partitions took 0.3-0.8 s of the event loop to build
and encode each time, now that is paid once per topic and view.
"""

from __future__ import annotations

import dataclasses
import datetime
import io
import logging
import struct
from collections import OrderedDict
from collections.abc import Sequence
from typing import Any
from uuid import UUID

from lakelog.coordinator.topic_types import BrokerInfo, CreateTopicRequest, TopicInfo
from lakelog.log.protocol.frames import api_schema
from lakelog.security.acl import CLUSTER_NAME, Operation, ResourceType
from lakelog.server.api import authz
from lakelog.server.api.admin import (
    OPERATIONS_NOT_REQUESTED,
    TOPIC_AUTHORIZED_OPERATIONS,
    ClusterBudget,
)
from lakelog.server.api.context import RequestContext, build
from lakelog.server.api.encoded import compact_length, encode_entity
from lakelog.server.api.raw import RawResponse
from lakelog.server.api.registry import handles
from lakelog.server.cluster.outage import RateLimitedLog, is_outage
from lakelog.server.cluster.zones import client_zone, partition_broker
from lakelog.server.internal_topics import (
    INTERNAL_TOPICS,
    internal_topic,
    internal_topic_by_id,
    is_internal,
)
from lakelog.server.topics import topic_name_error
from lakelog.util.errors import ErrorCode

log = logging.getLogger(__name__)
_capped = RateLimitedLog(log)

METADATA_KEY = 3
FIND_COORDINATOR_KEY = 10
GROUP_KEY_TYPE, TRANSACTION_KEY_TYPE, SHARE_KEY_TYPE = 0, 1, 2
SHARE_KEYS_FROM_VERSION = 6
"""FindCoordinator v6 adds share-state keys (KIP-932); v5 only lets the broker answer
TRANSACTION_ABORTABLE (KIP-890), which this broker has no cause to."""
LEADER_EPOCH = 0


class EncodedTopics:
    """Encoded MetadataResponseTopic entries of known topics, by view: (API version, ids of
    the brokers the client sees, whether topic authorized operations were asked for). A
    topic's key holds all it depends on (id, name, partition count), so a changed topic is
    a new entry. Memory: about one Metadata answer
    per view; views beyond MAX_VIEWS are dropped oldest first, and a view holding more than
    twice the topics there are is emptied (deleted topics leave entries behind)."""

    MAX_VIEWS = 8

    def __init__(self) -> None:
        self._views: OrderedDict[
            tuple[int, tuple[int, ...], bool], dict[tuple[UUID, str, int], bytes]
        ] = OrderedDict()

    def view(
        self,
        version: int,
        broker_ids: tuple[int, ...],
        topic_count: int,
        with_operations: bool = False,
    ) -> dict[tuple[UUID, str, int], bytes]:
        key = (version, broker_ids, with_operations)
        view = self._views.get(key)
        if view is None:
            view = self._views[key] = {}
            while len(self._views) > self.MAX_VIEWS:
                self._views.popitem(last=False)
        else:
            self._views.move_to_end(key)
            if len(view) > 2 * topic_count + 100:
                view.clear()
        return view


ENCODED_TOPICS = EncodedTopics()


def splice_topics(version: int, response: Any, topics: list[bytes]) -> RawResponse:
    """The body of `response` (built with no topics) with the encoded `topics` in place of
    its empty topics array: only fields of versions 8-10 (cluster_authorized_operations),
    13 (error_code) and the flexible versions' tagged fields follow the array."""
    schema = api_schema(METADATA_KEY, version)
    assert schema is not None
    out = io.BytesIO()
    schema.write_response(out, response)
    body = out.getvalue()
    flexible = bool(schema.flexible)
    after = (4 if 8 <= version <= 10 else 0) + (2 if version >= 13 else 0) + int(flexible)
    empty = 1 if flexible else 4
    at = len(body) - after - empty
    count = compact_length(len(topics)) if flexible else struct.pack(">i", len(topics))
    return RawResponse([b"".join([body[:at], count, *topics, body[at + empty :]])])


async def _auto_create(ctx: RequestContext, names: list[str]) -> None:
    """Create the legal names among `names` with the default partition count, as far as
    the partition caps allow (`max_partitions_per_topic`, `max_partitions_per_request`,
    `max_partitions`): the names left over stay unknown, as with auto-creation off."""
    settings = ctx.broker.settings
    count = settings.num_partitions
    legal = [name for name in dict.fromkeys(names) if topic_name_error(name) is None]
    room = len(legal)
    if count > settings.max_partitions_per_topic:
        room = 0
    elif count > 0:
        room = min(room, settings.max_partitions_per_request // count)
        budget = ClusterBudget(
            sum(t.num_partitions for t in await ctx.broker.topics.all()), settings
        )
        room = min(room, max(0, budget.limit - budget.existing) // count)
    if room < len(legal):
        _capped.warning(
            "auto-creating %d of %d topics asked for: the partition limits "
            "(max_partitions_per_topic, max_partitions_per_request, max_partitions) hold the rest",
            room,
            len(legal),
        )
    requests = [
        CreateTopicRequest(name, count, settings.default_replication_factor)
        for name in legal[:room]
    ]
    if requests:
        results = await ctx.broker.coordinator.create_topics(requests)
        created = [r.name for r in results if r.error == ErrorCode.none]
        if created:
            log.info("auto-created topics %s", created)
        ctx.broker.topics.invalidate()


def _requested_names(ctx: RequestContext, request: Any) -> list[str | None] | None:
    """Names asked for, or None for all topics."""
    if request.topics is None:
        return None
    if ctx.api_version == 0 and not request.topics:
        return None
    return [t.name for t in request.topics]


def partition_entries(
    cls: type,
    brokers: Sequence[BrokerInfo],
    broker_ids: tuple[int, ...],
    topic_id: UUID,
    indexes: range,
    **extra: Any,
) -> tuple[Any, ...]:
    """A topic's partitions as Metadata and DescribeTopicPartitions both describe them: the
    computed leader, every live broker a replica and in sync, none offline."""
    return tuple(
        build(
            cls,
            error_code=ErrorCode.none,
            partition_index=p,
            leader_id=partition_broker(brokers, topic_id, p),
            leader_epoch=LEADER_EPOCH,
            replica_nodes=broker_ids,
            isr_nodes=broker_ids,
            offline_replicas=(),
            **extra,
        )
        for p in indexes
    )


def named_brokers(
    serving: Sequence[BrokerInfo],
    live: Sequence[BrokerInfo],
    fenced_lately: Sequence[BrokerInfo],
) -> list[BrokerInfo]:
    """The brokers a Metadata response names: those serving the client first, then every
    other live broker, then brokers fenced lately.

    Naming the other zones' brokers (leading nothing for this client) is what lets a zone
    client find them once its zone's brokers die: clients ask only brokers Metadata named
    (librdkafka >= 2.10 drops its bootstrap servers after the first answer), and a
    re-bootstrap answered before the survivors suspect the dead broker would name it alone
    again. Suspected and lately fenced brokers stay named so a client's requests in flight
    there are not resent elsewhere (`Broker.fenced_lately`)."""
    named = list(serving)
    seen = {b.broker_id for b in named}
    for b in [*live, *fenced_lately]:
        if b.broker_id not in seen:
            seen.add(b.broker_id)
            named.append(b)
    return named


@handles(METADATA_KEY, 0, 13)
async def metadata(ctx: RequestContext, request: Any) -> Any:
    m = ctx.schema
    broker = ctx.broker
    topics_cache = broker.topics
    wanted = _requested_names(ctx, request)
    by_id: dict[Any, TopicInfo] = {}
    creating: set[str] = set()
    if wanted is not None and ctx.api_version >= 10:
        ids = [t.topic_id for t in request.topics if getattr(t, "topic_id", None)]
        for topic_id in ids:
            found = await topics_cache.get_by_id(topic_id) or internal_topic_by_id(topic_id)
            if found is not None:
                by_id[topic_id] = found
    checking = broker.authorizer.enabled
    refused: set[str] = set()
    if wanted is not None and checking:
        names = {n for n in wanted if n is not None}
        described = authz.topics_allowed(ctx, names, Operation.DESCRIBE)
        refused = names - described
    if wanted is not None:
        missing = [
            n
            for n in wanted
            if n is not None
            and n not in refused
            and not is_internal(n)
            and await topics_cache.get(n) is None
        ]
        allow = getattr(request, "allow_auto_topic_creation", True)
        if checking and missing and allow and broker.settings.auto_create_topics_enable:
            # Kafka: an unknown topic the caller may not create is refused, not created.
            uncreatable = {n for n in missing if not authz.may_create_topic(ctx, n)}
            refused |= uncreatable
            missing = [n for n in missing if n not in uncreatable]
        if missing and allow and broker.settings.auto_create_topics_enable:
            try:
                await _auto_create(ctx, missing)
            except Exception as exc:
                if not is_outage(exc):
                    raise
                # As Kafka answers a topic being created: LEADER_NOT_AVAILABLE, and the
                # client asks again (the database is down; the others still answer).
                creating = set(missing)

    all_brokers = await broker.live_brokers()
    # A client in a zone is led only to that zone's brokers, so no record byte crosses
    # zones; brokers that look gone lead nothing, for any client (`Broker.serving`).
    zone = client_zone(ctx.client_id)
    brokers = broker.serving(all_brokers, zone)
    broker_ids = tuple(sorted(b.broker_id for b in brokers))
    named = named_brokers(brokers, all_brokers, broker.fenced_lately())

    with_operations = bool(getattr(request, "include_topic_authorized_operations", False))
    topic_operations = TOPIC_AUTHORIZED_OPERATIONS if with_operations else OPERATIONS_NOT_REQUESTED

    def describe(name: str | None, topic: TopicInfo | None, topic_id: Any = None) -> Any:
        if topic is None:
            error = (
                ErrorCode.invalid_topic_exception
                if name is not None and topic_name_error(name)
                else ErrorCode.leader_not_available
                if name in creating
                else ErrorCode.unknown_topic_or_partition
            )
            return build(
                m.MetadataResponseTopic,
                error_code=error,
                name=name,
                topic_id=topic_id,
                is_internal=False,
                partitions=(),
                topic_authorized_operations=OPERATIONS_NOT_REQUESTED,
            )
        partitions = partition_entries(
            m.MetadataResponsePartition,
            brokers,
            broker_ids,
            topic.topic_id,
            range(topic.num_partitions),
        )
        return build(
            m.MetadataResponseTopic,
            error_code=ErrorCode.none,
            name=topic.name,
            topic_id=topic.topic_id,
            is_internal=is_internal(topic.name),
            partitions=partitions,
            topic_authorized_operations=topic_operations,
        )

    known = await topics_cache.all()
    encoded = ENCODED_TOPICS.view(ctx.api_version, broker_ids, len(known), with_operations)
    per_caller = checking and with_operations  # authorized operations differ by principal

    def refused_entry(name: str | None, topic_id: Any = None) -> bytes:
        return encode_entity(
            m.MetadataResponseTopic,
            build(
                m.MetadataResponseTopic,
                error_code=ErrorCode.topic_authorization_failed,
                name=name,
                topic_id=topic_id,
                is_internal=False,
                partitions=(),
                topic_authorized_operations=OPERATIONS_NOT_REQUESTED,
            ),
        )

    def entry(name: str | None, topic: TopicInfo | None, topic_id: Any = None) -> bytes:
        if name is not None and name in refused:
            return refused_entry(name, topic_id)
        if topic is None:
            return encode_entity(m.MetadataResponseTopic, describe(name, None, topic_id))
        if per_caller:
            described = describe(name, topic)
            ops = authz.operations(ctx, ResourceType.TOPIC, topic.name)
            return encode_entity(
                m.MetadataResponseTopic,
                dataclasses.replace(described, topic_authorized_operations=ops),
            )
        key = (topic.topic_id, topic.name, topic.num_partitions)
        data = encoded.get(key)
        if data is None:
            data = encoded[key] = encode_entity(m.MetadataResponseTopic, describe(name, topic))
        return data

    if wanted is None:
        listed = sorted([*known, *INTERNAL_TOPICS.values()], key=lambda t: t.name)
        if checking:  # topics the caller may not describe are left out of a full list
            allowed = authz.topics_allowed(ctx, (t.name for t in listed), Operation.DESCRIBE)
            listed = [t for t in listed if t.name in allowed]
        topics = [entry(t.name, t) for t in listed]
    else:
        topics = []
        for requested in request.topics:
            name = requested.name
            if name is None and ctx.api_version >= 10 and requested.topic_id in by_id:
                topic = by_id[requested.topic_id]
                if checking and not authz.topic_allowed(ctx, topic.name, Operation.DESCRIBE):
                    topics.append(refused_entry(None, topic.topic_id))
                else:
                    topics.append(entry(topic.name, topic))
            elif name is None:
                topics.append(entry(None, None, requested.topic_id))
            else:
                topics.append(entry(name, await topics_cache.get(name) or internal_topic(name)))

    response = build(
        m.MetadataResponse,
        throttle_time=datetime.timedelta(0),
        brokers=tuple(
            build(
                m.MetadataResponseBroker, node_id=b.broker_id, host=b.host, port=b.port, rack=b.rack
            )
            for b in named
        ),
        cluster_id=broker.cluster_id,
        controller_id=min(b.broker_id for b in all_brokers),
        topics=(),
        cluster_authorized_operations=(
            authz.operations(ctx, ResourceType.CLUSTER, CLUSTER_NAME)
            if getattr(request, "include_cluster_authorized_operations", False)
            else OPERATIONS_NOT_REQUESTED
        ),
        error_code=ErrorCode.none,
    )
    return splice_topics(ctx.api_version, response, topics)


@handles(FIND_COORDINATOR_KEY, 0, 6)
async def find_coordinator(ctx: RequestContext, request: Any) -> Any:
    """Groups and transactional ids are coordinated by one live broker, picked by a stable
    hash of the key (`lakelog.groups.coordinator.owner_of`). Transaction state lives in the
    batch coordinator, so any broker would serve a transactional id; the hash only spreads
    the clients. A share-state key (`group:topicId:partition`, v6) goes to its group's
    coordinator: share state lives in the batch coordinator too."""
    m = ctx.schema
    keys = request.coordinator_keys if ctx.api_version >= 4 else (request.key,)
    key_type = getattr(request, "key_type", GROUP_KEY_TYPE)
    known = (GROUP_KEY_TYPE, TRANSACTION_KEY_TYPE)
    if ctx.api_version >= SHARE_KEYS_FROM_VERSION:
        known += (SHARE_KEY_TYPE,)
    if key_type not in known:
        return _unknown_key_type(ctx, keys, key_type)
    refused, error = _refused_keys(ctx, keys, key_type)
    if refused and (ctx.api_version < 4 or len(refused) == len(keys)):
        return _key_errors(ctx, keys, error, None)
    answers = []
    for key in keys:
        if key in refused:
            answers.append((key, None, error))
        elif key_type == SHARE_KEY_TYPE and (group := share_key_group(key)) is None:
            answers.append((key, None, ErrorCode.invalid_request))
        else:
            target = group if key_type == SHARE_KEY_TYPE else key
            answers.append((key, await ctx.broker.groups.coordinator_for(target), ErrorCode.none))
    if ctx.api_version >= 4:
        coordinators = tuple(
            build(
                m.Coordinator,
                key=key,
                node_id=o.broker_id if o else -1,
                host=o.host if o else "",
                port=o.port if o else -1,
                error_code=code,
                error_message=None,
            )
            for key, o, code in answers
        )
        return build(
            m.FindCoordinatorResponse,
            throttle_time=datetime.timedelta(0),
            coordinators=coordinators,
        )
    _, owner, _ = answers[0]
    assert owner is not None
    return build(
        m.FindCoordinatorResponse,
        throttle_time=datetime.timedelta(0),
        error_code=ErrorCode.none,
        error_message=None,
        node_id=owner.broker_id,
        host=owner.host,
        port=owner.port,
    )


def _refused_keys(ctx: RequestContext, keys: Any, key_type: int) -> tuple[set[str], ErrorCode]:
    """The keys the caller may not DESCRIBE (a group or a transactional id), and the error
    Kafka answers them with."""
    if key_type == GROUP_KEY_TYPE:
        error = ErrorCode.group_authorization_failed
        if not authz.enabled(ctx):
            return set(), error
        return {k for k in keys if not authz.group_allowed(ctx, k, Operation.DESCRIBE)}, error
    if key_type == SHARE_KEY_TYPE:  # Kafka asks brokers for CLUSTER_ACTION here
        error = ErrorCode.cluster_authorization_failed
        if not authz.enabled(ctx) or authz.allowed(
            ctx, ResourceType.CLUSTER, CLUSTER_NAME, Operation.CLUSTER_ACTION
        ):
            return set(), error
        return set(keys), error
    error = ErrorCode.transactional_id_authorization_failed
    if not authz.enabled(ctx):
        return set(), error
    return {k for k in keys if not authz.txn_allowed(ctx, k, Operation.DESCRIBE)}, error


def share_key_group(key: str) -> str | None:
    """The group of a share-state key `group:topicId:partition` (KIP-932), None when the key
    is not of that form."""
    parts = key.rsplit(":", 2)
    if len(parts) != 3 or not parts[0] or not parts[1] or not parts[2].isdigit():
        return None
    return parts[0]


def _unknown_key_type(ctx: RequestContext, keys: Any, key_type: int) -> Any:
    """INVALID_REQUEST for key types this version does not know (share-state keys before
    v6, anything past them)."""
    return _key_errors(
        ctx, keys, ErrorCode.invalid_request, f"unsupported coordinator key type {key_type}"
    )


def _key_errors(ctx: RequestContext, keys: Any, error: ErrorCode, message: str | None) -> Any:
    """Every key answered with `error`."""
    m = ctx.schema
    if ctx.api_version >= 4:
        return build(
            m.FindCoordinatorResponse,
            throttle_time=datetime.timedelta(0),
            coordinators=tuple(
                build(
                    m.Coordinator,
                    key=key,
                    node_id=-1,
                    host="",
                    port=-1,
                    error_code=error,
                    error_message=message,
                )
                for key in keys
            ),
        )
    return build(
        m.FindCoordinatorResponse,
        throttle_time=datetime.timedelta(0),
        error_code=error,
        error_message=message,
        node_id=-1,
        host="",
        port=-1,
    )
