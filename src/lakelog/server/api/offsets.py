"""ListOffsets and OffsetForLeaderEpoch.

A diskless log never truncates, so every leader epoch ends at the log end. ListOffsets v2+
carries the isolation level: read_committed answers "latest" with the last stable offset.
"""

from __future__ import annotations

import datetime
import logging
from typing import Any

from lakelog.coordinator.log_types import (
    EARLIEST_TIMESTAMP,
    LATEST_TIMESTAMP,
    MAX_TIMESTAMP,
    ListOffsetsRequest,
    ListOffsetsResult,
    PartitionKey,
    TimestampType,
)
from lakelog.log.protocol.record_reader import first_offset_at_or_after, record_positions
from lakelog.log.storage.keys import offsets_in_headers
from lakelog.security.acl import Operation
from lakelog.server.api import authz
from lakelog.server.api.context import RequestContext, build
from lakelog.server.api.registry import handles
from lakelog.server.internal_topics import internal_topic, is_internal
from lakelog.util.errors import ErrorCode

log = logging.getLogger(__name__)

LIST_OFFSETS_KEY = 2
OFFSET_FOR_LEADER_EPOCH_KEY = 23
EARLIEST_LOCAL_TIMESTAMP = -4
LATEST_TIERED_TIMESTAMP = -5
"""ListOffsets v9+ (KIP-1005): the last offset in tiered storage. Lakelog has no tiered
storage (every batch is in object storage from the start), so it answers as Kafka does for
a topic without remote storage: offset -1, no error."""
READ_COMMITTED = 1
LEADER_EPOCH = 0
INTERNAL = -6
"""A row answered from `__consumer_offsets`' own table, not the batch coordinator's log."""


async def _narrow(ctx: RequestContext, asked: int, result: ListOffsetsResult) -> tuple[int, int]:
    """Refine a row-level answer to the exact record, reading that one row (a run of
    batches, or one)."""
    coord = result.batch
    if coord is None or coord.timestamp_type == TimestampType.LOG_APPEND_TIME:
        return result.offset, result.timestamp
    try:
        (data,) = await ctx.broker.reader.read_whole([coord])
        in_headers = offsets_in_headers(coord.object_key)
        if asked == MAX_TIMESTAMP:
            best = None
            for record in record_positions(data, offsets_in_headers=in_headers):
                if best is None or record.timestamp > best[1]:
                    best = (coord.base_offset + record.offset_delta, record.timestamp)
            return best if best else (result.offset, result.timestamp)
        found = first_offset_at_or_after(
            data, coord.base_offset, asked, offsets_in_headers=in_headers
        )
    except ValueError as exc:
        # A batch a client stored that does not decode (or decompresses past the bound):
        # its data, not our fault, so one line and the batch-level answer.
        log.warning(
            "cannot read batch at %s:%d to narrow ListOffsets: %s",
            coord.object_key,
            coord.byte_offset,
            exc,
        )
        return result.offset, result.timestamp
    except Exception:
        log.exception(
            "cannot read batch at %s:%d to narrow ListOffsets", coord.object_key, coord.byte_offset
        )
        return result.offset, result.timestamp
    if found is None:
        return result.offset, result.timestamp
    offset, timestamp = found
    return max(offset, result.offset), timestamp


@handles(LIST_OFFSETS_KEY, 1, 10)
async def list_offsets(ctx: RequestContext, request: Any) -> Any:
    m = ctx.schema
    broker = ctx.broker
    read_committed = getattr(request, "isolation_level", 0) == READ_COMMITTED
    layout: list[tuple[str, list[tuple[int, int, int]]]] = []  # name, (partition, idx, ts)
    asks: list[ListOffsetsRequest] = []
    for t in request.topics:
        topic = await broker.topics.get(t.name) or internal_topic(t.name)
        refused = not authz.topic_allowed(ctx, t.name, Operation.DESCRIBE)
        rows = []
        for p in t.partitions:
            timestamp = p.timestamp
            if timestamp == EARLIEST_LOCAL_TIMESTAMP:
                timestamp = EARLIEST_TIMESTAMP
            if refused:
                rows.append((p.partition_index, -4, timestamp))
                continue
            if topic is None or not 0 <= p.partition_index < topic.num_partitions:
                rows.append((p.partition_index, -1, timestamp))
                continue
            if timestamp == LATEST_TIERED_TIMESTAMP and ctx.api_version >= 9:
                rows.append((p.partition_index, -3, timestamp))
                continue
            if timestamp < MAX_TIMESTAMP or (timestamp == MAX_TIMESTAMP and ctx.api_version < 7):
                rows.append((p.partition_index, -2, timestamp))
                continue
            if is_internal(t.name):
                rows.append((p.partition_index, INTERNAL, timestamp))
                continue
            rows.append((p.partition_index, len(asks), timestamp))
            asks.append(
                ListOffsetsRequest(topic.topic_id, p.partition_index, timestamp, read_committed)
            )
        layout.append((t.name, rows))
    results = await broker.coordinator.list_offsets(asks) if asks else []
    topics = []
    for name, rows in layout:
        partitions = []
        for partition, index, asked in rows:
            error, offset, timestamp = ErrorCode.none, -1, -1
            if index == -1:
                error = ErrorCode.unknown_topic_or_partition
            elif index == -4:
                error = ErrorCode.topic_authorization_failed
            elif index == -2:
                error = ErrorCode.invalid_request
            elif index == -3:
                pass  # LATEST_TIERED_TIMESTAMP: nothing is tiered
            elif index == INTERNAL:
                offset, timestamp = await broker.coordinator.offsets_topic_offset(partition, asked)
            else:
                result = results[index]
                error = result.error
                offset, timestamp = result.offset, result.timestamp
                if error == ErrorCode.none and asked not in (LATEST_TIMESTAMP, EARLIEST_TIMESTAMP):
                    offset, timestamp = await _narrow(ctx, asked, result)
            partitions.append(
                build(
                    m.ListOffsetsPartitionResponse,
                    partition_index=partition,
                    error_code=error,
                    timestamp=timestamp,
                    offset=offset,
                    leader_epoch=LEADER_EPOCH if error == ErrorCode.none and index != -3 else -1,
                )
            )
        topics.append(build(m.ListOffsetsTopicResponse, name=name, partitions=tuple(partitions)))
    return build(m.ListOffsetsResponse, throttle_time=datetime.timedelta(0), topics=tuple(topics))


@handles(OFFSET_FOR_LEADER_EPOCH_KEY, 2, 4)
async def offset_for_leader_epoch(ctx: RequestContext, request: Any) -> Any:
    m = ctx.schema
    broker = ctx.broker
    topics = []
    for t in request.topics:
        refused = not authz.topic_allowed(ctx, t.topic, Operation.DESCRIBE)
        topic = None if refused else await broker.topics.get(t.topic) or internal_topic(t.topic)
        keys = (
            []
            if topic is None or is_internal(topic.name)
            else [
                PartitionKey(topic.topic_id, p.partition)
                for p in t.partitions
                if 0 <= p.partition < topic.num_partitions
            ]
        )
        infos = iter(await broker.coordinator.log_info(keys) if keys else [])
        partitions = []
        for p in t.partitions:
            if topic is None or not 0 <= p.partition < topic.num_partitions:
                partitions.append(
                    build(
                        m.EpochEndOffset,
                        partition=p.partition,
                        error_code=(
                            ErrorCode.topic_authorization_failed
                            if refused
                            else ErrorCode.unknown_topic_or_partition
                        ),
                        leader_epoch=-1,
                        end_offset=-1,
                    )
                )
                continue
            if is_internal(topic.name):  # every epoch ends at the log end, as for any topic
                coordinator = broker.coordinator
                end, _ = await coordinator.offsets_topic_offset(p.partition, LATEST_TIMESTAMP)
                error = ErrorCode.none
            else:
                info = next(infos)
                error, end = info.error, info.high_watermark
            partitions.append(
                build(
                    m.EpochEndOffset,
                    partition=p.partition,
                    error_code=error,
                    leader_epoch=LEADER_EPOCH,
                    end_offset=end,
                )
            )
        topics.append(
            build(m.OffsetForLeaderTopicResult, topic=t.topic, partitions=tuple(partitions))
        )
    return build(
        m.OffsetForLeaderEpochResponse, throttle_time=datetime.timedelta(0), topics=tuple(topics)
    )
