"""The batches inside one coordinate's byte range.

A coordinate covers one record batch, or, in merged segment objects, a run of batches of
one partition in offset order (the pipeline's merge turns many small batch rows into one,
bounding the coordinator's metadata). Inside such a run every batch carries its real base
offset; the coordinate's base offset is the first batch's (WAL objects hold the
producer's bytes, whose base offset is whatever the client sent, so the first batch's
offset always comes from the coordinate)."""

from __future__ import annotations

from collections.abc import Iterator

from lakelog.protocol.records import LOG_OVERHEAD, InvalidBatch, read_header

_MIN_BATCH = 61


def batches_in_range(
    data: bytes | memoryview, base_offset: int
) -> Iterator[tuple[int, memoryview]]:
    """(real base offset, batch bytes) of each batch in a coordinate's bytes; InvalidBatch
    if the bytes are not whole batches back to back."""
    view = memoryview(data)
    pos, end = 0, len(view)
    first = True
    while pos < end:
        if end - pos < _MIN_BATCH:
            raise InvalidBatch("truncated batch in range", corrupt=True)
        header = read_header(view, pos)
        size = header.batch_length + LOG_OVERHEAD
        if header.batch_length < _MIN_BATCH - LOG_OVERHEAD or pos + size > end:
            raise InvalidBatch("batch length out of bounds in range", corrupt=True)
        yield (base_offset if first else header.base_offset), view[pos : pos + size]
        first = False
        pos += size
