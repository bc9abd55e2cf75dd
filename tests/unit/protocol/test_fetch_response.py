"""The hand-encoded Fetch response must parse with kio's schema for every version served."""

import uuid

import pytest
from kio.index import load_response_schema
from kio.serial import entity_reader

from lakelog.log.protocol.fetch_response import PartitionData, encode_fetch_response
from tests.support.batches import build_batch


@pytest.mark.parametrize("version", range(4, 18))
def test_hand_encoded_fetch_parses_with_kio(version: int) -> None:
    batch = build_batch([(b"k", b"v")])
    parts = [
        PartitionData(0, 0, 10, 10, 2, None, [batch[:8], batch[8:]], len(batch)),
        PartitionData(1, 1, -1, -1, -1, [(5, 7)], [], 0),
    ]
    t_id, u_id = uuid.uuid4(), uuid.uuid4()
    names: tuple[str | uuid.UUID, str | uuid.UUID] = ("t", "u") if version < 13 else (t_id, u_id)
    topics = [(names[0], parts), (names[1], [])]
    body = b"".join(bytes(p) for p in encode_fetch_response(version, topics))
    cls = load_response_schema(1, version)
    response, size = entity_reader(cls)(body, 0)
    assert size == len(body)
    (t, u) = response.responses
    if version < 13:
        assert t.topic == "t" and u.topic == "u"
    else:
        assert t.topic_id == t_id and u.topic_id == u_id
    assert u.partitions == ()
    p0, p1 = t.partitions
    assert p0.high_watermark == 10 and p0.records == batch
    assert p1.error_code == 1 and p1.aborted_transactions[0].producer_id == 5
    if version >= 5:
        assert p0.log_start_offset == 2
