"""The admin client's request frames parse on the broker's side, flexible or not."""

from __future__ import annotations

import struct

import pytest
from kio.index import load_payload_module
from kio.static.constants import EntityType

from lakelog.admin.wire import encode_request
from lakelog.log.protocol.frames import api_schema, decode_body, parse_header
from lakelog.server.api.context import build


@pytest.mark.parametrize("version", [2, 4, 5, 7])
def test_create_topics_frame_roundtrip(version: int) -> None:
    m = load_payload_module(19, version, EntityType.request)
    topic = m.CreatableTopic(
        name="t",
        num_partitions=3,
        replication_factor=3,
        assignments=(),
        configs=(m.CreatableTopicConfig(name="retention.ms", value="1"),),
    )
    request = build(m.CreateTopicsRequest, topics=(topic,), validate_only=True)
    frame = encode_request(19, version, 42, "me", request)
    (size,) = struct.unpack_from(">i", frame)
    assert size == len(frame) - 4
    body = memoryview(frame[4:])
    header = parse_header(body)
    assert (header.api_key, header.api_version, header.correlation_id) == (19, version, 42)
    assert header.client_id == "me"
    schema = api_schema(19, version)
    assert schema is not None
    decoded = decode_body(schema, body, header)
    assert decoded == request
