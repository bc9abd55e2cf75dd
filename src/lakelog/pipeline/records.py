"""Decode the records of a v2 record batch, for the pipeline (Spark source, export, compaction).

The broker never decodes records; the pipeline must, and it wants columns: `RecordColumns`
collects the records of many batches column by column and hands them over as one Arrow
record batch, so a Spark task never builds a Python object per record beyond the key and
value bytes themselves. `decode_batch` gives plain `Record` objects for jobs that reason
about single records (compaction).

Stored batches are the producer's bytes: their baseOffset is whatever the client sent and,
on LogAppendTime topics, their timestamps are the client's. The coordinator knows the real
base offset and the append time, so callers pass them in (from the `BatchCoordinate`).
Decompression (gzip, snappy raw or xerial-framed, lz4 frame, zstd; all through cramjam) is
`lakelog.log.protocol.record_reader.decompress`, shared with the broker's ListOffsets path.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from lakelog.log.protocol.records import read_header
from lakelog.pipeline.record_decode import (
    CREATE_TIME,
    LOG_APPEND_TIME,
    Record,
    RecordDecodeError,
    batch_body,
    decode_batch,
    varint,
)

__all__ = [
    "HEADER_TYPE",
    "RECORD_SCHEMA",
    "Record",
    "RecordColumns",
    "RecordDecodeError",
    "decode_batch",
    "numpy_array",
    "numpy_values",
    "repeated_string",
]


HEADER_TYPE = pa.list_(pa.struct([pa.field("key", pa.string()), pa.field("value", pa.binary())]))
"""Kafka record headers as Spark's Kafka source types them: array<struct<key, value>>."""

RECORD_SCHEMA = pa.schema(
    [
        pa.field("offset", pa.int64(), nullable=False),
        pa.field("timestamp", pa.int64(), nullable=False),
        pa.field("timestampType", pa.int32(), nullable=False),
        pa.field("key", pa.binary()),
        pa.field("value", pa.binary()),
        pa.field("headers", HEADER_TYPE),
    ]
)
"""What `RecordColumns.to_arrow` returns: timestamps in ms since the epoch, as on the wire."""
PRODUCER_SCHEMA = RECORD_SCHEMA.append(pa.field("producerId", pa.int64(), nullable=False)).append(
    pa.field("producerEpoch", pa.int32(), nullable=False)
)
"""`to_arrow(producer=True)`: each record's batch's producer id and epoch (-1: none)."""


@dataclass(frozen=True, slots=True)
class _Batch:
    """What `to_arrow` needs of one added batch besides its records' positions."""

    count: int
    base_offset: int
    base_timestamp: int
    ts_type: int
    log_append_time: int
    min_offset: int
    end_offset: int
    producer_id: int = -1
    producer_epoch: int = -1


class RecordColumns:
    """Records of many batches, gathered for one Arrow record batch.

    `add_batch` only walks each batch's record lengths in Python (the one field that says
    where the next record starts); `to_arrow` decodes every other field of every record of
    every batch at once with numpy and points Arrow binary views into the decompressed
    bodies, so no Python object is made per record, key or value."""

    __slots__ = ("_batches", "_bodies", "_ends", "_kept", "_size", "_starts")

    def __init__(self) -> None:
        self._bodies: list[bytes] = []
        self._size = 0
        """Bytes in `_bodies`: where the next body starts in their concatenation."""
        self._starts: list[int] = []
        """Per record: where it starts after its length, in the concatenated bodies."""
        self._ends: list[int] = []
        """Per record: where it ends, in the concatenated bodies."""
        self._batches: list[_Batch] = []
        self._kept = 0

    def __len__(self) -> int:
        return self._kept

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
        Raises RecordDecodeError on corrupt input (and on a CRC mismatch if `verify_crc`);
        `to_arrow` checks the fields inside each record.
        """
        body, count, base_timestamp, _max_ts, attributes = batch_body(batch, verify_crc)
        header = read_header(batch)
        if base_offset is None:
            base_offset = header.base_offset
        if log_append_time >= 0:
            ts_type = LOG_APPEND_TIME
        else:
            ts_type = LOG_APPEND_TIME if attributes & 0x08 else CREATE_TIME
        if ts_type == LOG_APPEND_TIME and log_append_time < 0:
            log_append_time = _max_ts
        end = end_offset if end_offset is not None else 1 << 63
        shift = self._size
        starts: list[int] = []
        ends: list[int] = []
        pos = 0
        size = len(body)
        try:
            for _ in range(count):
                # Lengths of records under 8 KiB take one or two bytes: inline those.
                byte = body[pos]
                if byte < 0x80:
                    raw = byte
                    pos += 1
                else:
                    second = body[pos + 1]
                    if second < 0x80:
                        raw = (byte & 0x7F) | (second << 7)
                        pos += 2
                    else:
                        raw = -1
                if raw >= 0:
                    length = (raw >> 1) ^ -(raw & 1)
                else:
                    length, pos = varint(body, pos)
                record_end = pos + length
                if length < 0 or record_end > size:
                    raise RecordDecodeError("record length out of bounds")
                starts.append(shift + pos)
                ends.append(shift + record_end)
                pos = record_end
        except IndexError as exc:
            raise RecordDecodeError("records end before the batch's record count") from exc
        if count == 0:
            return 0
        if min_offset <= base_offset and base_offset + header.last_offset_delta < end:
            added = count  # the whole batch is inside the window
        else:
            # A batch across the window's edge: decode its offsets now to count.
            deltas, _ts, _pos = _offsets_and_times(
                np.frombuffer(body + bytes(_PAD), dtype=np.uint8),
                np.array(starts, dtype=np.int64) - shift,
                np.array(ends, dtype=np.int64) - shift,
            )
            offsets = deltas + base_offset
            inside = (offsets >= min_offset) & (offsets < min(end, _MAX_OFFSET))
            added = int(np.count_nonzero(inside))
            if not added:
                return 0
        self._starts.extend(starts)
        self._ends.extend(ends)
        self._bodies.append(body)
        self._size += size
        self._batches.append(
            _Batch(
                count,
                base_offset,
                base_timestamp,
                ts_type,
                log_append_time,
                min_offset,
                end,
                header.producer_id,
                header.producer_epoch,
            )
        )
        self._kept += added
        return added

    def to_arrow(self, *, producer: bool = False) -> pa.RecordBatch:
        """The gathered records as one Arrow record batch with `RECORD_SCHEMA` (with
        `producer`: `PRODUCER_SCHEMA`, two more columns).

        Raises RecordDecodeError if a record's fields do not fit in it."""
        # Padding: a varint of the last record read past its end stops at a zero.
        joined = b"".join([*self._bodies, bytes(_PAD)])
        data = pa.py_buffer(joined)
        buf = np.frombuffer(joined, dtype=np.uint8)
        ends = np.array(self._ends, dtype=np.int64)
        offset_delta, ts_delta, pos = _offsets_and_times(
            buf, np.array(self._starts, dtype=np.int64), ends
        )
        batches = self._batches
        counts = np.array([b.count for b in batches], dtype=np.int64)

        def per_record(values: list[int]) -> np.ndarray:
            return np.repeat(np.array(values, dtype=np.int64), counts)

        offsets = per_record([b.base_offset for b in batches]) + offset_delta
        keep = (offsets >= per_record([b.min_offset for b in batches])) & (
            offsets < per_record([min(b.end_offset, _MAX_OFFSET) for b in batches])
        )
        ts_types = per_record([b.ts_type for b in batches])
        timestamps = np.where(
            ts_types == LOG_APPEND_TIME,
            per_record([b.log_append_time for b in batches]),
            per_record([b.base_timestamp for b in batches]) + ts_delta,
        )
        producer_ids = producer_epochs = None
        if producer:
            producer_ids = per_record([b.producer_id for b in batches])
            producer_epochs = per_record([b.producer_epoch for b in batches])
        if not keep.all():
            offsets, timestamps, ts_types, pos, ends = (
                a[keep] for a in (offsets, timestamps, ts_types, pos, ends)
            )
            if producer_ids is not None and producer_epochs is not None:
                producer_ids, producer_epochs = producer_ids[keep], producer_epochs[keep]
        n = len(offsets)
        key_len, pos = _varints(buf, pos)
        key_start = pos
        pos = _within(pos + np.maximum(key_len, 0), ends)
        value_len, pos = _varints(buf, pos)
        value_start = pos
        pos = _within(pos + np.maximum(value_len, 0), ends)
        header_count, pos = _varints(buf, pos)
        _within(pos, ends)
        plain = header_count <= 0
        if not np.array_equal(pos[plain], ends[plain]):
            raise RecordDecodeError("record fields do not fill the record length")
        arrays = [
            numpy_array(offsets, pa.int64()),
            numpy_array(timestamps, pa.int64()),
            numpy_array(ts_types, pa.int32()),
            _binary(buf, data, key_start, key_len),
            _binary(buf, data, value_start, value_len),
            _headers(joined, pos, ends, header_count, n),
        ]
        if producer_ids is None or producer_epochs is None:
            return pa.RecordBatch.from_arrays(arrays, schema=RECORD_SCHEMA)
        arrays += [numpy_array(producer_ids, pa.int64()), numpy_array(producer_epochs, pa.int32())]
        return pa.RecordBatch.from_arrays(arrays, schema=PRODUCER_SCHEMA)

    def records(self) -> Iterator[Record]:
        rec = self.to_arrow()
        columns = [rec.column(name).to_pylist() for name in RECORD_SCHEMA.names]
        for offset, timestamp, ts_type, key, value, headers in zip(*columns, strict=True):
            yield Record(
                offset,
                timestamp,
                ts_type,
                key,
                value,
                tuple((h["key"], h["value"]) for h in headers),
            )


_PAD = 16
_INLINE = 12
"""Binary views hold values of up to 12 bytes inline, longer ones by buffer offset."""
_MAX_OFFSET = (1 << 63) - 1


# Arrays are built from buffers rather than with `pa.array`, `pa.scalar` or `pa.repeat`:
# the first of those calls in a process imports pandas when it is installed (pyarrow checks
# for pandas objects), ~0.2 s that every fresh Spark worker paid on its first read.


def numpy_array(values: np.ndarray, type: pa.DataType) -> pa.Array:
    """A non-null Arrow array of `type` (32/64-bit integers or timestamps) over `values`,
    without a copy when they already have the matching integer dtype."""
    width = type.bit_width
    data = np.ascontiguousarray(values, dtype=np.int64 if width == 64 else np.int32)
    if data.dtype.itemsize * 8 != width:
        raise TypeError(f"numpy_array: {type} is not a 32 or 64-bit type")
    return pa.Array.from_buffers(type, len(data), [None, pa.py_buffer(data)])


def numpy_values(array: pa.Array) -> np.ndarray:
    """The values of a non-null fixed-width Arrow array as a read-only numpy view."""
    dtype = np.int64 if array.type.bit_width == 64 else np.int32
    size = np.dtype(dtype).itemsize
    return np.frombuffer(
        array.buffers()[1], dtype=dtype, count=len(array), offset=array.offset * size
    )


def repeated_string(text: str, count: int) -> pa.Array:
    """`count` copies of `text` as an Arrow string array."""
    encoded = text.encode()
    offsets = np.arange(count + 1, dtype=np.int32) * np.int32(len(encoded))
    return pa.Array.from_buffers(
        pa.string(), count, [None, pa.py_buffer(offsets), pa.py_buffer(encoded * count)]
    )


def _binaries(items: list[bytes | None], type: pa.DataType) -> pa.Array:
    """A binary or string array of `items` (None: null)."""
    n = len(items)
    lengths = np.fromiter((0 if b is None else len(b) for b in items), dtype=np.int32, count=n)
    offsets = np.zeros(n + 1, dtype=np.int32)
    np.cumsum(lengths, out=offsets[1:])
    valid = np.fromiter((b is not None for b in items), dtype=bool, count=n)
    validity = None if valid.all() else pa.py_buffer(np.packbits(valid, bitorder="little"))
    data = b"".join(b for b in items if b is not None)
    return pa.Array.from_buffers(
        type,
        n,
        [validity, pa.py_buffer(offsets), pa.py_buffer(data)],
        null_count=n - int(valid.sum()),
    )


def _offsets_and_times(
    buf: np.ndarray, starts: np.ndarray, ends: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Each record's offset delta and timestamp delta, and where its key length starts.
    `starts`: where each record starts after its length (at its attributes byte)."""
    ts_delta, pos = _varints(buf, _within(starts + 1, ends))  # attributes: unused in v2
    _within(pos, ends)
    offset_delta, pos = _varints(buf, pos)
    return offset_delta, ts_delta, _within(pos, ends)


def _varints(buf: np.ndarray, pos: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The zig-zag varints at `pos`, decoded together, and the positions after them."""
    byte = buf[pos].astype(np.uint64)
    raw = byte & 0x7F
    pos = pos + 1
    more = np.flatnonzero(byte >= 0x80)
    shift = 7
    while more.size:
        if shift > 63:
            raise RecordDecodeError("varint longer than 10 bytes")
        at = pos[more]
        if at.max() >= len(buf):
            raise RecordDecodeError("records end before the batch's record count")
        byte = buf[at].astype(np.uint64)
        raw[more] |= (byte & 0x7F) << np.uint64(shift)
        pos[more] = at + 1
        more = more[byte >= 0x80]
        shift += 7
    value = (raw >> np.uint64(1)).astype(np.int64) ^ -(raw & np.uint64(1)).astype(np.int64)
    return value, pos


def _within(pos: np.ndarray, ends: np.ndarray) -> np.ndarray:
    if np.any(pos > ends):
        raise RecordDecodeError("record fields do not fill the record length")
    return pos


def _binary(buf: np.ndarray, data: pa.Buffer, starts: np.ndarray, lengths: np.ndarray) -> pa.Array:
    """Binary values `data[start:start+length]` (null where length < 0): binary views built
    with numpy, then one Arrow cast to plain binary (what Spark and Parquet take)."""
    n = len(starts)
    valid = lengths >= 0
    lens = np.where(valid, lengths, 0).astype(np.int32)
    views = np.zeros((n, 4), dtype=np.int32)
    views[:, 0] = lens
    short = np.flatnonzero(lens <= _INLINE)
    if short.size:
        inline = buf[starts[short, None] + np.arange(_INLINE)]
        inline[np.arange(_INLINE) >= lens[short, None]] = 0
        views[short, 1:] = inline.view(np.int32)
    long = np.flatnonzero(lens > _INLINE)
    if long.size:
        at = starts[long]
        views[long, 1] = buf[at[:, None] + np.arange(4)].view(np.int32)[:, 0]
        views[long, 3] = at
    validity = None if valid.all() else pa.py_buffer(np.packbits(valid, bitorder="little"))
    array = pa.Array.from_buffers(pa.binary_view(), n, [validity, pa.py_buffer(views), data])
    return array.cast(pa.binary())


def _headers(
    body: bytes, pos: np.ndarray, ends: np.ndarray, counts: np.ndarray, n: int
) -> pa.Array:
    """The headers column; records with headers are rare, so they are decoded in Python."""
    with_headers = np.flatnonzero(counts > 0)
    if not with_headers.size:
        return pa.ListArray.from_arrays(
            numpy_array(np.zeros(n + 1, dtype=np.int32), pa.int32()),
            pa.nulls(0, HEADER_TYPE.value_type),
            type=HEADER_TYPE,
        )
    sizes = np.zeros(n, dtype=np.int32)
    names: list[bytes | None] = []
    values: list[bytes | None] = []
    try:
        for i in with_headers.tolist():
            at = int(pos[i])
            for _h in range(int(counts[i])):
                name_len, at = varint(body, at)
                if name_len < 0:
                    raise RecordDecodeError("null header key")
                names.append(body[at : at + name_len].decode("utf-8", "replace").encode())
                at += name_len
                value_len, at = varint(body, at)
                if value_len < 0:
                    values.append(None)
                else:
                    values.append(body[at : at + value_len])
                    at += value_len
            if at != ends[i]:
                raise RecordDecodeError("record fields do not fill the record length")
            sizes[i] = counts[i]
    except IndexError as exc:
        raise RecordDecodeError("records end before the batch's record count") from exc
    offsets = np.zeros(n + 1, dtype=np.int32)
    np.cumsum(sizes, out=offsets[1:])
    entries = pa.StructArray.from_arrays(
        [_binaries(names, pa.string()), _binaries(values, pa.binary())],
        fields=list(HEADER_TYPE.value_type),
    )
    return pa.ListArray.from_arrays(numpy_array(offsets, pa.int32()), entries, type=HEADER_TYPE)
