"""A coordinate's bytes as the batches a response sends: each with its real base offset
patched in (and, on LogAppendTime topics, the commit time stamped in), never copying a
payload otherwise. Fetch and ShareFetch both serve through here."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from lakelog.coordinator.log_types import BatchCoordinate, TimestampType
from lakelog.log.protocol.batch_runs import is_one_batch, last_offset_delta, run_batches
from lakelog.log.protocol.records import InvalidBatch, base_offset_bytes, with_log_append_time
from lakelog.log.storage.keys import offsets_in_headers

Pieces = Sequence[memoryview | bytes]
"""A coordinate's bytes in consecutive pieces of whole batches (`BatchReader.read`)."""

ServedBatch = tuple[int, int, memoryview | bytes]
"""(real base offset, last offset, bytes) of one batch."""


def coordinate_batches(coord: BatchCoordinate, pieces: Pieces) -> list[ServedBatch]:
    """The batches a coordinate's bytes hold, in offset order. A marker, or bytes that are
    not whole batches (served as they are, as Kafka would serve what it stored), come as
    one with the coordinate's offsets."""
    if len(pieces) == 1:
        data = pieces[0]
        if coord.control_type >= 0 or is_one_batch(data):
            return [(coord.base_offset, coord.last_offset, data)]
    try:
        return [
            (base, base + last_offset_delta(batch), batch)
            for base, batch in run_batches(
                pieces, coord.base_offset, offsets_in_headers=offsets_in_headers(coord.object_key)
            )
        ]
    except InvalidBatch:
        whole = pieces[0] if len(pieces) == 1 else b"".join(pieces)
        return [(coord.base_offset, coord.last_offset, whole)]


def batch_parts(coord: BatchCoordinate, data: memoryview | bytes, base_offset: int) -> list[Any]:
    """The buffers that send one batch of the coordinate whose real base offset is
    `base_offset`."""
    if coord.control_type >= 0:
        return [data]  # built with its offset and time, or mirrored as it was
    if coord.timestamp_type == TimestampType.LOG_APPEND_TIME and coord.log_append_time >= 0:
        patched = with_log_append_time(data, coord.log_append_time)
        patched[0:8] = base_offset_bytes(base_offset)
        return [patched]
    return [base_offset_bytes(base_offset), memoryview(data)[8:]]


def served_bytes(coord: BatchCoordinate, pieces: Pieces) -> bytes:
    """Every batch of the coordinate as one patched buffer (for answers built whole)."""
    return b"".join(
        part
        for base, _, batch in coordinate_batches(coord, pieces)
        for part in batch_parts(coord, batch, base)
    )
