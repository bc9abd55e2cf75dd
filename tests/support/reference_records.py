"""The pipeline's per-record Python decoder as it was before the numpy decoder (issue 15),
kept as the reference the property tests compare `lakelog.pipeline.records` with."""

from __future__ import annotations

from collections.abc import Iterator

import pyarrow as pa

from lakelog.log.protocol.records import read_header
from lakelog.pipeline.record_decode import (
    CREATE_TIME,
    LOG_APPEND_TIME,
    Record,
    RecordDecodeError,
)
from lakelog.pipeline.record_decode import batch_body as _body
from lakelog.pipeline.record_decode import varint as _varint
from lakelog.pipeline.records import HEADER_TYPE, RECORD_SCHEMA

__all__ = ["RecordColumns", "decode_batch"]


class RecordColumns:
    """Records of many batches, gathered column by column for one Arrow record batch."""

    __slots__ = ("headers", "keys", "offsets", "timestamp_types", "timestamps", "values")

    def __init__(self) -> None:
        self.offsets: list[int] = []
        self.timestamps: list[int] = []
        self.timestamp_types: list[int] = []
        self.keys: list[bytes | None] = []
        self.values: list[bytes | None] = []
        self.headers: list[list[tuple[str, bytes | None]]] = []

    def __len__(self) -> int:
        return len(self.offsets)

    def add_batch(
        self,
        batch: bytes | memoryview,
        *,
        base_offset: int | None = None,
        log_append_time: int = -1,
        min_offset: int = 0,
        end_offset: int | None = None,
        verify_crc: bool = True,
    ) -> int:
        """Append the batch's records with offsets in [min_offset, end_offset); returns how
        many were appended.

        `base_offset`: the offset the coordinator assigned (default: the stored header's).
        `log_append_time` >= 0: the batch is LogAppendTime and every record takes that time.
        Raises RecordDecodeError on corrupt input (and on a CRC mismatch if `verify_crc`).
        """
        body, count, base_timestamp, _max_ts, attributes = _body(batch, verify_crc)
        if base_offset is None:
            base_offset = read_header(batch).base_offset
        if log_append_time >= 0:
            ts_type = LOG_APPEND_TIME
        else:
            ts_type = LOG_APPEND_TIME if attributes & 0x08 else CREATE_TIME
        if ts_type == LOG_APPEND_TIME and log_append_time < 0:
            log_append_time = _max_ts
        end = end_offset if end_offset is not None else 1 << 63
        offsets, timestamps, keys, values, headers = (
            self.offsets,
            self.timestamps,
            self.keys,
            self.values,
            self.headers,
        )
        added = 0
        pos = 0
        size = len(body)
        try:
            for _ in range(count):
                length, pos = _varint(body, pos)
                record_end = pos + length
                if length < 0 or record_end > size:
                    raise RecordDecodeError("record length out of bounds")
                pos += 1  # attributes: unused in v2
                ts_delta, pos = _varint(body, pos)
                offset_delta, pos = _varint(body, pos)
                offset = base_offset + offset_delta
                if offset < min_offset or offset >= end:
                    pos = record_end
                    continue
                key_len, pos = _varint(body, pos)
                if key_len < 0:
                    key = None
                else:
                    key = body[pos : pos + key_len]
                    pos += key_len
                value_len, pos = _varint(body, pos)
                if value_len < 0:
                    value = None
                else:
                    value = body[pos : pos + value_len]
                    pos += value_len
                header_count, pos = _varint(body, pos)
                record_headers: list[tuple[str, bytes | None]] = []
                for _h in range(header_count):
                    name_len, pos = _varint(body, pos)
                    if name_len < 0:
                        raise RecordDecodeError("null header key")
                    name = body[pos : pos + name_len].decode("utf-8", "replace")
                    pos += name_len
                    hvalue_len, pos = _varint(body, pos)
                    if hvalue_len < 0:
                        hvalue = None
                    else:
                        hvalue = body[pos : pos + hvalue_len]
                        pos += hvalue_len
                    record_headers.append((name, hvalue))
                if pos != record_end:
                    raise RecordDecodeError("record fields do not fill the record length")
                offsets.append(offset)
                timestamps.append(
                    log_append_time if ts_type == LOG_APPEND_TIME else base_timestamp + ts_delta
                )
                keys.append(key)
                values.append(value)
                headers.append(record_headers)
                added += 1
        except IndexError as exc:
            raise RecordDecodeError("records end before the batch's record count") from exc
        self.timestamp_types.extend([ts_type] * added)
        return added

    def to_arrow(self) -> pa.RecordBatch:
        """The gathered records as one Arrow record batch with `RECORD_SCHEMA`."""
        return pa.RecordBatch.from_arrays(
            [
                pa.array(self.offsets, pa.int64()),
                pa.array(self.timestamps, pa.int64()),
                pa.array(self.timestamp_types, pa.int32()),
                pa.array(self.keys, pa.binary()),
                pa.array(self.values, pa.binary()),
                pa.array(self.headers, HEADER_TYPE),
            ],
            schema=RECORD_SCHEMA,
        )

    def records(self) -> Iterator[Record]:
        for i, offset in enumerate(self.offsets):
            yield Record(
                offset,
                self.timestamps[i],
                self.timestamp_types[i],
                self.keys[i],
                self.values[i],
                tuple(self.headers[i]),
            )


def decode_batch(
    batch: bytes | memoryview,
    *,
    base_offset: int | None = None,
    log_append_time: int = -1,
    verify_crc: bool = True,
) -> list[Record]:
    """Every record of one v2 batch (see `RecordColumns.add_batch` for the arguments)."""
    columns = RecordColumns()
    columns.add_batch(
        batch, base_offset=base_offset, log_append_time=log_append_time, verify_crc=verify_crc
    )
    return list(columns.records())
