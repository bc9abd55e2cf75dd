"""The mirror's Fetch wire code against the broker's own Fetch encoder and kio's request
parser: every non-flexible version, records kept as slices of the frame buffer."""

from __future__ import annotations

import struct

import pytest
from kio.index import load_request_schema
from kio.serial import entity_reader

from lakelog.log.protocol.fetch_response import PartitionData, encode_fetch_response
from lakelog.mirror.wire import FetchAsk, FetchDecodeError, decode_fetch, encode_fetch
from lakelog.util.errors import ErrorCode
from tests.support.batches import build_batch


@pytest.mark.parametrize("version", range(4, 12))
def test_responses_decode_with_records_as_slices(version: int) -> None:
    records = build_batch([(b"k", b"v")], base_offset=5)
    parts = [
        PartitionData(
            0, 0, 10, 8, 2, aborted=[(7, 3)], records=[records], records_size=len(records)
        ),
        PartitionData(3, int(ErrorCode.offset_out_of_range), 10, 10, 4, aborted=None),
    ]
    body = b"".join(bytes(p) for p in encode_fetch_response(version, [("orders", parts)]))
    frame = bytearray(struct.pack(">i", 99) + body)
    error, got = decode_fetch(version, memoryview(frame))
    assert error == ErrorCode.none
    assert [
        (p.topic, p.partition, p.error, p.high_watermark, p.last_stable_offset) for p in got
    ] == [
        ("orders", 0, ErrorCode.none, 10, 8),
        ("orders", 3, ErrorCode.offset_out_of_range, 10, 10),
    ]
    assert got[0].log_start_offset == (2 if version >= 5 else -1)
    assert bytes(got[0].records) == records and len(got[1].records) == 0
    got[0].records[0] = 0xAB  # a writable view into the frame itself
    assert frame[frame.index(records[1:20]) - 1] == 0xAB


def test_truncated_responses_are_refused() -> None:
    body = b"".join(bytes(p) for p in encode_fetch_response(11, [("t", [PartitionData(0)])]))
    with pytest.raises(FetchDecodeError):
        decode_fetch(11, memoryview(bytearray(struct.pack(">i", 1) + body[:-3])))


@pytest.mark.parametrize("version", [4, 7, 11])
def test_requests_parse_as_kafka_fetch(version: int) -> None:
    asks = [FetchAsk("a", 0, 5, 1000), FetchAsk("a", 1, 0, 1000), FetchAsk("b", 2, 9, 50)]
    frame = encode_fetch(version, 7, "mirror", asks, max_wait_ms=250, min_bytes=1, max_bytes=4096)
    assert struct.unpack_from(">i", frame)[0] == len(frame) - 4
    schema = load_request_schema(1, version)
    header, pos = entity_reader(schema.__header_schema__)(frame[4:], 0)
    assert (header.request_api_version, header.correlation_id) == (version, 7)
    request, _ = entity_reader(schema)(frame[4:], pos)
    assert request.isolation_level == 1 and request.max_bytes == 4096
    got = [(t.topic, p.partition, p.fetch_offset) for t in request.topics for p in t.partitions]
    assert got == [("a", 0, 5), ("a", 1, 0), ("b", 2, 9)]
