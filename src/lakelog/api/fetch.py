"""Fetch: find batch coordinates, read the bytes through the cache, patch base offsets,
answer with a hand-encoded response; long-poll until min_bytes or max_wait.

read_committed (isolation level 1) stops at the last stable offset and lists the aborted
transactions of the returned range; transaction markers come as control batches, so
every client filters aborted records itself."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from lakelog import metrics
from lakelog.api.context import RequestContext
from lakelog.api.raw import RawResponse
from lakelog.api.registry import handles
from lakelog.coordinator.interface import (
    BatchCoordinate,
    FindBatchesRequest,
    TimestampType,
)
from lakelog.coordinator.txn_types import AbortedTxn
from lakelog.errors import ErrorCode
from lakelog.protocol.control_batch import CONTROL_BATCH_SIZE
from lakelog.protocol.fetch_response import PartitionData, encode_fetch_response
from lakelog.protocol.records import base_offset_bytes, with_log_append_time
from lakelog.zones import client_zone, count_bytes

FETCH_KEY = 1
READ_COMMITTED = 1


@dataclass(slots=True)
class _Slot:
    """One requested partition and what the coordinator said about it."""

    data: PartitionData
    find_index: int = -1
    coords: tuple[BatchCoordinate, ...] = ()


def _size(coord: BatchCoordinate) -> int:
    """The bytes the batch takes in the response (markers are built at their fixed size)."""
    return (
        CONTROL_BATCH_SIZE if coord.control_type >= 0 and not coord.object_key else coord.byte_size
    )


def _batch_parts(coord: BatchCoordinate, data: memoryview | bytes) -> list[Any]:
    if coord.control_type >= 0:
        return [data]  # built with its offset and time
    if coord.timestamp_type == TimestampType.LOG_APPEND_TIME and coord.log_append_time >= 0:
        patched = with_log_append_time(data, coord.log_append_time)
        patched[0:8] = base_offset_bytes(coord.base_offset)
        return [patched]
    return [base_offset_bytes(coord.base_offset), memoryview(data)[8:]]


async def _read_once(
    ctx: RequestContext, request: Any, max_bytes: int
) -> tuple[list[tuple[str, list[PartitionData]]], int, bool]:
    """One pass over the request: (topics, record bytes, any partition errored)."""
    broker = ctx.broker
    read_committed = getattr(request, "isolation_level", 0) == READ_COMMITTED
    finds: list[FindBatchesRequest] = []
    layout: list[tuple[str, list[_Slot]]] = []
    errored = False
    for fetch_topic in request.topics or ():
        topic = await broker.topics.get(fetch_topic.topic)
        slots = []
        for part in fetch_topic.partitions or ():
            slot = _Slot(PartitionData(part.partition))
            if topic is None or not 0 <= part.partition < topic.num_partitions:
                slot.data.error = ErrorCode.unknown_topic_or_partition
                errored = True
            else:
                slot.find_index = len(finds)
                finds.append(
                    FindBatchesRequest(
                        topic.topic_id,
                        part.partition,
                        part.fetch_offset,
                        part.partition_max_bytes,
                        read_committed,
                    )
                )
            slots.append(slot)
        layout.append((fetch_topic.topic, slots))
    results = await broker.coordinator.find_batches(finds) if finds else []

    # Keep whole batches within max_bytes; the response's first batch always goes (KIP-74).
    budget = max_bytes
    wanted: list[BatchCoordinate] = []
    for _, slots in layout:
        for slot in slots:
            if slot.find_index < 0:
                continue
            found = results[slot.find_index]
            slot.data.error = found.error
            slot.data.high_watermark = found.high_watermark
            slot.data.last_stable_offset = found.last_stable_offset
            slot.data.log_start_offset = found.log_start_offset
            if found.error != ErrorCode.none:
                errored = True
                continue
            taken: list[BatchCoordinate] = []
            for coord in found.batches:
                size = _size(coord)
                if size > budget and (wanted or taken):
                    break
                taken.append(coord)
                budget -= size
            slot.coords = tuple(taken)
            wanted.extend(taken)
            if read_committed:
                slot.data.aborted = _aborted_within(found.aborted, taken)

    total = 0
    if wanted:
        datas = await broker.reader.read(wanted)
        cursor = 0
        for _, slots in layout:
            for slot in slots:
                for coord in slot.coords:
                    data = datas[cursor]
                    cursor += 1
                    slot.data.records.extend(_batch_parts(coord, data))
                    slot.data.records_size += len(data)
                total += slot.data.records_size
    return [(name, [s.data for s in slots]) for name, slots in layout], total, errored


def _aborted_within(
    aborted: Sequence[AbortedTxn], taken: Sequence[BatchCoordinate]
) -> list[tuple[int, int]]:
    """The aborted transactions that start within what the response carries (the
    coordinator's answer may cover batches the response budget left out)."""
    if not taken:
        return []
    last = taken[-1].last_offset
    return [(a.producer_id, a.first_offset) for a in aborted if a.first_offset <= last]


@handles(FETCH_KEY, 4, 12)
async def fetch(ctx: RequestContext, request: Any) -> RawResponse:
    loop = asyncio.get_running_loop()
    max_wait = request.max_wait.total_seconds()
    deadline = loop.time() + max_wait
    max_bytes = min(request.max_bytes, ctx.broker.settings.fetch_max_bytes)
    min_bytes = max(request.min_bytes, 1)
    while True:
        since = ctx.broker.waiter.snapshot()
        topics, total, errored = await _read_once(ctx, request, max_bytes)
        remaining = deadline - loop.time()
        if total >= min_bytes or errored or remaining <= 0 or ctx.broker.stopping:
            break
        await ctx.broker.waiter.wait(remaining, since)
    metrics.bytes_out_total.inc(total)
    if total:
        zone = client_zone(ctx.client_id) or getattr(request, "rack_id", None) or None
        count_bytes("out", zone, ctx.broker.settings.rack, total)
    return RawResponse(encode_fetch_response(ctx.api_version, topics))
