"""The transactional producer's APIs (KIP-98): AddPartitionsToTxn (v0-3 from clients, the
v4+ batched broker form with verify_only), AddOffsetsToTxn, TxnOffsetCommit and EndTxn.

Transaction state lives in the batch coordinator and every change is one coordinator call,
so any broker serves any transactional id: these handlers never answer NOT_COORDINATOR.
TxnOffsetCommit is the exception: it goes to the group's coordinator (as in Kafka), which
checks the consumer's generation against the live group.
"""

from __future__ import annotations

import asyncio
import datetime
import time
from typing import Any

from lakelog.coordinator.group_types import OffsetCommit
from lakelog.coordinator.log_types import PartitionKey
from lakelog.coordinator.txn_types import TxnOffsetCommitRequest, TxnRef
from lakelog.security.acl import Operation
from lakelog.server.api import authz
from lakelog.server.api.consumer_groups import consumer_group_of
from lakelog.server.api.context import RequestContext, build
from lakelog.server.api.registry import handles
from lakelog.server.txn.group_check import check_txn_commit
from lakelog.server.txn.wire_errors import (
    ADD_OFFSETS_TO_TXN,
    ADD_PARTITIONS_TO_TXN,
    END_TXN,
    TXN_OFFSET_COMMIT,
    for_version,
)
from lakelog.util import metrics
from lakelog.util.errors import ErrorCode

NO_THROTTLE = datetime.timedelta(0)
FIRST_BATCHED_VERSION = 4
"""AddPartitionsToTxn v4+: several transactions per request, sent by brokers."""

TopicPartitions = list[tuple[str, list[int]]]
TopicCodes = list[tuple[str, list[tuple[int, ErrorCode]]]]


def _now_ms() -> int:
    return int(time.time() * 1000)


def _ref(transactional_id: str | None, producer_id: int, producer_epoch: int) -> TxnRef | None:
    """None when the request names no transactional id (Kafka: INVALID_REQUEST)."""
    if not transactional_id:
        return None
    return TxnRef(transactional_id, int(producer_id), int(producer_epoch))


# ---------------------------------------------------------------- AddPartitionsToTxn


async def _add_partitions(
    ctx: RequestContext, txn: TxnRef | None, topics: TopicPartitions, verify_only: bool
) -> TopicCodes:
    """One error per requested partition, in request order. Unknown topics or partitions
    fail alone and leave the others OPERATION_NOT_ATTEMPTED (nothing is added)."""
    resolved: list[tuple[str, int, PartitionKey | None]] = []
    for name, partitions in topics:
        topic = await ctx.broker.topics.get(name)
        for p in partitions:
            known = topic is not None and 0 <= p < topic.num_partitions
            resolved.append((name, p, PartitionKey(topic.topic_id, p) if known else None))
    codes: dict[tuple[str, int], ErrorCode] = {}
    unwritable = {n for n, _ in topics} - authz.topics_allowed(
        ctx, (n for n, _ in topics), Operation.WRITE
    )
    if txn is None:
        codes = {(n, p): ErrorCode.invalid_request for n, p, _ in resolved}
    elif not authz.txn_allowed(ctx, txn.transactional_id, Operation.WRITE):
        codes = {(n, p): ErrorCode.transactional_id_authorization_failed for n, p, _ in resolved}
    elif unwritable:
        for n, p, _ in resolved:
            codes[(n, p)] = (
                ErrorCode.topic_authorization_failed
                if n in unwritable
                else ErrorCode.operation_not_attempted
            )
    elif any(key is None for _, _, key in resolved):
        for n, p, key in resolved:
            codes[(n, p)] = (
                ErrorCode.unknown_topic_or_partition
                if key is None
                else ErrorCode.operation_not_attempted
            )
    elif resolved:
        keys = list(dict.fromkeys(key for _, _, key in resolved if key is not None))
        answers = await ctx.broker.coordinator.add_partitions_to_txn(
            txn, keys, _now_ms(), verify_only
        )
        by_key = dict(zip(keys, answers, strict=True))
        codes = {(n, p): by_key[key] for n, p, key in resolved if key is not None}
    return [
        (
            name,
            [
                (p, for_version(codes[(name, p)], ADD_PARTITIONS_TO_TXN, ctx.api_version))
                for p in ps
            ],
        )
        for name, ps in topics
    ]


def _topic_results(m: Any, results: TopicCodes) -> tuple[Any, ...]:
    return tuple(
        build(
            m.AddPartitionsToTxnTopicResult,
            name=name,
            results_by_partition=tuple(
                build(
                    m.AddPartitionsToTxnPartitionResult, partition_index=p, partition_error_code=e
                )
                for p, e in codes
            ),
        )
        for name, codes in results
    )


def _requested(topics: Any) -> TopicPartitions:
    return [(t.name, [int(p) for p in t.partitions]) for t in topics or ()]


@handles(ADD_PARTITIONS_TO_TXN, 0, 5)
async def add_partitions_to_txn(ctx: RequestContext, request: Any) -> Any:
    m = ctx.schema
    if ctx.api_version < FIRST_BATCHED_VERSION:
        txn = _ref(
            request.v3_and_below_transactional_id,
            request.v3_and_below_producer_id,
            request.v3_and_below_producer_epoch,
        )
        results = await _add_partitions(
            ctx, txn, _requested(request.v3_and_below_topics), verify_only=False
        )
        return build(
            m.AddPartitionsToTxnResponse,
            throttle_time=NO_THROTTLE,
            results_by_topic_v3_and_below=_topic_results(m, results),
        )
    per_txn = []
    for t in request.transactions:
        txn = _ref(t.transactional_id, t.producer_id, t.producer_epoch)
        results = await _add_partitions(ctx, txn, _requested(t.topics), bool(t.verify_only))
        per_txn.append(
            build(
                m.AddPartitionsToTxnResult,
                transactional_id=t.transactional_id,
                topic_results=_topic_results(m, results),
            )
        )
    return build(
        m.AddPartitionsToTxnResponse,
        throttle_time=NO_THROTTLE,
        error_code=ErrorCode.none,
        results_by_transaction=tuple(per_txn),
    )


# ---------------------------------------------------------------- AddOffsetsToTxn


@handles(ADD_OFFSETS_TO_TXN, 0, 4)
async def add_offsets_to_txn(ctx: RequestContext, request: Any) -> Any:
    txn = _ref(request.transactional_id, request.producer_id, request.producer_epoch)
    if txn is None:
        error = ErrorCode.invalid_request
    elif not authz.txn_allowed(ctx, txn.transactional_id, Operation.WRITE):
        error = ErrorCode.transactional_id_authorization_failed
    elif not authz.group_allowed(ctx, request.group_id, Operation.READ):
        error = ErrorCode.group_authorization_failed
    elif not request.group_id:
        error = ErrorCode.invalid_group_id
    else:
        error = await ctx.broker.coordinator.add_offsets_to_txn(txn, request.group_id, _now_ms())
    return build(
        ctx.schema.AddOffsetsToTxnResponse,
        throttle_time=NO_THROTTLE,
        error_code=for_version(error, ADD_OFFSETS_TO_TXN, ctx.api_version),
    )


# ---------------------------------------------------------------- EndTxn


@handles(END_TXN, 0, 4)
async def end_txn(ctx: RequestContext, request: Any) -> Any:
    """v5 (KIP-890 part 2: a new epoch per transaction) is not offered, so clients keep
    the classic protocol."""
    txn = _ref(request.transactional_id, request.producer_id, request.producer_epoch)
    commit = bool(request.committed)
    if txn is None:
        error = ErrorCode.invalid_request
    elif not authz.txn_allowed(ctx, txn.transactional_id, Operation.WRITE):
        error = ErrorCode.transactional_id_authorization_failed
    else:
        error = await ctx.broker.coordinator.end_txn(txn, commit, _now_ms())
        if error == ErrorCode.none:
            # The markers moved the LSO: fetches waiting here answer now, not at the poll.
            ctx.broker.waiter.notify()
            if commit:
                metrics.transaction_commits_total.inc()
            else:
                metrics.transaction_aborts_total.labels(reason="client").inc()
    return build(
        ctx.schema.EndTxnResponse,
        throttle_time=NO_THROTTLE,
        error_code=for_version(error, END_TXN, ctx.api_version),
    )


# ---------------------------------------------------------------- TxnOffsetCommit


async def _txn_commit_group_error(ctx: RequestContext, request: Any) -> ErrorCode:
    """The error every partition gets before any offset is looked at."""
    groups = ctx.broker.groups
    if request.transactional_id and not authz.txn_allowed(
        ctx, request.transactional_id, Operation.WRITE
    ):
        return ErrorCode.transactional_id_authorization_failed
    if not authz.group_allowed(ctx, request.group_id, Operation.READ):
        return ErrorCode.group_authorization_failed
    if not request.group_id:
        return ErrorCode.invalid_group_id
    if not await groups.owns(request.group_id):
        return ErrorCode.not_coordinator
    if not request.transactional_id:
        return ErrorCode.invalid_request
    if ctx.api_version < 3:
        return ErrorCode.none
    consumer_group = await consumer_group_of(ctx, request.group_id)
    if consumer_group is not None:
        return consumer_group.check_txn_commit(request.member_id, int(request.generation_id))
    group = await groups.get(request.group_id, create=False)
    return check_txn_commit(
        group,
        int(request.generation_id),
        request.member_id,
        request.group_instance_id,
    )


async def _stage_offsets(
    ctx: RequestContext, request: Any, codes: list[list[ErrorCode | None]]
) -> None:
    """Fill the None entries of `codes` (one list per topic) with the coordinator's
    answers for the offsets that passed the local checks."""
    broker = ctx.broker
    max_metadata = broker.settings.offset_metadata_max_bytes
    commits: list[OffsetCommit] = []
    slots: list[tuple[int, int]] = []
    for ti, t in enumerate(request.topics):
        topic = await broker.topics.get(t.name)
        readable = authz.topic_allowed(ctx, t.name, Operation.READ)
        for pi, p in enumerate(t.partitions):
            metadata = p.committed_metadata or ""  # Kafka stores null as "" (NO_METADATA)
            if not readable:
                codes[ti][pi] = ErrorCode.topic_authorization_failed
            elif topic is None or not 0 <= p.partition_index < topic.num_partitions:
                codes[ti][pi] = ErrorCode.unknown_topic_or_partition
            elif metadata is not None and len(metadata.encode()) > max_metadata:
                codes[ti][pi] = ErrorCode.offset_metadata_too_large
            else:
                commits.append(
                    OffsetCommit(
                        t.name,
                        int(p.partition_index),
                        int(p.committed_offset),
                        int(getattr(p, "committed_leader_epoch", -1)),
                        metadata,
                    )
                )
                slots.append((ti, pi))
    if not commits:
        return
    txn = TxnRef(request.transactional_id, int(request.producer_id), int(request.producer_epoch))
    # Queued with other offset commits (groups.offset_commits): order fixed once queued.
    written = await broker.groups.offset_commits.submit(
        TxnOffsetCommitRequest(txn, request.group_id, commits)
    )
    ctx.pass_turn()
    answers = await asyncio.shield(written)
    for (ti, pi), error in zip(slots, answers, strict=True):
        codes[ti][pi] = error


@handles(TXN_OFFSET_COMMIT, 0, 4)
async def txn_offset_commit(ctx: RequestContext, request: Any) -> Any:
    """v5 (KIP-890 part 2: the commit adds the group implicitly) is not offered."""
    m = ctx.schema
    error = await _txn_commit_group_error(ctx, request)
    codes: list[list[ErrorCode | None]] = [
        [None if error == ErrorCode.none else error for _ in t.partitions] for t in request.topics
    ]
    if error == ErrorCode.none:
        await _stage_offsets(ctx, request, codes)
    return build(
        m.TxnOffsetCommitResponse,
        throttle_time=NO_THROTTLE,
        topics=tuple(
            build(
                m.TxnOffsetCommitResponseTopic,
                name=t.name,
                partitions=tuple(
                    build(
                        m.TxnOffsetCommitResponsePartition,
                        partition_index=p.partition_index,
                        error_code=for_version(
                            ErrorCode.none if code is None else code,
                            TXN_OFFSET_COMMIT,
                            ctx.api_version,
                        ),
                    )
                    for p, code in zip(t.partitions, topic_codes, strict=True)
                ),
            )
            for t, topic_codes in zip(request.topics, codes, strict=True)
        ),
    )
