"""A plain v2 record batch built from stored records, for logs whose records live as
rows rather than as client-written batches (`__consumer_offsets`).

Uncompressed, no producer id, create-time timestamps, partition leader epoch 0 (what every
Lakelog partition reports). Offsets may have gaps, as in a compacted Kafka log: each
record's offset delta says where it is."""

from __future__ import annotations

import struct
from collections.abc import Sequence

import crc32c

from lakelog.log.protocol.records import ATTRIBUTES_OFFSET, CRC_OFFSET, LOG_OVERHEAD
from lakelog.log.protocol.varint import write_varint

_HEADER = struct.Struct(">qiibIhiqqqhii")
PARTITION_LEADER_EPOCH = 0


def _record(offset_delta: int, timestamp_delta: int, key: bytes, value: bytes | None) -> bytes:
    body = bytearray(b"\x00")  # attributes
    body += write_varint(timestamp_delta)
    body += write_varint(offset_delta)
    body += write_varint(len(key)) + key
    body += write_varint(-1) if value is None else write_varint(len(value)) + value
    body += b"\x00"  # no headers
    return write_varint(len(body)) + bytes(body)


def plain_batch(records: Sequence[tuple[int, int, bytes, bytes | None]]) -> bytes:
    """One batch of (offset, timestamp, key, value) records, offsets ascending; a None
    value is a tombstone."""
    if not records:
        raise ValueError("a batch needs at least one record")
    base_offset, base_timestamp = records[0][0], min(r[1] for r in records)
    body = b"".join(
        _record(offset - base_offset, timestamp - base_timestamp, key, value)
        for offset, timestamp, key, value in records
    )
    header = _HEADER.pack(
        base_offset,
        _HEADER.size - LOG_OVERHEAD + len(body),
        PARTITION_LEADER_EPOCH,
        2,
        0,  # crc, set below
        0,  # attributes
        records[-1][0] - base_offset,
        base_timestamp,
        max(r[1] for r in records),
        -1,  # producerId
        -1,  # producerEpoch
        -1,  # baseSequence
        len(records),
    )
    out = bytearray(header) + body
    crc = crc32c.crc32c(memoryview(out)[ATTRIBUTES_OFFSET:])
    out[CRC_OFFSET : CRC_OFFSET + 4] = crc.to_bytes(4, "big")
    return bytes(out)
