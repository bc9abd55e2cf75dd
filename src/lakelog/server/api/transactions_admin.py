"""Transaction admin APIs (KIP-664): DescribeTransactions, ListTransactions and
DescribeProducers, answered from the batch coordinator by any broker.

ListTransactions lists only the transactional ids this broker coordinates (the same
placement as FindCoordinator), because admin clients ask every broker and concatenate the
answers, as they do for Kafka's sharded transaction log.
"""

from __future__ import annotations

import datetime
import time
from typing import Any

from lakelog.coordinator.log_types import PartitionKey
from lakelog.coordinator.txn_types import TransactionInfo
from lakelog.groups.coordinator import owner_of
from lakelog.security.acl import Operation
from lakelog.server.api import authz
from lakelog.server.api.context import RequestContext, build
from lakelog.server.api.registry import handles
from lakelog.server.txn.listing import InvalidPattern, make_filter, matches, unknown_states
from lakelog.util.errors import ErrorCode
from lakelog.util.pacing import paced

DESCRIBE_PRODUCERS, DESCRIBE_TRANSACTIONS, LIST_TRANSACTIONS = 61, 65, 66
NO_THROTTLE = datetime.timedelta(0)
NO_COORDINATOR_EPOCH = -1
"""DescribeProducers' coordinator epoch: markers here are coordinator rows, not records
written by a coordinator generation."""


def _datetime(ms: int) -> datetime.datetime:
    """kio writes datetimes as ms; -1 (no transaction running) round-trips as -1."""
    return datetime.datetime.fromtimestamp(ms / 1000, tz=datetime.UTC)


async def _topics_of(ctx: RequestContext, info: TransactionInfo) -> list[tuple[str, list[int]]]:
    by_name: dict[str, list[int]] = {}
    for key in info.partitions:
        topic = await ctx.broker.topics.get_by_id(key.topic_id)
        if topic is not None:  # a topic deleted since it joined the transaction
            by_name.setdefault(topic.name, []).append(key.partition)
    return [(name, sorted(ps)) for name, ps in sorted(by_name.items())]


@handles(DESCRIBE_TRANSACTIONS, 0, 0)
async def describe_transactions(ctx: RequestContext, request: Any) -> Any:
    m = ctx.schema
    ids = list(request.transactional_ids)
    infos = await ctx.broker.coordinator.describe_transactions(ids) if ids else []
    states = []
    async for transactional_id, info in paced(zip(ids, infos, strict=True)):
        refused = not authz.txn_allowed(ctx, transactional_id, Operation.DESCRIBE)
        if info is None or refused:
            states.append(
                build(
                    m.TransactionState,
                    error_code=ErrorCode.transactional_id_authorization_failed
                    if refused
                    else ErrorCode.transactional_id_not_found,
                    transactional_id=transactional_id,
                    transaction_state="",
                    transaction_timeout=NO_THROTTLE,
                    transaction_start_time=_datetime(-1),
                    producer_id=-1,
                    producer_epoch=-1,
                    topics=(),
                )
            )
            continue
        topics = await _topics_of(ctx, info)
        if authz.enabled(ctx):  # Kafka leaves out the topics the caller may not describe
            visible = authz.topics_allowed(ctx, (n for n, _ in topics), Operation.DESCRIBE)
            topics = [(n, ps) for n, ps in topics if n in visible]
        states.append(
            build(
                m.TransactionState,
                error_code=ErrorCode.none,
                transactional_id=transactional_id,
                transaction_state=str(info.state),
                transaction_timeout=datetime.timedelta(milliseconds=info.timeout_ms),
                transaction_start_time=_datetime(info.start_time_ms),
                producer_id=info.producer_id,
                producer_epoch=info.producer_epoch,
                topics=tuple(build(m.TopicData, topic=n, partitions=tuple(ps)) for n, ps in topics),
            )
        )
    return build(
        m.DescribeTransactionsResponse, throttle_time=NO_THROTTLE, transaction_states=tuple(states)
    )


@handles(LIST_TRANSACTIONS, 0, 2)
async def list_transactions(ctx: RequestContext, request: Any) -> Any:
    m = ctx.schema
    requested_states = list(request.state_filters)

    def answer(error: ErrorCode, listed: list[TransactionInfo]) -> Any:
        return build(
            m.ListTransactionsResponse,
            throttle_time=NO_THROTTLE,
            error_code=error,
            unknown_state_filters=tuple(unknown_states(requested_states)),
            transaction_states=tuple(
                build(
                    m.TransactionState,
                    transactional_id=i.transactional_id,
                    producer_id=i.producer_id,
                    transaction_state=str(i.state),
                )
                for i in listed
            ),
        )

    try:
        flt = make_filter(
            requested_states,
            [int(p) for p in request.producer_id_filters],
            int(getattr(request, "duration_filter", -1)),
            getattr(request, "transactional_id_pattern", None),
        )
    except InvalidPattern:
        return answer(ErrorCode.invalid_regular_expression, [])
    brokers = await ctx.broker.live_brokers()
    me = ctx.broker.broker_id
    now = int(time.time() * 1000)
    listed = [
        info
        for info in await ctx.broker.coordinator.list_transactions()
        if owner_of(info.transactional_id, brokers).broker_id == me and matches(info, flt, now)
    ]
    if authz.enabled(ctx):  # Kafka lists only the ids the caller may describe
        listed = [
            i for i in listed if authz.txn_allowed(ctx, i.transactional_id, Operation.DESCRIBE)
        ]
    return answer(ErrorCode.none, listed)


@handles(DESCRIBE_PRODUCERS, 0, 0)
async def describe_producers(ctx: RequestContext, request: Any) -> Any:
    """Every broker can describe every partition (there are no leaders to ask)."""
    m = ctx.schema
    wanted: list[tuple[str, int, PartitionKey | None]] = []
    refused: set[str] = set()
    for t in request.topics:
        if not authz.topic_allowed(ctx, t.name, Operation.READ):
            refused.add(t.name)
        topic = None if t.name in refused else await ctx.broker.topics.get(t.name)
        for p in t.partition_indexes:
            known = topic is not None and 0 <= p < topic.num_partitions
            wanted.append((t.name, int(p), PartitionKey(topic.topic_id, p) if known else None))
    keys = [key for _, _, key in wanted if key is not None]
    found = iter(await ctx.broker.coordinator.describe_producers(keys) if keys else [])
    by_topic: dict[str, list[Any]] = {}
    for name, p, key in wanted:
        if name in refused:
            error, producers = ErrorCode.topic_authorization_failed, ()
        elif key is None:
            error, producers = ErrorCode.unknown_topic_or_partition, ()
        else:
            result = next(found)
            error, producers = result.error, result.producers
        by_topic.setdefault(name, []).append(
            build(
                m.PartitionResponse,
                partition_index=p,
                error_code=error,
                error_message=None,
                active_producers=tuple(
                    build(
                        m.ProducerState,
                        producer_id=s.producer_id,
                        producer_epoch=s.producer_epoch,
                        last_sequence=s.last_sequence,
                        last_timestamp=s.last_timestamp,
                        coordinator_epoch=NO_COORDINATOR_EPOCH,
                        current_txn_start_offset=s.current_txn_start_offset,
                    )
                    for s in producers
                ),
            )
        )
    return build(
        m.DescribeProducersResponse,
        throttle_time=NO_THROTTLE,
        topics=tuple(
            build(m.TopicResponse, name=name, partitions=tuple(parts))
            for name, parts in by_topic.items()
        ),
    )
