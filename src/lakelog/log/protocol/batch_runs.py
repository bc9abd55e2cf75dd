"""The batches inside one coordinate's byte range.

A coordinate covers one record batch, or a run of batches of one partition back to back in
offset order, which shares one coordinator row (the coordinator's metadata, and the rows a
commit writes, shrink with the run length):

- In a WAL object, a run of one producer's batches that one commit appended
  (`coordinator.commit_plan`). Their headers hold whatever base offset the producer sent;
  the coordinator gave them dense offsets, so each batch starts right after the one
  before it (its base offset plus its lastOffsetDelta, plus one).
- In a merged or compacted segment object, a run the pipeline joined. Every batch carries
  its real base offset in its header (compaction may leave gaps between batches).

Either way the first batch's offset comes from the coordinate: WAL bytes are the
producer's. Which rule applies is the object's kind (`storage.keys.offsets_in_headers`).
A run may arrive in pieces (the fetch cache keeps the batches of a WAL object one by
one), each piece holding whole batches."""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from lakelog.log.protocol.records import LOG_OVERHEAD, InvalidBatch

_MIN_BATCH = 61
_LAST_OFFSET_DELTA = slice(23, 27)


def batch_size(view: memoryview | bytes, pos: int = 0) -> int:
    """The size of the batch starting at `pos`, from its batchLength field."""
    return int.from_bytes(view[pos + 8 : pos + 12], "big", signed=True) + LOG_OVERHEAD


def is_one_batch(data: memoryview | bytes) -> bool:
    """The bytes hold exactly one batch (the common case, served without a walk)."""
    return len(data) >= _MIN_BATCH and batch_size(data) == len(data)


def last_offset_delta(batch: memoryview | bytes) -> int:
    return int.from_bytes(batch[_LAST_OFFSET_DELTA], "big", signed=True)


def run_batches(
    pieces: Iterable[memoryview | bytes], base_offset: int, *, offsets_in_headers: bool
) -> Iterator[tuple[int, memoryview]]:
    """(real base offset, batch bytes) of each batch of a coordinate's bytes, given as
    consecutive pieces of whole batches; InvalidBatch if they are not whole batches back to
    back."""
    first = True
    next_offset = base_offset
    for data in pieces:
        view = memoryview(data)
        pos, end = 0, len(view)
        while pos < end:
            if end - pos < _MIN_BATCH:
                raise InvalidBatch("truncated batch in range", corrupt=True)
            size = batch_size(view, pos)
            if size < _MIN_BATCH or pos + size > end:
                raise InvalidBatch("batch length out of bounds in range", corrupt=True)
            batch = view[pos : pos + size]
            if first or not offsets_in_headers:
                base = next_offset
            else:
                base = int.from_bytes(batch[0:8], "big", signed=True)
            delta = last_offset_delta(batch)
            if delta < 0:
                raise InvalidBatch("negative lastOffsetDelta in range", corrupt=True)
            yield base, batch
            next_offset = base + delta + 1
            first = False
            pos += size


def batches_in_range(
    data: bytes | memoryview, base_offset: int, *, offsets_in_headers: bool
) -> Iterator[tuple[int, memoryview]]:
    """`run_batches` of a coordinate's bytes in one piece."""
    return run_batches((data,), base_offset, offsets_in_headers=offsets_in_headers)
