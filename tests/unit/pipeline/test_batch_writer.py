"""Compaction's batch rebuilding: kept records re-encoded under the original header, with
the batch's codec and a fresh CRC, read back by the pipeline's decoder and the broker's
header checks."""

from __future__ import annotations

import crc32c
import pytest

from lakelog.log.protocol.batch_runs import batches_in_range
from lakelog.log.protocol.record_keys import all_records_keyed
from lakelog.log.protocol.records import ATTRIBUTES_OFFSET, InvalidBatch, read_header
from lakelog.pipeline.batch_writer import encode_record, rebuild_batch
from lakelog.pipeline.records import decode_batch
from tests.support.batches import CODECS, build_batch

RECORDS = [(b"k1", b"v1"), (b"k2", None), (b"k1", b"v1-new"), (None, b"keyless"), (b"", b"")]


@pytest.mark.parametrize("codec", list(CODECS))
def test_rebuild_keeps_header_offsets_and_codec(codec: str) -> None:
    original = build_batch(RECORDS, codec=codec, producer_id=7, producer_epoch=2, base_sequence=40)
    header = read_header(original)
    records = decode_batch(original, base_offset=0)
    kept = [records[1], records[3]]
    encoded = [
        encode_record(r.offset, r.timestamp - header.base_timestamp, r.key, r.value, r.headers)
        for r in kept
    ]
    rebuilt = rebuild_batch(header, 1000, encoded)

    new = read_header(rebuilt)
    assert crc32c.crc32c(rebuilt[ATTRIBUTES_OFFSET:]) == new.crc
    assert new.size == len(rebuilt)
    assert new.base_offset == 1000
    assert new.records_count == 2
    assert new.compression == CODECS[codec]
    for name in (
        "attributes",
        "last_offset_delta",
        "base_timestamp",
        "max_timestamp",
        "producer_id",
        "producer_epoch",
        "base_sequence",
        "partition_leader_epoch",
    ):
        assert getattr(new, name) == getattr(header, name), name
    again = decode_batch(rebuilt, base_offset=1000)
    assert [(r.offset, r.timestamp, r.key, r.value) for r in again] == [
        (1001, records[1].timestamp, b"k2", None),
        (1003, records[3].timestamp, None, b"keyless"),
    ]


def test_runs_of_batches_and_keyed_check() -> None:
    first = build_batch([(b"a", b"1"), (b"b", b"2")], base_offset=0)
    second = build_batch([(b"c", b"3")], base_offset=12)
    run = list(batches_in_range(first + second, 10, offsets_in_headers=True))
    assert [(base, len(view)) for base, view in run] == [(10, len(first)), (12, len(second))]
    with pytest.raises(InvalidBatch):
        list(batches_in_range(first + second[:-1], 10, offsets_in_headers=True))

    assert all_records_keyed(build_batch([(b"a", b"1"), (b"", None)], codec="zstd"))
    assert not all_records_keyed(build_batch([(b"a", b"1"), (None, b"2")], codec="lz4"))
