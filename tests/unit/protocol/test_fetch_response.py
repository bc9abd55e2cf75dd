"""The hand-encoded Fetch response must parse with kio's schema for every version served."""

import pytest
from kio.index import load_response_schema
from kio.serial import entity_reader

from lakelog.protocol.fetch_response import PartitionData, encode_fetch_response
from tests.support.batches import build_batch


@pytest.mark.parametrize("version", range(4, 13))
def test_hand_encoded_fetch_parses_with_kio(version: int) -> None:
    batch = build_batch([(b"k", b"v")])
    parts = [
        PartitionData(0, 0, 10, 10, 2, None, [batch[:8], batch[8:]], len(batch)),
        PartitionData(1, 1, -1, -1, -1, [(5, 7)], [], 0),
    ]
    body = b"".join(bytes(p) for p in encode_fetch_response(version, [("t", parts), ("u", [])]))
    cls = load_response_schema(1, version)
    response, size = entity_reader(cls)(body, 0)
    assert size == len(body)
    (t, u) = response.responses
    assert t.topic == "t" and u.topic == "u" and u.partitions == ()
    p0, p1 = t.partitions
    assert p0.high_watermark == 10 and p0.records == batch
    assert p1.error_code == 1 and p1.aborted_transactions[0].producer_id == 5
    if version >= 5:
        assert p0.log_start_offset == 2
