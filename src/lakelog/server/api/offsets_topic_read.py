"""Reads of `__consumer_offsets` behind the Fetch and ListOffsets handlers.

Its records live as coordinator rows (`coordinator/ops/offsets_topic.py`), not as batches
in objects, so this small reader stands beside the normal fetch path: one coordinator read
for all the request's partitions of the topic, each answered as one plain batch built from
its rows (`log/protocol/plain_batch.py`). Limits, errors and watermarks are as for any
partition."""

from __future__ import annotations

from collections.abc import Sequence

from lakelog.coordinator.interface import BatchCoordinator
from lakelog.log.protocol.fetch_response import PartitionData
from lakelog.log.protocol.plain_batch import plain_batch
from lakelog.util.errors import ErrorCode

LOG_START_OFFSET = 0
"""Compaction leaves gaps but never moves the log start, as in Kafka's compacted topics."""


async def fill(
    coordinator: BatchCoordinator,
    slots: Sequence[tuple[PartitionData, int, int]],
    budget: int,
    first_in_response: bool,
) -> tuple[int, bool]:
    """Fill each (partition data, fetch offset, partition max bytes) within what is left
    of the response's `budget`; a first batch over its limit goes alone only when nothing
    came before it (KIP-74). Returns (bytes added, any partition errored)."""
    reads = await coordinator.read_offsets_topic(
        [(data.index, max(0, offset), max(1, min(limit, budget))) for data, offset, limit in slots]
    )
    used = 0
    errored = False
    for (data, offset, limit), found in zip(slots, reads, strict=True):
        data.high_watermark = data.last_stable_offset = found.high_watermark
        data.log_start_offset = LOG_START_OFFSET
        if not LOG_START_OFFSET <= offset <= found.high_watermark:
            data.error = ErrorCode.offset_out_of_range
            errored = True
            continue
        if not found.rows:
            continue
        batch = plain_batch([(r.offset, r.timestamp, r.key, r.value) for r in found.rows])
        room = min(limit, budget - used)
        if len(batch) > room and not (first_in_response and used == 0):
            continue
        data.records.append(batch)
        data.records_size = len(batch)
        used += len(batch)
    return used, errored
