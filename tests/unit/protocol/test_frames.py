import io

import pytest
from kio.index import load_request_schema
from kio.serial import entity_writer

from lakelog.log.protocol.frames import MalformedRequest, api_schema, decode_body, parse_header


def _frame(api_key: int, version: int, body_obj: object, client_id: str = "c") -> memoryview:
    cls = load_request_schema(api_key, version)
    header_cls = cls.__header_schema__
    out = io.BytesIO()
    fields = {
        "request_api_key": api_key,
        "request_api_version": version,
        "correlation_id": 7,
        "client_id": client_id,
    }
    entity_writer(header_cls)(out, header_cls(**fields))
    entity_writer(cls)(out, body_obj)
    return memoryview(bytearray(out.getvalue()))


def test_flexible_and_legacy_headers() -> None:
    from kio.schema.api_versions.v3.request import ApiVersionsRequest

    frame = _frame(18, 3, ApiVersionsRequest(client_software_name="x", client_software_version="1"))
    header = parse_header(frame)
    assert (header.api_key, header.api_version, header.correlation_id) == (18, 3, 7)
    assert header.client_id == "c"
    body = decode_body(api_schema(18, 3), frame, header)
    assert body.client_software_name == "x"


def test_trailing_bytes_ignored_like_kafka() -> None:
    from kio.schema.api_versions.v3.request import ApiVersionsRequest

    frame = _frame(18, 3, ApiVersionsRequest(client_software_name="x", client_software_version="1"))
    data = memoryview(bytearray(bytes(frame) + b"\x00\x01"))
    assert decode_body(api_schema(18, 3), data, parse_header(data)).client_software_name == "x"


def test_truncated_body_rejected() -> None:
    from kio.schema.api_versions.v3.request import ApiVersionsRequest

    frame = _frame(18, 3, ApiVersionsRequest(client_software_name="x", client_software_version="1"))
    data = memoryview(bytearray(bytes(frame)[:-3]))
    with pytest.raises(MalformedRequest):
        decode_body(api_schema(18, 3), data, parse_header(data))


@pytest.mark.parametrize("data", [b"", b"\x00\x12", b"\x00\x12\x00\x00\x00\x00\x00\x01\x00\x50"])
def test_short_frames_rejected(data: bytes) -> None:
    with pytest.raises(MalformedRequest):
        parse_header(memoryview(data))
