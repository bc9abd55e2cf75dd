"""Decode one v2 record batch into `Record` objects, in plain Python (no numpy, no Arrow).

The broker compacts `cleanup.policy=compact` topics itself (`server/background/compaction`),
and the broker installs without the pipeline's `spark` extra (numpy, pyarrow), so the
decoder compaction uses must not need them. The Spark source and export decode many
batches at once into Arrow columns instead (`pipeline.records.RecordColumns`); both give
the same records for the same bytes (tests/pipeline/test_records_decode.py runs both).
"""

from __future__ import annotations

from dataclasses import dataclass

import crc32c

from lakelog.log.protocol.record_reader import decompress
from lakelog.log.protocol.records import ATTRIBUTES_OFFSET, HEADER_SIZE, InvalidBatch, read_header

CREATE_TIME = 0
LOG_APPEND_TIME = 1


class RecordDecodeError(ValueError):
    """The batch bytes are not a well-formed, intact v2 record batch."""


@dataclass(frozen=True, slots=True)
class Record:
    offset: int
    timestamp: int
    """ms since the epoch (the append time on LogAppendTime topics)."""
    timestamp_type: int
    """0 CreateTime, 1 LogAppendTime."""
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...]


def varint(buf: bytes, pos: int) -> tuple[int, int]:
    """A zig-zag varint; IndexError past the end (callers turn it into RecordDecodeError)."""
    byte = buf[pos]
    pos += 1
    if byte < 0x80:
        return (byte >> 1) ^ -(byte & 1), pos
    raw = byte & 0x7F
    shift = 7
    while True:
        byte = buf[pos]
        pos += 1
        raw |= (byte & 0x7F) << shift
        if byte < 0x80:
            return (raw >> 1) ^ -(raw & 1), pos
        shift += 7
        if shift > 63:
            raise RecordDecodeError("varint longer than 10 bytes")


def batch_body(batch: bytes | memoryview, verify_crc: bool) -> tuple[bytes, int, int, int, int]:
    """(decompressed records, records count, base timestamp, max timestamp, attributes)."""
    if len(batch) < HEADER_SIZE:
        raise RecordDecodeError(f"batch of {len(batch)} bytes is shorter than its header")
    header = read_header(batch)
    if header.magic != 2:
        raise RecordDecodeError(f"magic {header.magic} batches are not supported")
    if header.size != len(batch):
        raise RecordDecodeError(f"batch length {header.size} but {len(batch)} bytes stored")
    if verify_crc and crc32c.crc32c(memoryview(batch)[ATTRIBUTES_OFFSET:]) != header.crc:
        raise RecordDecodeError("CRC mismatch")
    try:
        body = decompress(header.compression, bytes(memoryview(batch)[HEADER_SIZE:]))
    except (ValueError, InvalidBatch) as exc:
        raise RecordDecodeError(f"cannot decompress: {exc}") from exc
    except Exception as exc:  # cramjam raises its own error types
        raise RecordDecodeError(f"cannot decompress: {exc}") from exc
    return (
        body,
        header.records_count,
        header.base_timestamp,
        header.max_timestamp,
        header.attributes,
    )


def timestamp_rule(attributes: int, log_append_time: int, max_timestamp: int) -> tuple[int, int]:
    """(timestamp type, the append time every record takes, or -1 for CreateTime)."""
    if log_append_time >= 0:
        return LOG_APPEND_TIME, log_append_time
    if attributes & 0x08:
        return LOG_APPEND_TIME, max_timestamp
    return CREATE_TIME, -1


def _field(body: bytes, pos: int) -> tuple[bytes | None, int]:
    length, pos = varint(body, pos)
    if length < 0:
        return None, pos
    return body[pos : pos + length], pos + length


def decode_batch(
    batch: bytes | memoryview,
    *,
    base_offset: int | None = None,
    log_append_time: int = -1,
    verify_crc: bool = True,
) -> list[Record]:
    """Every record of one v2 batch. `base_offset`: the offset the coordinator assigned
    (default: the stored header's); `log_append_time` >= 0: the batch is LogAppendTime
    and every record takes that time. RecordDecodeError on corrupt input (and on a CRC
    mismatch if `verify_crc`)."""
    body, count, base_timestamp, max_timestamp, attributes = batch_body(batch, verify_crc)
    if base_offset is None:
        base_offset = read_header(batch).base_offset
    ts_type, append_time = timestamp_rule(attributes, log_append_time, max_timestamp)
    records: list[Record] = []
    pos, size = 0, len(body)
    try:
        for _ in range(count):
            length, pos = varint(body, pos)
            end = pos + length
            if length < 0 or end > size:
                raise RecordDecodeError("record length out of bounds")
            pos += 1  # attributes: unused in v2
            ts_delta, pos = varint(body, pos)
            offset_delta, pos = varint(body, pos)
            if offset_delta < 0:
                # Before the batch's base offset: a damaged record (the columnar reader
                # drops it as outside the window; no Kafka writer makes one).
                raise RecordDecodeError("negative offset delta")
            key, pos = _field(body, pos)
            value, pos = _field(body, pos)
            header_count, pos = varint(body, pos)
            headers: list[tuple[str, bytes | None]] = []
            for _h in range(header_count):
                name, pos = _field(body, pos)
                if name is None:
                    raise RecordDecodeError("null header key")
                header_value, pos = _field(body, pos)
                headers.append((name.decode("utf-8", "replace"), header_value))
            if pos != end:
                raise RecordDecodeError("record fields do not fill the record length")
            timestamp = append_time if ts_type == LOG_APPEND_TIME else base_timestamp + ts_delta
            records.append(
                Record(base_offset + offset_delta, timestamp, ts_type, key, value, tuple(headers))
            )
    except IndexError as exc:
        raise RecordDecodeError("records end before the batch's record count") from exc
    return records
