"""keyless_record_indexes: which records a compacted topic refuses, by their index in the
batch (what a Produce response's record_errors lists, KIP-467), compressed or not."""

from __future__ import annotations

import pytest

from lakelog.log.protocol.record_keys import all_records_keyed, keyless_record_indexes
from lakelog.log.protocol.records import InvalidBatch
from tests.support.batches import CODECS, build_batch


@pytest.mark.parametrize("codec", list(CODECS))
def test_indexes_of_keyless_records(codec: str) -> None:
    records = [(b"a", b"1"), (None, b"2"), (b"", b"3"), (None, None), (b"b", None), (None, b"x")]
    batch = build_batch(records, codec=codec)
    assert keyless_record_indexes(batch) == [1, 3, 5]
    assert not all_records_keyed(batch)


@pytest.mark.parametrize("codec", ["none", "zstd"])
def test_all_keyed_batch_has_none(codec: str) -> None:
    batch = build_batch([(b"a", b"1"), (b"", None)], codec=codec)
    assert keyless_record_indexes(batch) == []
    assert all_records_keyed(batch)


def test_truncated_records_are_corrupt() -> None:
    batch = bytearray(build_batch([(b"a", b"1" * 100), (None, b"2")]))
    del batch[-60:]
    with pytest.raises(InvalidBatch) as info:
        keyless_record_indexes(bytes(batch))
    assert info.value.corrupt
