"""Build v2 record batches by hand, for tests that need exact bytes (records encoded as
compaction writes them: `lakelog.pipeline.batch_writer.encode_record`)."""

from __future__ import annotations

import struct

import cramjam
import crc32c

from lakelog.pipeline.batch_writer import encode_record

__all__ = ["CODECS", "build_batch", "encode_record"]

CODECS = {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}


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
