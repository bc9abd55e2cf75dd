"""Decode the records inside a v2 batch, for the few paths that need record-level facts
(ListOffsets by timestamp). Never used on the produce or fetch path."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import cramjam

from lakelog.protocol.batch_runs import batches_in_range
from lakelog.protocol.records import HEADER_SIZE, read_header
from lakelog.protocol.varint import read_varint

NONE, GZIP, SNAPPY, LZ4, ZSTD = range(5)
_XERIAL_MAGIC = b"\x82SNAPPY\x00"


def _snappy(data: bytes) -> bytes:
    if not data.startswith(_XERIAL_MAGIC):
        return bytes(cramjam.snappy.decompress_raw(data))
    # Java clients frame snappy in xerial blocks: 16-byte header, then (size, block)*.
    out = bytearray()
    pos = 16
    while pos + 4 <= len(data):
        size = int.from_bytes(data[pos : pos + 4], "big")
        pos += 4
        out += bytes(cramjam.snappy.decompress_raw(data[pos : pos + size]))
        pos += size
    return bytes(out)


def decompress(codec: int, data: bytes) -> bytes:
    if codec == NONE:
        return data
    if codec == GZIP:
        return bytes(cramjam.gzip.decompress(data))
    if codec == SNAPPY:
        return _snappy(data)
    if codec == LZ4:
        return bytes(cramjam.lz4.decompress(data))
    if codec == ZSTD:
        return bytes(cramjam.zstd.decompress(data))
    raise ValueError(f"unknown compression codec {codec}")


@dataclass(frozen=True, slots=True)
class RecordPosition:
    offset_delta: int
    timestamp: int


def record_positions(batch: bytes | memoryview) -> Iterator[RecordPosition]:
    """(offset delta, timestamp) of every record of a coordinate's bytes, decompressing as
    needed. A merged segment's coordinate may hold several batches (`batch_runs`); deltas
    are then relative to the first batch's base offset."""
    first_base = read_header(batch).base_offset
    for base, view in batches_in_range(batch, first_base):
        header = read_header(view)
        body = decompress(header.compression, bytes(view[HEADER_SIZE:]))
        pos = 0
        for _ in range(header.records_count):
            length, pos = read_varint(body, pos)
            end = pos + length
            pos += 1  # attributes
            timestamp_delta, pos = read_varint(body, pos)
            offset_delta, pos = read_varint(body, pos)
            yield RecordPosition(
                base - first_base + offset_delta, header.base_timestamp + timestamp_delta
            )
            pos = end


def first_offset_at_or_after(
    batch: bytes | memoryview, base_offset: int, timestamp: int
) -> tuple[int, int] | None:
    """(offset, timestamp) of the first record whose timestamp is >= `timestamp`."""
    for record in record_positions(batch):
        if record.timestamp >= timestamp:
            return base_offset + record.offset_delta, record.timestamp
    return None
