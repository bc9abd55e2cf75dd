"""Produce: validate each partition's batches, hand them to the WAL writer, answer once the
object holding them is uploaded and committed."""

from __future__ import annotations

import asyncio
import datetime
import logging
import random
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any
from uuid import UUID

from lakelog.coordinator.log_types import CommitBatchResult
from lakelog.coordinator.mirror_types import READ_ONLY_ERROR
from lakelog.log.produce.wal_writer import AppendRequest
from lakelog.log.protocol.record_keys import keyless_record_indexes
from lakelog.log.protocol.record_prefixes import record_prefixes
from lakelog.log.protocol.records import InvalidBatch, split_batches, validate
from lakelog.log.topic_config import effective
from lakelog.registry.validation import invalid_records
from lakelog.security.acl import Operation
from lakelog.server.api import authz
from lakelog.server.api.context import RequestContext, build
from lakelog.server.api.raw import NO_RESPONSE
from lakelog.server.api.registry import handles
from lakelog.server.cluster.zones import client_zone, count_bytes
from lakelog.server.internal_topics import internal_topic_by_id, is_internal
from lakelog.server.txn.wire_errors import FENCING_ERRORS
from lakelog.util import metrics
from lakelog.util.errors import ErrorCode

log = logging.getLogger(__name__)

PRODUCE_KEY = 0
TOPIC_ID_VERSION = 13
"""Produce v13 names topics by id (KIP-516). v11 may answer TRANSACTION_ABORTABLE (never
needed here) and v12 marks transaction version 2 (KIP-890), which clients use only when
ApiVersions finalizes the `transaction.version` feature at 2; Lakelog does not, so
transactional producers keep adding partitions with AddPartitionsToTxn."""


@dataclass
class _PartitionOutcome:
    index: int
    error: ErrorCode = ErrorCode.none
    message: str | None = None
    record_errors: list[tuple[int, str]] = field(default_factory=list)
    """(batch index, message) of each refused record (KIP-467, Produce v8+)."""
    first: int = 0
    count: int = 0
    """The partition's batches are appends[first:first + count]."""


@dataclass
class _TopicOutcome:
    name: str
    topic_id: UUID | None
    """Set from Produce v13, which names topics by id (KIP-516) and answers with it."""
    partitions: list[_PartitionOutcome] = field(default_factory=list)


def _batch_error(exc: InvalidBatch) -> ErrorCode:
    if exc.old_magic:
        return ErrorCode.invalid_record
    return ErrorCode.corrupt_message if exc.corrupt else ErrorCode.invalid_record


def _refuse_keyless(result: _PartitionOutcome, partition: str, keyless: Sequence[int]) -> None:
    """Refuse a partition's records as Kafka's LogValidator does for a compacted topic:
    INVALID_RECORD, one record error per keyless record of the batch (so a client can tell
    the bad records from their innocent neighbours), and a summary naming at most three."""
    why = f"Compacted topic cannot accept message without key in topic partition {partition}"
    _refuse_records(result, [(index, why) for index in keyless])


def _refuse_records(result: _PartitionOutcome, refused: Sequence[tuple[int, str]]) -> None:
    """INVALID_RECORD with one record error per refused record and a summary."""
    result.error = ErrorCode.invalid_record
    result.record_errors = list(refused)
    shown = ", ".join(f"RecordError(batchIndex={i}, message='{why}')" for i, why in refused[:3])
    result.message = (
        f"One or more records have been rejected due to {len(refused)} record errors in total,"
        f" and only showing the first three errors at most: [{shown}]"
    )


async def _validate(
    ctx: RequestContext, request: Any, appends: list[AppendRequest]
) -> list[_TopicOutcome]:
    """Split and check every partition's records; valid batches go to `appends`."""
    outcomes = []
    acks_ok = request.acks in (0, 1, -1)
    zone = client_zone(ctx.client_id)
    by_id = ctx.api_version >= TOPIC_ID_VERSION
    checking = ctx.broker.authorizer.enabled
    for topic_data in request.topic_data or ():
        if by_id:
            topic_id = topic_data.topic_id
            topic = await ctx.broker.topics.get_by_id(topic_id) if topic_id else None
            topic = topic or internal_topic_by_id(topic_id)
            outcome = _TopicOutcome(topic.name if topic else "", topic_id)
            unknown = ErrorCode.unknown_topic_id
        else:
            topic = await ctx.broker.topics.get(topic_data.name)
            outcome = _TopicOutcome(topic_data.name, None)
            unknown = ErrorCode.unknown_topic_or_partition
        config = effective(topic, ctx.broker.settings) if topic else None
        outcomes.append(outcome)
        refused = (
            checking
            and (topic is not None or not by_id)
            and not authz.topic_allowed(ctx, outcome.name, Operation.WRITE)
        )
        for part in topic_data.partition_data or ():
            result = _PartitionOutcome(part.index)
            outcome.partitions.append(result)
            if not acks_ok:
                result.error = ErrorCode.invalid_required_acks
                continue
            if refused:
                result.error = ErrorCode.topic_authorization_failed
                continue
            if is_internal(outcome.name):
                # Kafka's ReplicaManager: clients never append to an internal topic.
                result.error = ErrorCode.invalid_topic_exception
                result.message = f"Cannot append to internal topic {outcome.name}"
                continue
            if topic is None or config is None:
                result.error = unknown
                continue
            if not 0 <= part.index < topic.num_partitions:
                result.error = ErrorCode.unknown_topic_or_partition
                continue
            if await ctx.broker.mirrors.read_only(topic.topic_id):
                result.error = READ_ONLY_ERROR  # the coordinator refuses it anyway
                result.message = _read_only_message(topic.name)
                continue
            if part.records is None:
                result.error = ErrorCode.invalid_record
                continue
            batches: list[AppendRequest] = []
            try:
                for batch in split_batches(part.records):
                    header = validate(batch)
                    if header.is_control:
                        raise InvalidBatch("clients may not write control batches")
                    if header.is_transactional and header.producer_id < 0:
                        raise InvalidBatch("a transactional batch needs a producer id")
                    if header.size > config.max_message_bytes:
                        result.error = ErrorCode.message_too_large
                        break
                    if "compact" in config.cleanup_policy:
                        keyless = keyless_record_indexes(batch)
                        if keyless:
                            _refuse_keyless(result, f"{topic.name}-{part.index}", keyless)
                            log.info(
                                "rejecting produce to %s-%d from %s: %d records without a key",
                                topic.name,
                                part.index,
                                ctx.peer,
                                len(keyless),
                            )
                            break
                    if config.key_schema_validation or config.value_schema_validation:
                        refused = await invalid_records(
                            ctx.broker.schema_ids,
                            topic.name,
                            record_prefixes(batch),
                            config.key_subject_strategy if config.key_schema_validation else None,
                            config.value_subject_strategy
                            if config.value_schema_validation
                            else None,
                        )
                        if refused:
                            _refuse_records(result, refused)
                            log.info(
                                "rejecting produce to %s-%d from %s: %d records fail schema"
                                " validation",
                                topic.name,
                                part.index,
                                ctx.peer,
                                len(refused),
                            )
                            break
                    batches.append(
                        AppendRequest(
                            topic.topic_id,
                            part.index,
                            batch,
                            header,
                            config.timestamp_type,
                            owner_zone=zone,
                            check_owner=header.producer_id < 0,
                        )
                    )
            except InvalidBatch as exc:
                result.error = _batch_error(exc)
                result.message = str(exc)
                log.info(
                    "rejecting produce to %s-%d from %s: %s", topic.name, part.index, ctx.peer, exc
                )
            if result.error != ErrorCode.none:
                continue
            result.first, result.count = len(appends), len(batches)
            appends.extend(batches)
    return outcomes


def _read_only_message(topic: str) -> str:
    """What the producer's delivery error says: why, and how the topic becomes writable."""
    return (
        f"topic {topic} is a read-only mirror topic (KIP-1279): it takes writes only after "
        "`lakelog mirror remove-topics` fails it over"
    )


def _partition_result(
    outcome: _PartitionOutcome, results: Sequence[CommitBatchResult]
) -> tuple[ErrorCode, int, int, int]:
    """(error, base offset, log append time, log start) for a partition's batches."""
    if outcome.error != ErrorCode.none:
        return outcome.error, -1, -1, -1
    mine = results[outcome.first : outcome.first + outcome.count]
    for r in mine:
        if r.error == ErrorCode.stale_broker_epoch:
            # This broker was fenced, so nothing of it was stored. Not NOT_LEADER: clients
            # re-queue that without counting a retry (it promises "not stored, resend
            # freely"), behind the requests this broker accepted meanwhile under its new
            # epoch, so a plain producer's records would land out of order.
            # KAFKA_STORAGE_ERROR is a counted retry (a failure with retries=0).
            return ErrorCode.kafka_storage_error, -1, -1, -1
        if r.error != ErrorCode.none:
            return r.error, -1, -1, -1
    first = mine[0]
    return ErrorCode.none, first.base_offset, first.log_append_time, first.log_start_offset


def _record_errors(schema: Any, outcome: _PartitionOutcome) -> tuple[Any, ...]:
    """The partition's record_errors entries; Produce v8 added the field."""
    if not outcome.record_errors or not hasattr(schema, "BatchIndexAndErrorMessage"):
        return ()
    return tuple(
        build(schema.BatchIndexAndErrorMessage, batch_index=i, batch_index_error_message=why)
        for i, why in outcome.record_errors
    )


def _refuse_anonymous_transactions(
    request: Any, appends: list[AppendRequest], outcomes: list[_TopicOutcome]
) -> None:
    """Transactional batches need the request's transactional id: otherwise Kafka fails the
    whole request with TRANSACTIONAL_ID_AUTHORIZATION_FAILED, and so do we."""
    if request.transactional_id or not any(a.header.is_transactional for a in appends):
        return
    appends.clear()
    for outcome in outcomes:
        for p in outcome.partitions:
            p.error = ErrorCode.transactional_id_authorization_failed
            p.count = 0


def _refuse_unauthorized_transaction(
    ctx: RequestContext, request: Any, appends: list[AppendRequest], outcomes: list[_TopicOutcome]
) -> None:
    """A transactional producer needs WRITE on its transactional id, else the whole request
    gets TRANSACTIONAL_ID_AUTHORIZATION_FAILED (Kafka's KafkaApis)."""
    if not request.transactional_id or authz.txn_allowed(
        ctx, request.transactional_id, Operation.WRITE
    ):
        return
    appends.clear()
    for outcome in outcomes:
        for p in outcome.partitions:
            p.error = ErrorCode.transactional_id_authorization_failed
            p.count = 0


def _count_rejected(appends: list[AppendRequest], results: Sequence[CommitBatchResult]) -> None:
    """Transactional batches the commit barrier refused: zombies and late arrivals."""
    for append, result in zip(appends, results, strict=True):
        if append.header.is_transactional and result.error in FENCING_ERRORS:
            metrics.txn_rejected_batches_total.labels(error=result.error.name).inc()


@handles(PRODUCE_KEY, 3, 13)
async def produce(ctx: RequestContext, request: Any) -> Any:
    jitter_ms = ctx.broker.settings.fault_produce_jitter_ms
    if jitter_ms:
        await asyncio.sleep(random.uniform(0, jitter_ms) / 1000)
    appends: list[AppendRequest] = []
    outcomes = await _validate(ctx, request, appends)
    _refuse_anonymous_transactions(request, appends, outcomes)
    if ctx.broker.authorizer.enabled:
        _refuse_unauthorized_transaction(ctx, request, appends, outcomes)
    results: list[CommitBatchResult] = []
    if appends:
        size = sum(len(a.data) for a in appends)
        metrics.bytes_in_total.inc(size)
        count_bytes("in", client_zone(ctx.client_id), ctx.broker.settings.rack, size)
        futures = await ctx.broker.wal.append(appends, epoch=ctx.broker_epoch)
        ctx.pass_turn()  # in the WAL buffer: the connection's next Produce lands after us
        if request.acks == 0:
            return NO_RESPONSE
        results = list(await asyncio.gather(*futures))
        _count_rejected(appends, results)
        if ctx.broker.settings.fault_ack_delay_ms:
            await asyncio.sleep(ctx.broker.settings.fault_ack_delay_ms / 1000)
    elif request.acks == 0:
        return NO_RESPONSE
    m = ctx.schema
    topics = []
    for outcome in outcomes:
        partitions = []
        for p in outcome.partitions:
            error, base_offset, append_time, log_start = _partition_result(p, results)
            partitions.append(
                build(
                    m.PartitionProduceResponse,
                    index=p.index,
                    error_code=error,
                    base_offset=base_offset,
                    log_append_time=(
                        datetime.datetime.fromtimestamp(append_time / 1000, tz=datetime.UTC)
                        if append_time >= 0
                        else None
                    ),
                    log_start_offset=log_start,
                    record_errors=_record_errors(m, p),
                    error_message=p.message,
                )
            )
        topics.append(
            build(
                m.TopicProduceResponse,
                name=outcome.name,
                topic_id=outcome.topic_id,
                partition_responses=tuple(partitions),
            )
        )
    return build(m.ProduceResponse, responses=tuple(topics), throttle_time=datetime.timedelta(0))
