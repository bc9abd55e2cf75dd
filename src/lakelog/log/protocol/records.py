"""Record batch v2 as bytes: read the header, check the CRC, patch offsets.

Batches travel through the broker as buffers; only this 61-byte header is ever read on the
produce and fetch paths.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from dataclasses import dataclass

import crc32c

HEADER_SIZE = 61
LOG_OVERHEAD = 12  # baseOffset + batchLength
MAGIC_OFFSET = 16
CRC_OFFSET = 17
ATTRIBUTES_OFFSET = 21
MAX_TIMESTAMP_OFFSET = 35

COMPRESSION_MASK = 0x07
TIMESTAMP_TYPE_BIT = 0x08
TRANSACTIONAL_BIT = 0x10
CONTROL_BIT = 0x20

# baseOffset, batchLength, partitionLeaderEpoch, magic, crc, attributes, lastOffsetDelta,
# baseTimestamp, maxTimestamp, producerId, producerEpoch, baseSequence, recordsCount
_HEADER = struct.Struct(">qiibIhiqqqhii")
_INT64 = struct.Struct(">q")


class InvalidBatch(ValueError):
    """The bytes are not a well-formed v2 record batch."""

    def __init__(self, message: str, *, corrupt: bool = False, old_magic: bool = False) -> None:
        super().__init__(message)
        self.corrupt = corrupt
        self.old_magic = old_magic


@dataclass(frozen=True, slots=True)
class BatchHeader:
    base_offset: int
    batch_length: int
    partition_leader_epoch: int
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    records_count: int

    @property
    def size(self) -> int:
        return self.batch_length + LOG_OVERHEAD

    @property
    def compression(self) -> int:
        return self.attributes & COMPRESSION_MASK

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & TRANSACTIONAL_BIT)

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & CONTROL_BIT)

    @property
    def timestamp_type(self) -> int:
        return 1 if self.attributes & TIMESTAMP_TYPE_BIT else 0

    @property
    def record_count(self) -> int:
        return self.last_offset_delta + 1


def read_header(buf: memoryview | bytes, pos: int = 0) -> BatchHeader:
    return BatchHeader(*_HEADER.unpack_from(buf, pos))


def split_batches(records: memoryview | bytes) -> Iterator[memoryview]:
    """Yield each batch of a Produce partition's records as a slice; raise InvalidBatch on
    anything that is not a sequence of whole magic-2 batches."""
    view = memoryview(records)
    pos, end = 0, len(view)
    if end == 0:
        raise InvalidBatch("empty records")
    while pos < end:
        if end - pos < MAGIC_OFFSET + 1:
            raise InvalidBatch("truncated batch header", corrupt=True)
        batch_length = int.from_bytes(view[pos + 8 : pos + 12], "big", signed=True)
        magic = view[pos + MAGIC_OFFSET]
        if magic != 2:
            raise InvalidBatch(f"magic {magic} batches are not supported", old_magic=True)
        size = batch_length + LOG_OVERHEAD
        if batch_length < HEADER_SIZE - LOG_OVERHEAD or pos + size > end:
            raise InvalidBatch("batch length out of bounds", corrupt=True)
        yield view[pos : pos + size]
        pos += size


def validate(batch: memoryview) -> BatchHeader:
    """Header of one batch from `split_batches`, after the CRC and consistency checks."""
    header = read_header(batch)
    if crc32c.crc32c(batch[ATTRIBUTES_OFFSET:]) != header.crc:
        raise InvalidBatch("CRC mismatch", corrupt=True)
    if header.last_offset_delta < 0 or header.records_count != header.last_offset_delta + 1:
        raise InvalidBatch("record count does not match lastOffsetDelta")
    return header


def base_offset_bytes(offset: int) -> bytes:
    """The 8 bytes that replace a stored batch's baseOffset when serving it."""
    return _INT64.pack(offset)


def with_log_append_time(batch: memoryview | bytes, timestamp: int) -> bytearray:
    """A copy of the batch marked LogAppendTime with `timestamp` as its max timestamp and a
    new CRC (Kafka's rule for LogAppendTime topics)."""
    out = bytearray(batch)
    attributes = int.from_bytes(out[ATTRIBUTES_OFFSET : ATTRIBUTES_OFFSET + 2], "big")
    out[ATTRIBUTES_OFFSET : ATTRIBUTES_OFFSET + 2] = (attributes | TIMESTAMP_TYPE_BIT).to_bytes(
        2, "big"
    )
    out[MAX_TIMESTAMP_OFFSET : MAX_TIMESTAMP_OFFSET + 8] = _INT64.pack(timestamp)
    crc = crc32c.crc32c(memoryview(out)[ATTRIBUTES_OFFSET:])
    out[CRC_OFFSET : CRC_OFFSET + 4] = crc.to_bytes(4, "big")
    return out
