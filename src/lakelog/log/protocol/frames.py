"""Kafka request framing without I/O: request headers in, response frames out.

A frame is a 4-byte big-endian size then that many bytes. The net layer reads each frame
into its own buffer and hands it here; nothing here touches a socket.
"""

from __future__ import annotations

import io
import struct
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from functools import cache
from typing import Any

from kio.index import load_request_schema, load_response_schema
from kio.serial import entity_reader, entity_writer

from lakelog.log.protocol.bounded import OutOfBounds, check_body
from lakelog.log.protocol.varint import VarintError, skip_tagged_fields

API_VERSIONS_KEY = 18
_HEADER = struct.Struct(">hhi")
_SIZE = struct.Struct(">i")
_SIZE_CORRELATION = struct.Struct(">ii")


class MalformedRequest(ValueError):
    """The frame cannot be parsed; the connection must be closed."""


@dataclass(frozen=True, slots=True)
class RequestHeader:
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None
    body_offset: int


@dataclass(frozen=True, slots=True)
class ApiSchema:
    """kio's classes and codecs for one (api key, version)."""

    request_cls: type
    response_cls: type
    flexible: bool
    read_request: Callable[[Any, int], tuple[Any, int]]
    write_response: Callable[[Any, Any], None]


@cache
def api_schema(api_key: int, api_version: int) -> ApiSchema | None:
    try:
        request_cls = load_request_schema(api_key, api_version)
        response_cls = load_response_schema(api_key, api_version)
    except Exception:
        return None
    flexible = bool(request_cls.__flexible__)
    return ApiSchema(
        request_cls,
        response_cls,
        flexible,
        entity_reader(request_cls),
        entity_writer(response_cls),
    )


def parse_header(frame: memoryview, flexible: bool | None = None) -> RequestHeader:
    """Parse the request header. `flexible` (header v2) is decided from the API version
    when not given; unknown APIs are parsed as header v1 (enough to answer or close)."""
    if len(frame) < 10:
        raise MalformedRequest("frame shorter than a request header")
    api_key, api_version, correlation_id = _HEADER.unpack_from(frame, 0)
    client_len = int.from_bytes(frame[8:10], "big", signed=True)
    pos = 10
    client_id: str | None = None
    if client_len >= 0:
        if pos + client_len > len(frame):
            raise MalformedRequest("client id overruns the frame")
        client_id = bytes(frame[pos : pos + client_len]).decode("utf-8", "replace")
        pos += client_len
    if flexible is None:
        schema = api_schema(api_key, api_version)
        flexible = bool(schema and schema.flexible)
        if api_key == API_VERSIONS_KEY and api_version >= 3:
            flexible = True
    if flexible:
        try:
            pos = skip_tagged_fields(frame, pos)
        except VarintError as exc:
            raise MalformedRequest(f"bad tagged fields in header: {exc}") from exc
    return RequestHeader(api_key, api_version, correlation_id, client_id, pos)


def decode_body(schema: ApiSchema, frame: memoryview, header: RequestHeader) -> Any:
    """The kio request object; MalformedRequest when the body does not parse.

    Every length in the body is checked against the bytes present before kio sees it:
    kio's native decoder aborts the process on a huge compact-array length
    (lakelog.log.protocol.bounded)."""
    body = frame.toreadonly()
    try:
        check_body(schema.request_cls, body, header.body_offset)
    except OutOfBounds as exc:
        raise MalformedRequest(f"request body out of bounds: {exc}") from exc
    try:
        request, _size = schema.read_request(body, header.body_offset)
    except Exception as exc:
        raise MalformedRequest(f"cannot decode request body: {exc}") from exc
    except BaseException as exc:
        # A Rust panic inside kio arrives as pyo3's PanicException, a BaseException.
        if not type(exc).__name__ == "PanicException":
            raise
        raise MalformedRequest(f"kio panicked decoding the request body: {exc}") from exc
    # Like Kafka, ignore bytes after the body: librdkafka's Metadata v13 carries some.
    return request


def response_header(correlation_id: int, flexible: bool) -> bytes:
    """The 4-byte frame size is NOT included."""
    header = correlation_id.to_bytes(4, "big", signed=True)
    return header + b"\x00" if flexible else header


def encode_response(
    schema: ApiSchema, correlation_id: int, response: Any, *, header_flexible: bool
) -> bytes:
    """One whole response frame (size prefix included), encoded by kio."""
    out = io.BytesIO()
    out.write(b"\x00\x00\x00\x00")
    out.write(response_header(correlation_id, header_flexible))
    schema.write_response(out, response)
    data = out.getbuffer()
    _SIZE.pack_into(data, 0, len(data) - 4)
    del data
    return out.getvalue()


async def encode_response_sliced(
    schema: ApiSchema,
    correlation_id: int,
    response: Any,
    *,
    header_flexible: bool,
    pause: Callable[[], Awaitable[None]],
) -> bytes:
    """`encode_response` for a response with a long top-level array: the same bytes, with
    `pause()` after each of its entries so other connections are served meanwhile
    (`sliced`)."""
    from lakelog.log.protocol.sliced import write_sliced

    out = io.BytesIO()
    out.write(b"\x00\x00\x00\x00")
    out.write(response_header(correlation_id, header_flexible))
    await write_sliced(out, response, pause)
    data = out.getbuffer()
    _SIZE.pack_into(data, 0, len(data) - 4)
    del data
    return out.getvalue()


def frame_prefix(correlation_id: int, body_size: int, flexible: bool) -> bytes:
    """Size prefix and response header for a hand-encoded body of `body_size` bytes."""
    if flexible:
        return _SIZE_CORRELATION.pack(body_size + 5, correlation_id) + b"\x00"
    return _SIZE_CORRELATION.pack(body_size + 4, correlation_id)
