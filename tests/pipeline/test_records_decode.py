"""Record decoding for the pipeline: every codec, headers, nulls, offsets and timestamps as
the coordinator assigns them, and corrupt input as an error rather than a crash."""

from __future__ import annotations

import struct

import cramjam
import crc32c
import pyarrow as pa
import pytest

from lakelog.pipeline.records import (
    RECORD_SCHEMA,
    Record,
    RecordColumns,
    RecordDecodeError,
    decode_batch,
)
from tests.support.batches import CODECS, encode_record

BASE_TS = 1_700_000_000_000
XERIAL_HEADER = b"\x82SNAPPY\x00" + struct.pack(">ii", 1, 1)

RecordSpec = tuple[bytes | None, bytes | None, tuple[tuple[str, bytes | None], ...]]

RECORDS: list[RecordSpec] = [
    (b"k0", b"v0", ()),
    (None, b"no key", (("h", b"1"),)),
    (b"no value", None, (("dup", b"a"), ("dup", b"b"), ("null", None))),
    (b"", b"", (("", b""),)),
    (bytes(range(256)), bytes(1000), (("bin", bytes([0, 255])),)),
    (b"k5", "ünïcode".encode(), (("ключ", "значение".encode()),)),
]


def _compress(codec: str, body: bytes) -> bytes:
    if codec == "gzip":
        return bytes(cramjam.gzip.compress(body))
    if codec == "snappy":
        return bytes(cramjam.snappy.compress_raw(body))
    if codec == "xerial":
        half = len(body) // 2
        out = XERIAL_HEADER
        for block in (body[:half], body[half:]):
            chunk = bytes(cramjam.snappy.compress_raw(block))
            out += struct.pack(">i", len(chunk)) + chunk
        return out
    if codec == "lz4":
        return bytes(cramjam.lz4.compress(body))
    if codec == "zstd":
        return bytes(cramjam.zstd.compress(body))
    return body


def build(
    records: list[RecordSpec],
    *,
    codec: str = "none",
    base_offset: int = 0,
    offset_step: int = 1,
    log_append_time: bool = False,
) -> bytes:
    """A v2 batch with headers (tests.support.batches builds none); `offset_step` > 1 leaves
    gaps between offset deltas, as compaction does."""
    body = b"".join(
        encode_record(i * offset_step, i, key, value, headers)
        for i, (key, value, headers) in enumerate(records)
    )
    attributes = CODECS["snappy" if codec == "xerial" else codec] | (0x08 * log_append_time)
    last_delta = (len(records) - 1) * offset_step
    after_crc = struct.pack(
        ">hiqqqhii",
        attributes,
        last_delta,
        BASE_TS,
        BASE_TS + len(records) - 1,
        -1,
        -1,
        -1,
        len(records),
    ) + _compress(codec, body)
    crc = crc32c.crc32c(after_crc)
    return struct.pack(">qiibI", base_offset, 4 + 1 + 4 + len(after_crc), -1, 2, crc) + after_crc


@pytest.mark.parametrize("codec", ["none", "gzip", "snappy", "xerial", "lz4", "zstd"])
def test_every_codec_decodes_every_field(codec: str) -> None:
    batch = build(RECORDS, codec=codec, base_offset=7)
    got = decode_batch(batch, base_offset=1000)
    assert got == [
        Record(1000 + i, BASE_TS + i, 0, key, value, headers)
        for i, (key, value, headers) in enumerate(RECORDS)
    ]


def test_stored_base_offset_is_used_without_the_coordinators() -> None:
    assert [r.offset for r in decode_batch(build(RECORDS[:3], base_offset=40))] == [40, 41, 42]


def test_offset_window_and_gaps() -> None:
    batch = build(RECORDS, base_offset=0, offset_step=3)  # offsets 0, 3, 6, ... 15
    columns = RecordColumns()
    added = columns.add_batch(batch, base_offset=100, min_offset=104, end_offset=112)
    assert added == 2
    arrow = columns.to_arrow()
    assert arrow.column("offset").to_pylist() == [106, 109]
    assert arrow.column("key").to_pylist() == [RECORDS[2][0], RECORDS[3][0]]


def test_log_append_time_from_the_coordinator_overrides_client_times() -> None:
    records = decode_batch(build(RECORDS[:3]), log_append_time=1_800_000_000_000)
    assert {(r.timestamp, r.timestamp_type) for r in records} == {(1_800_000_000_000, 1)}


def test_log_append_time_batch_uses_its_max_timestamp() -> None:
    records = decode_batch(build(RECORDS[:3], log_append_time=True))
    assert {(r.timestamp, r.timestamp_type) for r in records} == {(BASE_TS + 2, 1)}


def test_columns_accumulate_batches_into_one_arrow_batch() -> None:
    columns = RecordColumns()
    columns.add_batch(build(RECORDS, codec="zstd"), base_offset=0)
    columns.add_batch(build(RECORDS[:2], codec="lz4"), base_offset=len(RECORDS))
    arrow = columns.to_arrow()
    assert arrow.schema == RECORD_SCHEMA
    assert arrow.num_rows == len(RECORDS) + 2
    assert arrow.column("offset").to_pylist() == list(range(len(RECORDS) + 2))
    assert arrow.column("key").to_pylist()[:3] == [b"k0", None, b"no value"]
    assert arrow.column("headers").to_pylist()[2] == [
        {"key": "dup", "value": b"a"},
        {"key": "dup", "value": b"b"},
        {"key": "null", "value": None},
    ]
    assert arrow.column("timestampType").type == pa.int32()


def test_empty_columns_make_an_empty_arrow_batch() -> None:
    assert RecordColumns().to_arrow().num_rows == 0


def test_crc_mismatch_is_an_error() -> None:
    batch = bytearray(build(RECORDS))
    batch[-1] ^= 0xFF
    with pytest.raises(RecordDecodeError, match="CRC"):
        decode_batch(bytes(batch))


@pytest.mark.parametrize(
    "damage",
    [
        pytest.param(lambda b: b[:40], id="shorter-than-header"),
        pytest.param(lambda b: b[:-5], id="truncated-records"),
        pytest.param(lambda b: b[:16] + b"\x01" + b[17:], id="magic-1"),
        pytest.param(lambda b: b[:57] + struct.pack(">i", 50) + b[61:], id="count-too-big"),
        pytest.param(lambda b: b[:61] + b"\xff" * 12 + b[73:], id="garbage-varints"),
    ],
)
def test_malformed_batches_raise_decode_errors(damage: object) -> None:
    batch = build(RECORDS)
    broken = damage(batch)  # type: ignore[operator]
    with pytest.raises(RecordDecodeError):
        decode_batch(broken, verify_crc=False)


def test_corrupt_compressed_body_is_an_error() -> None:
    batch = bytearray(build(RECORDS, codec="gzip"))
    batch[70:80] = b"\x00" * 10
    with pytest.raises(RecordDecodeError):
        decode_batch(bytes(batch), verify_crc=False)


@pytest.mark.parametrize("codec", ["none", "gzip", "xerial", "lz4", "zstd"])
@pytest.mark.parametrize("append_time", [-1, 1_800_000_000_000])
def test_the_plain_decoder_and_the_columns_agree(codec: str, append_time: int) -> None:
    """The broker's compaction decodes with `decode_batch` (plain Python: the broker has no
    numpy); the Spark source and export with `RecordColumns`. Same bytes, same records."""
    for flagged in (False, True):
        batch = build(RECORDS, codec=codec, base_offset=7, log_append_time=flagged)
        columns = RecordColumns()
        columns.add_batch(batch, base_offset=500, log_append_time=append_time)
        plain = decode_batch(batch, base_offset=500, log_append_time=append_time)
        assert plain == list(columns.records())
        assert [r.offset for r in plain] == list(range(500, 500 + len(RECORDS)))
