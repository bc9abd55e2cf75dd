"""Writing record batches v2, for compaction's rewrites: the kept records re-encoded with
their original offset and timestamp deltas, compressed with the batch's own codec, under
the original header (base offset, lastOffsetDelta, timestamps, producer fields and
attributes unchanged) with a new record count, length and CRC32C.

Snappy is written in the xerial framing Java clients write (every client reads it);
lz4 as an LZ4 frame, as Kafka does."""

from __future__ import annotations

import struct
from collections.abc import Sequence

import cramjam
import crc32c

from lakelog.log.protocol.record_reader import GZIP, LZ4, NONE, SNAPPY, ZSTD
from lakelog.log.protocol.records import ATTRIBUTES_OFFSET, CRC_OFFSET, HEADER_SIZE, BatchHeader
from lakelog.log.protocol.varint import write_varint

_HEADER = struct.Struct(">qiibIhiqqqhii")
_XERIAL_HEADER = b"\x82SNAPPY\x00" + struct.pack(">ii", 1, 1)
_XERIAL_BLOCK = 32 * 1024


def _bytes_field(data: bytes | None) -> bytes:
    if data is None:
        return write_varint(-1)
    return write_varint(len(data)) + data


def encode_record(
    offset_delta: int,
    timestamp_delta: int,
    key: bytes | None,
    value: bytes | None,
    headers: Sequence[tuple[str, bytes | None]] = (),
) -> bytes:
    """One record of a v2 batch, with its length prefix."""
    body = bytearray(b"\x00")  # attributes: unused
    body += write_varint(timestamp_delta)
    body += write_varint(offset_delta)
    body += _bytes_field(key)
    body += _bytes_field(value)
    body += write_varint(len(headers))
    for name, header_value in headers:
        body += _bytes_field(name.encode())
        body += _bytes_field(header_value)
    return write_varint(len(body)) + bytes(body)


def compress(codec: int, data: bytes) -> bytes:
    if codec == NONE:
        return data
    if codec == GZIP:
        return bytes(cramjam.gzip.compress(data))
    if codec == SNAPPY:
        out = bytearray(_XERIAL_HEADER)
        for start in range(0, len(data), _XERIAL_BLOCK):
            block = bytes(cramjam.snappy.compress_raw(data[start : start + _XERIAL_BLOCK]))
            out += struct.pack(">i", len(block)) + block
        return bytes(out)
    if codec == LZ4:
        return bytes(cramjam.lz4.compress(data))
    if codec == ZSTD:
        return bytes(cramjam.zstd.compress(data))
    raise ValueError(f"unknown compression codec {codec}")


def rebuild_batch(header: BatchHeader, base_offset: int, records: Sequence[bytes]) -> bytes:
    """A batch with `header`'s fields (base offset replaced) holding `records` (encoded
    with deltas relative to that header), compressed with the header's codec."""
    body = compress(header.compression, b"".join(records))
    out = bytearray(HEADER_SIZE + len(body))
    _HEADER.pack_into(
        out,
        0,
        base_offset,
        len(out) - 12,
        header.partition_leader_epoch,
        2,
        0,
        header.attributes,
        header.last_offset_delta,
        header.base_timestamp,
        header.max_timestamp,
        header.producer_id,
        header.producer_epoch,
        header.base_sequence,
        len(records),
    )
    out[HEADER_SIZE:] = body
    crc = crc32c.crc32c(memoryview(out)[ATTRIBUTES_OFFSET:])
    out[CRC_OFFSET : CRC_OFFSET + 4] = crc.to_bytes(4, "big")
    return bytes(out)
