"""Decode the records inside a v2 batch, for the few paths that need record-level facts
(ListOffsets by timestamp). Never used on the produce or fetch path."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import cramjam

from lakelog.log.protocol.batch_runs import batches_in_range
from lakelog.log.protocol.records import HEADER_SIZE, read_header
from lakelog.log.protocol.varint import read_varint

NONE, GZIP, SNAPPY, LZ4, ZSTD = range(5)
_XERIAL_MAGIC = b"\x82SNAPPY\x00"


MAX_DECOMPRESSED_BYTES = 64 << 20
"""Most bytes one batch's records may decompress to where the broker reads records (the
keyless check of compacted topics, ListOffsets by timestamp). zstd turns 8 KiB of input
into 256 MiB, so without a bound one 1 MiB batch could make the broker ask for 32 GiB."""

_TOO_SMALL = ("failed to write whole buffer", "smaller than required")


class DecompressedTooLarge(ValueError):
    """The records decompress to more than the bound."""


def _snappy_raw(data: bytes | memoryview, max_bytes: int | None) -> bytes:
    if max_bytes is not None:
        size = cramjam.snappy.decompress_raw_len(data)  # the block's length preamble
        if size > max_bytes:
            raise DecompressedTooLarge(f"a snappy block of {size} bytes (at most {max_bytes})")
    return bytes(cramjam.snappy.decompress_raw(data))


def _snappy(data: bytes, max_bytes: int | None) -> bytes:
    if not data.startswith(_XERIAL_MAGIC):
        return _snappy_raw(data, max_bytes)
    # Java clients frame snappy in xerial blocks: 16-byte header, then (size, block)*.
    out = bytearray()
    pos = 16
    while pos + 4 <= len(data):
        size = int.from_bytes(data[pos : pos + 4], "big")
        pos += 4
        left = None if max_bytes is None else max_bytes - len(out)
        out += _snappy_raw(memoryview(data)[pos : pos + size], left)
        pos += size
    return bytes(out)


def _bounded(codec: Any, data: bytes, max_bytes: int) -> bytes:
    """Decompress into buffers of growing size, never past `max_bytes`."""
    size = min(max_bytes, max(1 << 16, 8 * len(data)))
    while True:
        out = bytearray(size)
        try:
            written = codec.decompress_into(data, out)
        except cramjam.DecompressionError as exc:
            if not any(text in str(exc) for text in _TOO_SMALL):
                raise
            if size >= max_bytes:
                raise DecompressedTooLarge(
                    f"records decompress to more than {max_bytes} bytes"
                ) from exc
            size = min(max_bytes, size * 4)
            continue
        return memoryview(out)[:written].tobytes()


def decompress(codec: int, data: bytes, max_bytes: int | None = None) -> bytes:
    """The records of a batch body, decompressed; at most `max_bytes` of them when given
    (DecompressedTooLarge past that)."""
    if codec == NONE:
        return data
    if codec == SNAPPY:
        return _snappy(data, max_bytes)
    module = {GZIP: cramjam.gzip, LZ4: cramjam.lz4, ZSTD: cramjam.zstd}.get(codec)
    if module is None:
        raise ValueError(f"unknown compression codec {codec}")
    if max_bytes is not None:
        return _bounded(module, data, max_bytes)
    return bytes(module.decompress(data))


@dataclass(frozen=True, slots=True)
class RecordPosition:
    offset_delta: int
    timestamp: int


def record_positions(
    batch: bytes | memoryview, *, offsets_in_headers: bool
) -> Iterator[RecordPosition]:
    """(offset delta, timestamp) of every record of a coordinate's bytes, decompressing as
    needed. A coordinate may hold a run of batches (`batch_runs`; `offsets_in_headers` says
    which kind); deltas are then relative to the first batch's base offset."""
    first_base = read_header(batch).base_offset
    for base, view in batches_in_range(batch, first_base, offsets_in_headers=offsets_in_headers):
        header = read_header(view)
        body = decompress(header.compression, bytes(view[HEADER_SIZE:]), MAX_DECOMPRESSED_BYTES)
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
    batch: bytes | memoryview, base_offset: int, timestamp: int, *, offsets_in_headers: bool
) -> tuple[int, int] | None:
    """(offset, timestamp) of the first record whose timestamp is >= `timestamp`."""
    for record in record_positions(batch, offsets_in_headers=offsets_in_headers):
        if record.timestamp >= timestamp:
            return base_offset + record.offset_delta, record.timestamp
    return None
