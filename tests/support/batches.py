"""Build v2 record batches by hand, for tests that need exact bytes."""

from __future__ import annotations

import struct

import cramjam
import crc32c

CODECS = {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}


def _varint(value: int) -> bytes:
    value = (value << 1) ^ (value >> 63)
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def _bytes(value: bytes | None) -> bytes:
    return _varint(-1) if value is None else _varint(len(value)) + value


def encode_record(
    offset_delta: int,
    timestamp_delta: int,
    key: bytes | None,
    value: bytes | None,
    headers: tuple[tuple[str, bytes | None], ...] = (),
) -> bytes:
    body = b"\x00" + _varint(timestamp_delta) + _varint(offset_delta) + _bytes(key) + _bytes(value)
    body += _varint(len(headers))
    for name, hvalue in headers:
        body += _bytes(name.encode()) + _bytes(hvalue)
    return _varint(len(body)) + body


def build_batch(
    records: list[tuple[bytes | None, bytes | None]],
    *,
    base_timestamp: int = 1_700_000_000_000,
    timestamps: list[int] | None = None,
    codec: str = "none",
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
    base_offset: int = 0,
    attributes_extra: int = 0,
    magic: int = 2,
) -> bytes:
    timestamps = timestamps or [base_timestamp + i for i in range(len(records))]
    first = timestamps[0]
    body = b"".join(
        encode_record(i, ts - first, k, v)
        for i, ((k, v), ts) in enumerate(zip(records, timestamps, strict=True))
    )
    if codec == "gzip":
        body = bytes(cramjam.gzip.compress(body))
    elif codec == "snappy":
        body = bytes(cramjam.snappy.compress_raw(body))
    elif codec == "lz4":
        body = bytes(cramjam.lz4.compress(body))
    elif codec == "zstd":
        body = bytes(cramjam.zstd.compress(body))
    attributes = CODECS[codec] | attributes_extra
    after_crc = (
        struct.pack(
            ">hiqqqhii",
            attributes,
            len(records) - 1,
            first,
            max(timestamps),
            producer_id,
            producer_epoch,
            base_sequence,
            len(records),
        )
        + body
    )
    crc = crc32c.crc32c(after_crc)
    head = struct.pack(">qiibI", base_offset, 4 + 1 + 4 + len(after_crc), -1, magic, crc)
    return head + after_crc
