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
from uuid import UUID

from lakelog.coordinator.log_types import BatchCoordinate, FindBatchesRequest
from lakelog.coordinator.txn_types import AbortedTxn
from lakelog.log.fetch.batches import Pieces, batch_parts, coordinate_batches
from lakelog.log.protocol.control_batch import CONTROL_BATCH_SIZE
from lakelog.log.protocol.fetch_response import PartitionData, encode_fetch_response
from lakelog.security.acl import Operation
from lakelog.server.api import authz, offsets_topic_read
from lakelog.server.api.context import RequestContext
from lakelog.server.api.raw import RawResponse
from lakelog.server.api.registry import handles
from lakelog.server.cluster.zones import client_zone, count_bytes
from lakelog.server.internal_topics import internal_topic, internal_topic_by_id, is_internal_id
from lakelog.util import metrics
from lakelog.util.errors import ErrorCode

FETCH_KEY = 1
NULL_TOPIC_ID = UUID(int=0)
TOPIC_ID_VERSION = 13
"""Fetch v13+ names topics by id (KIP-516); v15 moves the replica id into a tagged replica
state, v17 adds a tagged replica directory id and v18 (Kafka 4.1, KIP-1166) a tagged
high watermark to it, all for followers only: for consumers v18 is v17."""
READ_COMMITTED = 1


@dataclass(slots=True)
class _Slot:
    """One requested partition and what the coordinator said about it."""

    data: PartitionData
    max_bytes: int = 0
    """The request's partition_max_bytes."""
    fetch_offset: int = 0
    find_index: int = -1
    coords: tuple[BatchCoordinate, ...] = ()
    internal: bool = False
    """A partition of `__consumer_offsets`, read by `offsets_topic_read.fill`."""


def _size(coord: BatchCoordinate) -> int:
    """The bytes the batch takes in the response (markers are built at their fixed size)."""
    return (
        CONTROL_BATCH_SIZE if coord.control_type >= 0 and not coord.object_key else coord.byte_size
    )


def take_within(sizes: Sequence[int], limit: int, first_in_response: bool) -> int:
    """How many of a partition's batches (their sizes, in offset order) a Fetch returns.

    KIP-74, as Kafka's broker does it: whole batches while they fit within `limit` (the
    smaller of partition_max_bytes and what is left of the response's max_bytes). A first
    batch larger than the limit is returned alone, only when no earlier partition of the
    response returned data (so a consumer always makes progress); otherwise this partition
    returns nothing and the client fetches it again, when it comes first. Kafka may append
    the start of a batch that does not fit, which clients drop: we never send partial
    batches."""
    used = 0
    for count, size in enumerate(sizes):
        if not fits(used, size, limit, first_in_response):
            return count
        used += size
    return len(sizes)


def fits(used: int, size: int, limit: int, first_in_response: bool) -> bool:
    """Whether the next batch of `size` goes after `used` bytes of the partition
    (`take_within`'s rule for one batch)."""
    return used + size <= limit or (first_in_response and not used)


async def _read_once(
    ctx: RequestContext, request: Any, max_bytes: int
) -> tuple[list[tuple[str | UUID, list[PartitionData]]], int, bool]:
    """One pass over the request: (topics, record bytes, any partition errored)."""
    broker = ctx.broker
    read_committed = getattr(request, "isolation_level", 0) == READ_COMMITTED
    finds: list[FindBatchesRequest] = []
    layout: list[tuple[str | UUID, list[_Slot]]] = []
    errored = False
    by_id = ctx.api_version >= TOPIC_ID_VERSION
    checking = broker.authorizer.enabled
    for fetch_topic in request.topics or ():
        named: str | UUID
        if by_id:
            named = fetch_topic.topic_id or NULL_TOPIC_ID  # kio reads the zero id as None
            topic = await broker.topics.get_by_id(named) or internal_topic_by_id(named)
            unknown = ErrorCode.unknown_topic_id
        else:
            named = fetch_topic.topic
            topic = await broker.topics.get(named) or internal_topic(named)
            unknown = ErrorCode.unknown_topic_or_partition
        refused = checking and not authz.topic_allowed(
            ctx, topic.name if topic else str(named), Operation.READ
        )
        slots = []
        for part in fetch_topic.partitions or ():
            slot = _Slot(PartitionData(part.partition), part.partition_max_bytes, part.fetch_offset)
            if topic is None and by_id:
                slot.data.error = unknown
                errored = True
            elif refused:
                slot.data.error = ErrorCode.topic_authorization_failed
                errored = True
            elif topic is None:
                slot.data.error = unknown
                errored = True
            elif not 0 <= part.partition < topic.num_partitions:
                slot.data.error = ErrorCode.unknown_topic_or_partition
                errored = True
            elif is_internal_id(topic.topic_id):
                slot.internal = True
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
        layout.append((named, slots))
    results = await broker.coordinator.find_batches(finds) if finds else []

    # Plan which batches to read, then choose the bytes to send from what was read.
    budget = max_bytes
    wanted: list[BatchCoordinate] = []
    found_by_slot: list[tuple[_Slot, Sequence[AbortedTxn]]] = []
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
            count, charge = plan_partition(
                [_size(c) for c in found.batches],
                [_may_hold_run(c) for c in found.batches],
                min(slot.max_bytes, budget),
                not wanted,
            )
            budget = max(0, budget - charge)
            slot.coords = tuple(found.batches[:count])
            wanted.extend(slot.coords)
            found_by_slot.append((slot, found.aborted))

    datas = await broker.reader.read(wanted) if wanted else []
    total = cursor = 0
    budget = max_bytes
    for slot, aborted in found_by_slot:
        chosen = datas[cursor : cursor + len(slot.coords)]
        cursor += len(slot.coords)
        used, last_offset = _fill(slot, chosen, min(slot.max_bytes, budget), total == 0)
        budget = max(0, budget - used)
        total += used
        if read_committed:
            slot.data.aborted = _aborted_within(aborted, last_offset) if used else []
    internal = [s for _, slots in layout for s in slots if s.internal]
    if internal:
        used, failed = await offsets_topic_read.fill(
            broker.coordinator,
            [(s.data, s.fetch_offset, s.max_bytes) for s in internal],
            budget,
            total == 0,
        )
        total += used
        errored = errored or failed
    return [(name, [s.data for s in slots]) for name, slots in layout], total, errored


def _may_hold_run(coord: BatchCoordinate) -> bool:
    """A data row of more than one record may hold a run of batches (`protocol.batch_runs`);
    a marker is one control batch."""
    return coord.control_type < 0 and coord.last_offset > coord.base_offset


def plan_partition(
    sizes: Sequence[int], may_split: Sequence[bool], limit: int, first_in_response: bool
) -> tuple[int, int]:
    """Which of a partition's coordinates to read: (how many, bytes to charge against the
    response's max_bytes while planning the partitions after it).

    The coordinates that fit within `limit` go whole. The one that crosses it is read too
    when the KIP-74 first-batch rule may send it, or when it may be a run whose leading
    batches fit (`_fill` decides after reading); it is charged all it may take, so
    later partitions are never planned with more room than the response will have."""
    used = 0
    for count, size in enumerate(sizes):
        if used + size <= limit:
            used += size
            continue
        if first_in_response and count == 0:
            return 1, size
        if may_split[count]:
            return count + 1, limit
        return count, used
    return len(sizes), used


def _fill(
    slot: _Slot, datas: Sequence[Pieces], limit: int, first_in_response: bool
) -> tuple[int, int]:
    """Put the partition's chosen batches into its response data: whole batches while
    they fit within `limit` (`fits`, batch by batch, so a row holding a run
    of batches is cut between batches), from the batch holding the fetch offset on (as
    Kafka, a Fetch starts at that batch: earlier batches of a run would count against the
    limits, and a consumer stuck inside a run would only get batches it already has).
    Returns (bytes sent, last offset sent); coordinates beyond are dropped."""
    used, last_offset = 0, -1
    kept: list[BatchCoordinate] = []
    records = slot.data.records
    for coord, pieces in zip(slot.coords, datas, strict=True):
        taken, full = 0, False
        for base, last, batch in coordinate_batches(coord, pieces):
            if last < slot.fetch_offset:
                continue
            if not fits(used, len(batch), limit, first_in_response):
                full = True
                break
            records.extend(batch_parts(coord, batch, base))
            used += len(batch)
            last_offset = last
            taken += 1
        if taken:
            kept.append(coord)
        if full:
            break
    slot.coords = tuple(kept)
    slot.data.records_size = used
    return used, last_offset


def _aborted_within(aborted: Sequence[AbortedTxn], last_offset: int) -> list[tuple[int, int]]:
    """The aborted transactions that start within what the response carries (the
    coordinator's answer may cover batches the response budget left out)."""
    return [(a.producer_id, a.first_offset) for a in aborted if a.first_offset <= last_offset]


@handles(FETCH_KEY, 4, 18)
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
