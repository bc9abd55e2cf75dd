import pytest
from hypothesis import given
from hypothesis import strategies as st

from lakelog.log.protocol.record_reader import first_offset_at_or_after, record_positions
from lakelog.log.protocol.records import (
    InvalidBatch,
    base_offset_bytes,
    read_header,
    split_batches,
    validate,
    with_log_append_time,
)
from tests.support.batches import CODECS, build_batch


def test_header_fields_and_crc() -> None:
    batch = build_batch(
        [(b"k", b"v"), (None, None)], producer_id=7, producer_epoch=1, base_sequence=5
    )
    (view,) = list(split_batches(batch))
    header = validate(view)
    assert header.record_count == 2
    assert header.producer_id == 7 and header.base_sequence == 5
    assert header.size == len(batch)


def test_several_batches_split() -> None:
    data = build_batch([(b"a", b"1")]) + build_batch([(b"b", b"2"), (b"c", b"3")])
    sizes = [validate(b).record_count for b in split_batches(data)]
    assert sizes == [1, 2]


def test_bad_crc_is_corrupt() -> None:
    batch = bytearray(build_batch([(b"k", b"v")]))
    batch[-1] ^= 0xFF
    with pytest.raises(InvalidBatch) as info:
        validate(next(split_batches(batch)))
    assert info.value.corrupt


def test_old_magic_rejected() -> None:
    batch = build_batch([(b"k", b"v")], magic=1)
    with pytest.raises(InvalidBatch) as info:
        list(split_batches(batch))
    assert info.value.old_magic


@pytest.mark.parametrize("data", [b"", b"\x00" * 5, build_batch([(b"k", b"v")])[:-3]])
def test_truncated_input_rejected(data: bytes) -> None:
    with pytest.raises(InvalidBatch):
        list(split_batches(data))


def test_patch_offset_keeps_crc() -> None:
    batch = build_batch([(b"k", b"v")])
    patched = base_offset_bytes(42) + batch[8:]
    assert read_header(patched).base_offset == 42
    validate(memoryview(patched))


def test_log_append_time_patch() -> None:
    batch = build_batch([(b"k", b"v")])
    patched = with_log_append_time(batch, 1234)
    header = validate(memoryview(patched))
    assert header.max_timestamp == 1234 and header.timestamp_type == 1


@pytest.mark.parametrize("codec", list(CODECS))
def test_record_timestamps_every_codec(codec: str) -> None:
    timestamps = [100, 105, 103, 200]
    batch = build_batch([(b"k", b"v" * 50)] * 4, timestamps=timestamps, codec=codec)
    assert [r.timestamp for r in record_positions(batch, offsets_in_headers=False)] == timestamps
    assert first_offset_at_or_after(batch, 10, 104, offsets_in_headers=False) == (11, 105)
    assert first_offset_at_or_after(batch, 10, 201, offsets_in_headers=False) is None


@given(
    st.lists(
        st.tuples(st.binary(max_size=20) | st.none(), st.binary(max_size=50) | st.none()),
        min_size=1,
        max_size=20,
    )
)
def test_any_records_round_trip_header(records: list[tuple[bytes | None, bytes | None]]) -> None:
    header = validate(memoryview(build_batch(records)))
    assert header.records_count == len(records)
