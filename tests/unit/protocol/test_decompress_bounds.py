"""Decompression where the broker reads records is bounded (issue 12): zstd turns 8 KiB into
256 MiB, so a 1 MiB batch into a compacted topic (keyless check) or under a ListOffsets by
timestamp could have asked for 32 GiB."""

from __future__ import annotations

import os
import struct

import cramjam
import pytest

from lakelog.log.protocol.record_keys import keyless_record_indexes
from lakelog.log.protocol.record_reader import (
    GZIP,
    LZ4,
    MAX_DECOMPRESSED_BYTES,
    SNAPPY,
    ZSTD,
    DecompressedTooLarge,
    decompress,
)
from lakelog.log.protocol.records import InvalidBatch
from tests.support.batches import build_batch

CODECS = {
    GZIP: cramjam.gzip.compress,
    LZ4: cramjam.lz4.compress,
    ZSTD: cramjam.zstd.compress,
    SNAPPY: cramjam.snappy.compress_raw,
}


def xerial(data: bytes, block: int = 1 << 16) -> bytes:
    """Snappy framed the way Java clients write it: a 16-byte header, then (size, block)*."""
    out = bytearray(b"\x82SNAPPY\x00" + struct.pack(">ii", 1, 1))
    for i in range(0, len(data), block):
        chunk = bytes(cramjam.snappy.compress_raw(data[i : i + block]))
        out += struct.pack(">i", len(chunk)) + chunk
    return bytes(out)


@pytest.mark.parametrize("codec", list(CODECS))
@pytest.mark.parametrize(
    "data",
    [
        b"",
        b"x",
        os.urandom(100_000),
        bytes(1 << 16),  # exactly the first buffer
        bytes((1 << 16) + 1),
        bytes(3 << 20),  # ratio far above the first guess
    ],
    ids=["empty", "one", "random", "64k", "64k+1", "3MiB-zeros"],
)
def test_bounded_decompress_round_trips(codec: int, data: bytes) -> None:
    compressed = bytes(CODECS[codec](data))
    assert decompress(codec, compressed, 4 << 20) == data
    assert decompress(codec, compressed) == data


@pytest.mark.parametrize("codec", list(CODECS))
def test_more_than_the_bound_is_refused(codec: int) -> None:
    compressed = bytes(CODECS[codec](bytes(8 << 20)))
    with pytest.raises(DecompressedTooLarge):
        decompress(codec, compressed, 1 << 20)
    assert len(decompress(codec, compressed, 8 << 20)) == 8 << 20


def test_xerial_snappy_is_bounded_over_all_its_blocks() -> None:
    data = bytes(4 << 20)
    assert decompress(SNAPPY, xerial(data), 4 << 20) == data
    with pytest.raises(DecompressedTooLarge):
        decompress(SNAPPY, xerial(data), (4 << 20) - 1)


def test_a_snappy_length_preamble_is_checked_before_allocating() -> None:
    with pytest.raises(DecompressedTooLarge):
        decompress(SNAPPY, bytes.fromhex("ffffffff0f") + b"\x00" * 10, 1 << 20)


def test_corrupt_input_is_an_error_not_a_bigger_buffer() -> None:
    with pytest.raises(cramjam.DecompressionError):
        decompress(ZSTD, b"\x28\xb5\x2f\xfd" + os.urandom(64), 1 << 20)


def test_a_zstd_bomb_into_a_compacted_topic_is_a_corrupt_batch() -> None:
    """256 MiB of zeros in one record: an 8 KiB zstd body, refused without inflating it."""
    value = bytes(256 << 20)
    batch = build_batch([(None, value)], codec="zstd")
    del value
    assert len(batch) < 64 << 10
    assert MAX_DECOMPRESSED_BYTES < 256 << 20
    with pytest.raises(InvalidBatch, match="decompress to more than"):
        keyless_record_indexes(batch)
