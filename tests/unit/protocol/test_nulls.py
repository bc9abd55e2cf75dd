"""Null arrays where Kafka's schema allows none: found by path, allowed ones left alone."""

from __future__ import annotations

import struct

import pytest
from kio.index import load_request_schema
from kio.serial import entity_reader

import lakelog.server.api  # noqa: F401  (registers the handlers)
from lakelog.log.protocol.frames import api_schema, encode_response
from lakelog.log.protocol.nulls import wrong_null
from lakelog.server.api.outage import build_error_response
from lakelog.server.api.registry import HANDLERS
from lakelog.util.errors import ErrorCode


def read(api_key: int, version: int, payload: bytes) -> object:
    request, size = entity_reader(load_request_schema(api_key, version))(
        memoryview(payload).toreadonly(), 0
    )
    assert size == len(payload)
    return request


def string(text: str) -> bytes:
    return struct.pack(">h", len(text)) + text.encode()


NULL_ARRAY = struct.pack(">i", -1)


def test_top_level_null_array_is_found() -> None:
    # ListOffsets v1: replica_id, topics=null
    request = read(2, 1, struct.pack(">i", -1) + NULL_ARRAY)
    assert wrong_null(request, 2, 1) == "topics"


def test_nested_null_array_is_found() -> None:
    # OffsetCommit v2: group, generation, member, retention, one topic with partitions=null
    payload = (
        string("g")
        + struct.pack(">i", 1)
        + string("m")
        + struct.pack(">q", -1)
        + struct.pack(">i", 1)
        + string("t")
        + NULL_ARRAY
    )
    assert wrong_null(read(8, 2, payload), 8, 2) == "topics.partitions"


@pytest.mark.parametrize(
    ("api_key", "version", "payload"),
    [
        pytest.param(3, 1, NULL_ARRAY, id="metadata-all-topics"),
        pytest.param(9, 2, string("g") + NULL_ARRAY, id="offset-fetch-all-topics"),
    ],
)
def test_nullable_arrays_pass(api_key: int, version: int, payload: bytes) -> None:
    assert wrong_null(read(api_key, version, payload), api_key, version) is None


def metadata_by_id(version: int) -> bytes:
    # one topic: a topic id, name = null (compact), the topic's tagged fields; then the
    # request's flags (v10 has one more) and tagged fields
    topic = b"\x11" * 16 + b"\x00" + b"\x00"
    flags = b"\x01\x00" if version >= 11 else b"\x01\x00\x00"
    return b"\x02" + topic + flags + b"\x00"


def test_metadata_null_name_needs_v12() -> None:
    assert wrong_null(read(3, 10, metadata_by_id(10)), 3, 10) == "topics.name (before v12)"
    assert wrong_null(read(3, 12, metadata_by_id(12)), 3, 12) is None


@pytest.mark.parametrize("api_key", sorted(HANDLERS))
def test_invalid_request_answers_encode(api_key: int) -> None:
    """Every API version with a top-level error code gets an encodable INVALID_REQUEST
    answer; the others get None (the connection is closed)."""
    spec = HANDLERS[api_key]
    for version in range(spec.min_version, spec.max_version + 1):
        response = build_error_response(
            api_key, version, ErrorCode.invalid_request, "bad body", "cluster"
        )
        schema = api_schema(api_key, version)
        assert schema is not None
        if "error_code" not in schema.response_cls.__dataclass_fields__:
            assert response is None
            continue
        assert response is not None
        assert response.error_code == ErrorCode.invalid_request
        encode_response(schema, 7, response, header_flexible=schema.flexible)
