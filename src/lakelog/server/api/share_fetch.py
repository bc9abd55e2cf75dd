"""ShareFetch (78) and ShareAcknowledge (79): records handed out under acquisition locks
and acknowledged record by record (KIP-932).

Any broker serves any share partition: the state is changed under compare-and-set in
the batch coordinator (`lakelog.groups.share.partitions`), so a client may fetch from whichever
broker Metadata names as the partition's leader. Each request makes one coordinator
write; batches are read through the same cache as Fetch and sent whole (the client keeps
the acquired records)."""

from __future__ import annotations

import asyncio
import datetime
import logging
from collections.abc import Mapping, Sequence
from typing import Any
from uuid import UUID

from lakelog.coordinator.topic_types import TopicInfo
from lakelog.groups.share.partitions import (
    AckBatches,
    FetchOutcome,
    ShareKey,
    release_and_ack,
)
from lakelog.groups.share.sessions import FINAL_EPOCH, ShareSession
from lakelog.groups.share.state import RELEASE
from lakelog.log.fetch.batches import served_bytes
from lakelog.security.acl import Operation
from lakelog.server.api import authz
from lakelog.server.api.context import RequestContext, build
from lakelog.server.api.registry import handles
from lakelog.util import metrics
from lakelog.util.errors import ErrorCode

log = logging.getLogger(__name__)

SHARE_FETCH, SHARE_ACKNOWLEDGE = 78, 79
NO_THROTTLE = datetime.timedelta(0)
DEFAULT_MAX_RECORDS = 500
MAX_RECORDS_CAP = 10_000
POLL_S = 1.0
"""A waiting ShareFetch looks again at least this often (locks of other members end)."""
NULL_TOPIC_ID = UUID(int=0)


def _acks_of(partition: Any) -> AckBatches:
    return [
        (int(b.first_offset), int(b.last_offset), [int(t) for t in b.acknowledge_types])
        for b in partition.acknowledgement_batches or ()
    ]


async def _topics_by_id(ctx: RequestContext, ids: Sequence[UUID]) -> dict[UUID, TopicInfo | None]:
    out: dict[UUID, TopicInfo | None] = {}
    for topic_id in ids:
        if topic_id not in out:
            out[topic_id] = await ctx.broker.topics.get_by_id(topic_id)
    return out


def _top_error(ctx: RequestContext, error: ErrorCode, message: str | None = None) -> Any:
    m = ctx.schema
    cls = m.ShareFetchResponse if ctx.api_key == SHARE_FETCH else m.ShareAcknowledgeResponse
    return build(
        cls,
        throttle_time=NO_THROTTLE,
        error_code=error,
        error_message=message,
        acquisition_lock_timeout=datetime.timedelta(0),
        responses=(),
        node_endpoints=(),
    )


def _check_ids(ctx: RequestContext, request: Any) -> tuple[ErrorCode, str | None] | None:
    if not request.group_id:
        return ErrorCode.invalid_request, "GroupId must be set."
    if not request.member_id:
        return ErrorCode.invalid_request, "MemberId must be set."
    if not authz.group_allowed(ctx, request.group_id, Operation.READ):
        return ErrorCode.group_authorization_failed, None
    return None


def _topic_error(ctx: RequestContext, info: TopicInfo | None, index: int) -> ErrorCode | None:
    """Why a partition of a ShareFetch/ShareAcknowledge cannot be served, if it cannot."""
    if info is None:
        return ErrorCode.unknown_topic_id
    if not authz.topic_allowed(ctx, info.name, Operation.READ):
        return ErrorCode.topic_authorization_failed
    if not 0 <= index < info.num_partitions:
        return ErrorCode.unknown_topic_or_partition
    return None


async def _partitions(
    ctx: RequestContext, request: Any
) -> tuple[
    dict[tuple[UUID, int], None], dict[tuple[UUID, int], ErrorCode], list[tuple[UUID, int, Any]]
]:
    """The partitions a ShareFetch/ShareAcknowledge names, in order: all of them (for the
    answer), the refused ones with their error, and the ones to serve with their data."""
    asked = [(t.topic_id or NULL_TOPIC_ID, t) for t in request.topics or ()]
    topics = await _topics_by_id(ctx, [tid for tid, _ in asked])
    shown: dict[tuple[UUID, int], None] = {}
    errors: dict[tuple[UUID, int], ErrorCode] = {}
    served: list[tuple[UUID, int, Any]] = []
    for topic_id, t in asked:
        info = topics[topic_id]
        for p in t.partitions or ():
            index = int(p.partition_index)
            shown[(topic_id, index)] = None
            refused = _topic_error(ctx, info, index)
            if refused is not None:
                errors[(topic_id, index)] = refused
            else:
                served.append((topic_id, index, p))
    return shown, errors, served


@handles(SHARE_FETCH, 1, 1)
async def share_fetch(ctx: RequestContext, request: Any) -> Any:
    problem = _check_ids(ctx, request)
    if problem is not None:
        return _top_error(ctx, *problem)
    share = ctx.broker.share
    group_id, member_id = request.group_id, request.member_id
    epoch = int(request.share_session_epoch)
    error, session = share.sessions.open(group_id, member_id, epoch)
    if error != ErrorCode.none:
        return _top_error(ctx, error)
    config = await ctx.broker.group_configs.effective(group_id)

    shown, errors, served = await _partitions(ctx, request)
    acks: dict[ShareKey, AckBatches] = {}
    for topic_id, index, p in served:
        if session is not None and epoch != FINAL_EPOCH:
            session.partitions[(str(topic_id), index)] = None
        batches = _acks_of(p)
        if batches:
            acks[ShareKey(str(topic_id), index)] = batches
    if session is not None and epoch != FINAL_EPOCH:
        for forgotten in request.forgotten_topics_data or ():
            for index in forgotten.partitions or ():
                session.partitions.pop((str(forgotten.topic_id or NULL_TOPIC_ID), index), None)

    if epoch == FINAL_EPOCH:
        release = [ShareKey(t, p) for t, p in session.partitions] if session else []
        ack_errors = await release_and_ack(
            share.partitions, group_id, member_id, config, acks, release
        )
        outcomes = {k: FetchOutcome(ack_error=e) for k, e in ack_errors.items()}
        _count_acks(group_id, acks, ack_errors)
        return await _answer(ctx, config.share_record_lock_duration_ms, shown, errors, outcomes)

    assert session is not None
    outcomes = await _fetch_loop(ctx, request, session, config, acks)
    return await _answer(ctx, config.share_record_lock_duration_ms, shown, errors, outcomes)


async def _fetch_loop(
    ctx: RequestContext,
    request: Any,
    session: ShareSession,
    config: Any,
    acks: Mapping[ShareKey, AckBatches],
) -> dict[ShareKey, FetchOutcome]:
    """Acquire records of the session's partitions, waiting up to max_wait for some."""
    broker = ctx.broker
    share = broker.share
    group_id, member_id = request.group_id, request.member_id
    loop = asyncio.get_running_loop()
    deadline = loop.time() + max(request.max_wait.total_seconds(), 0)
    max_records = int(request.max_records) if request.max_records > 0 else DEFAULT_MAX_RECORDS
    max_records = min(max_records, MAX_RECORDS_CAP)
    max_bytes = min(max(int(request.max_bytes), 1), broker.settings.fetch_max_bytes)
    pending_acks = dict(acks)
    ack_errors: dict[ShareKey, ErrorCode] = {}
    """Acknowledgements are applied by the first pass only: their answers are kept."""
    outcomes: dict[ShareKey, FetchOutcome] = {}
    while True:
        wanted: list[tuple[TopicInfo, int]] = []
        for topic_text, index in list(session.partitions):
            info = await broker.topics.get_by_id(UUID(topic_text))
            if info is not None and 0 <= index < info.num_partitions:
                wanted.append((info, index))
        since = broker.waiter.snapshot()
        plans = await share.partitions.plan(group_id, wanted, config, max_bytes)
        got = await share.partitions.acquire(
            group_id, member_id, plans, config, max_records, pending_acks
        )
        if pending_acks:
            _count_acks(group_id, pending_acks, {k: o.ack_error for k, o in got.items()})
            if _releases(pending_acks):
                broker.waiter.notify()  # released records: waiting fetches may take them
        for key in pending_acks:
            if key in got:
                ack_errors[key] = got[key].ack_error
        outcomes.update(got)
        pending_acks = {}
        _count_acquired(group_id, got)
        remaining = deadline - loop.time()
        if (
            any(o.acquired or o.error != ErrorCode.none for o in outcomes.values())
            or remaining <= 0
            or broker.stopping
            or not wanted
        ):
            for key, error in ack_errors.items():
                outcomes.setdefault(key, FetchOutcome()).ack_error = error
            return outcomes
        await broker.waiter.wait(min(remaining, POLL_S), since)


def _releases(acks: Mapping[ShareKey, AckBatches]) -> bool:
    return any(t == RELEASE for batches in acks.values() for _, _, types in batches for t in types)


def _count_acquired(group_id: str, got: Mapping[ShareKey, FetchOutcome]) -> None:
    for key, outcome in got.items():
        n = sum(a.last - a.first + 1 for a in outcome.acquired)
        if n:
            metrics.share_records_total.labels(
                group_id, key.topic_id, key.partition, "acquired"
            ).inc(n)


ACK_NAMES = {0: "archived", 1: "acknowledged", 2: "released", 3: "rejected", 4: "renewed"}


def _count_acks(
    group_id: str, acks: Mapping[ShareKey, AckBatches], errors: Mapping[ShareKey, ErrorCode]
) -> None:
    for key, batches in acks.items():
        if errors.get(key, ErrorCode.none) != ErrorCode.none:
            continue
        for first, last, types in batches:
            for offset in range(first, last + 1):
                kind = types[0] if len(types) == 1 else types[offset - first]
                metrics.share_records_total.labels(
                    group_id, key.topic_id, key.partition, ACK_NAMES.get(kind, "other")
                ).inc()


async def _answer(
    ctx: RequestContext,
    lock_ms: int,
    shown: Mapping[tuple[UUID, int], None],
    errors: Mapping[tuple[UUID, int], ErrorCode],
    outcomes: Mapping[ShareKey, FetchOutcome],
) -> Any:
    m = ctx.schema
    wanted = [c for o in outcomes.values() for c in o.batches]
    datas = await ctx.broker.reader.read(wanted) if wanted else []
    data_of = {
        (c.object_key, c.byte_offset, c.base_offset): d for c, d in zip(wanted, datas, strict=True)
    }
    rows: dict[UUID, list[Any]] = {}
    keys: dict[tuple[UUID, int], None] = dict(shown)
    for key, outcome in outcomes.items():
        if outcome.acquired or outcome.error != ErrorCode.none:
            keys[(UUID(key.topic_id), key.partition)] = None
    total = 0
    for topic_id, index in keys:
        outcome = outcomes.get(ShareKey(str(topic_id), index))
        error = errors.get((topic_id, index), ErrorCode.none)
        records = b""
        acquired: tuple[Any, ...] = ()
        ack_error = ErrorCode.none
        if outcome is not None:
            if error == ErrorCode.none:
                error = outcome.error
            ack_error = outcome.ack_error
            if outcome.acquired and outcome.batches:
                records = b"".join(
                    served_bytes(c, data_of[(c.object_key, c.byte_offset, c.base_offset)])
                    for c in outcome.batches
                )
                total += len(records)
                acquired = tuple(
                    build(
                        m.AcquiredRecords,
                        first_offset=a.first,
                        last_offset=a.last,
                        delivery_count=a.count,
                    )
                    for a in outcome.acquired
                )
        if ctx.api_key == SHARE_FETCH:
            part = build(
                m.PartitionData,
                partition_index=index,
                error_code=error,
                error_message=None,
                acknowledge_error_code=ack_error,
                acknowledge_error_message=None,
                current_leader=build(m.LeaderIdAndEpoch, leader_id=-1, leader_epoch=-1),
                records=records,
                acquired_records=acquired,
            )
        else:
            part = build(
                m.PartitionData,
                partition_index=index,
                error_code=error if error != ErrorCode.none else ack_error,
                error_message=None,
                current_leader=build(m.LeaderIdAndEpoch, leader_id=-1, leader_epoch=-1),
            )
        rows.setdefault(topic_id, []).append(part)
    if total:
        metrics.bytes_out_total.inc(total)
    topic_cls = (
        m.ShareFetchableTopicResponse
        if ctx.api_key == SHARE_FETCH
        else m.ShareAcknowledgeTopicResponse
    )
    responses = tuple(
        build(topic_cls, topic_id=topic_id, partitions=tuple(parts))
        for topic_id, parts in rows.items()
    )
    cls = m.ShareFetchResponse if ctx.api_key == SHARE_FETCH else m.ShareAcknowledgeResponse
    return build(
        cls,
        throttle_time=NO_THROTTLE,
        error_code=ErrorCode.none,
        error_message=None,
        acquisition_lock_timeout=datetime.timedelta(milliseconds=lock_ms),
        responses=responses,
        node_endpoints=(),
    )


@handles(SHARE_ACKNOWLEDGE, 1, 1)
async def share_acknowledge(ctx: RequestContext, request: Any) -> Any:
    problem = _check_ids(ctx, request)
    if problem is not None:
        return _top_error(ctx, *problem)
    share = ctx.broker.share
    group_id, member_id = request.group_id, request.member_id
    epoch = int(request.share_session_epoch)
    error, session = share.sessions.open(group_id, member_id, epoch, acknowledge_only=True)
    if error != ErrorCode.none:
        return _top_error(ctx, error)
    config = await ctx.broker.group_configs.effective(group_id)
    shown, errors, served = await _partitions(ctx, request)
    acks = {ShareKey(str(topic_id), index): _acks_of(p) for topic_id, index, p in served}
    release: list[ShareKey] = []
    if epoch == FINAL_EPOCH and session is not None:
        release = [ShareKey(t, p) for t, p in session.partitions]
    ack_errors = await release_and_ack(share.partitions, group_id, member_id, config, acks, release)
    _count_acks(group_id, acks, ack_errors)
    if _releases(acks):
        ctx.broker.waiter.notify()
    outcomes = {k: FetchOutcome(ack_error=e) for k, e in ack_errors.items()}
    return await _answer(ctx, config.share_record_lock_duration_ms, shown, errors, outcomes)
