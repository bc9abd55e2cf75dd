"""Source batches made ready to store: splitting a fetch (partial tails dropped), the CRC
and header checks that make a batch poison, producer-id rewriting with a fresh CRC, and
control batches' commit/abort type."""

from __future__ import annotations

import crc32c
import pytest

from lakelog.coordinator.mirror_types import PID_CEILING, mirrored_producer_id
from lakelog.log.protocol.control_batch import control_batch
from lakelog.log.protocol.records import ATTRIBUTES_OFFSET, read_header, validate
from lakelog.mirror.batches import (
    PoisonBatch,
    control_type,
    prepare,
    prepare_partition,
    split_fetched,
)
from tests.support.batches import build_batch

TRANSACTIONAL = 0x10


def _batch(base: int, count: int = 2, pid: int = -1, txn: bool = False) -> bytes:
    return build_batch(
        [(b"k%d" % i, b"v%d" % i) for i in range(count)],
        base_offset=base,
        producer_id=pid,
        producer_epoch=0 if pid >= 0 else -1,
        base_sequence=0 if pid >= 0 else -1,
        attributes_extra=TRANSACTIONAL if txn else 0,
    )


def test_pids_map_into_the_positive_range_and_back_apart() -> None:
    assert mirrored_producer_id(0) == PID_CEILING - 1
    assert mirrored_producer_id(41) == PID_CEILING - 42
    assert mirrored_producer_id(-1) == -1
    assert all(mirrored_producer_id(p) >= 0 for p in (0, 1, 2**40, PID_CEILING - 1))


def test_split_drops_a_partial_tail() -> None:
    data = _batch(0) + _batch(2, 3)
    whole = bytearray(data + _batch(5)[:30])
    parts = list(split_fetched(memoryview(whole)))
    assert [bytes(p) for p in parts] == [_batch(0), _batch(2, 3)]
    assert list(split_fetched(memoryview(bytearray(b"\x00" * 5)))) == []


def test_split_refuses_impossible_lengths_and_old_magic() -> None:
    bad = bytearray(_batch(0))
    bad[8:12] = (3).to_bytes(4, "big")
    with pytest.raises(PoisonBatch, match="too small"):
        list(split_fetched(memoryview(bad)))
    old = bytearray(_batch(0))
    old[16] = 1
    with pytest.raises(PoisonBatch, match="magic 1"):
        list(split_fetched(memoryview(old)))


def test_prepare_rewrites_the_producer_id_and_the_crc() -> None:
    raw = bytearray(_batch(7, 3, pid=12, txn=True))
    prepared = prepare(memoryview(raw))
    assert (prepared.base_offset, prepared.last_offset) == (7, 9)
    assert prepared.producer_id == PID_CEILING - 13
    assert prepared.is_transactional and prepared.control_type == -1
    header = validate(memoryview(raw))  # the stored bytes carry a correct CRC
    assert header.producer_id == PID_CEILING - 13
    plain = bytearray(_batch(0))
    before = bytes(plain)
    assert prepare(memoryview(plain)).producer_id == -1
    assert bytes(plain) == before  # nothing to rewrite, nothing touched


def test_a_flipped_byte_is_poison() -> None:
    raw = bytearray(_batch(0, 4, pid=3))
    raw[-3] ^= 0xFF
    with pytest.raises(PoisonBatch, match="CRC mismatch"):
        prepare(memoryview(raw))


def test_control_batches_carry_their_type() -> None:
    for kind in (0, 1):
        raw = bytearray(control_batch(40, 5, 2, kind, 123))
        assert control_type(memoryview(raw)) == kind
        prepared = prepare(memoryview(raw))
        assert (prepared.control_type, prepared.producer_id) == (kind, PID_CEILING - 6)
        assert read_header(raw).crc == crc32c.crc32c(bytes(raw[ATTRIBUTES_OFFSET:]))


def test_prepare_partition_skips_batches_before_the_start_and_stops_at_poison() -> None:
    good = _batch(0, 2) + _batch(2, 2) + _batch(4, 1)
    bad = bytearray(_batch(5, 2))
    bad[-1] ^= 1
    buffer = bytearray(good + bytes(bad) + _batch(7, 1))
    result = prepare_partition(memoryview(buffer), start=2)
    assert [b.base_offset for b in result.batches] == [2, 4]
    assert result.poison is not None and "CRC mismatch" in result.poison
    clean = prepare_partition(memoryview(bytearray(good)), start=3)
    assert [b.base_offset for b in clean.batches] == [2, 4] and clean.poison is None
