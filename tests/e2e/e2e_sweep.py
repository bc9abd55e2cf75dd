"""Request bodies no client sends: every field of a kio request class written by hand with
a chosen shape (null, empty or one-entry arrays, null or empty strings, boundary integers),
including nulls where the protocol does not allow them, to sweep every API and version.

Nothing here imports the broker; `decodes` tells what a strict Kafka parser accepts.
"""

from __future__ import annotations

import dataclasses
import socket
import struct
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from kio.index import load_request_schema, load_response_schema
from kio.serial import entity_reader
from kio.serial._introspect import classify_field, get_field_tag, is_optional

_INT_RANGES = {
    "int8": (">b", 8, True),
    "int16": (">h", 16, True),
    "error_code": (">h", 16, True),
    "int32": (">i", 32, True),
    "timedelta_i32": (">i", 32, True),
    "int64": (">q", 64, True),
    "timedelta_i64": (">q", 64, True),
    "datetime_i64": (">q", 64, True),
    "uint8": (">B", 8, False),
    "uint16": (">H", 16, False),
    "uint32": (">I", 32, False),
    "uint64": (">Q", 64, False),
}

CAPPED_INTS = frozenset({"num_partitions", "count", "replication_factor", "max_wait"})
"""The sweep's `max` gives these 1: partition counts (their upper bound is the partition
limits' business) and Fetch's long-poll wait (a Fetch with nothing to return waits that
long, as in Kafka, and the connection's later answers wait behind it)."""


@dataclass(frozen=True, slots=True)
class Shape:
    """How to fill every field. `arrays` per nesting depth (the last repeats): "null",
    "empty" or "one". `strings`: "null", "empty" or "name" (`name`). `ints`: "zero",
    "neg1", "one", "min" or "max". `nulls_only_where_allowed`: null arrays and strings only
    where the schema says nullable, valid values elsewhere."""

    id: str
    arrays: tuple[str, ...]
    strings: str
    ints: str
    nulls_only_where_allowed: bool = False
    name: str = "sweep"
    client_id: str | None = "sweep"
    """The request header's client id (None: a null string)."""


SHAPES = (
    Shape("all-null", ("null",), "null", "neg1", client_id=None),
    Shape("null-arrays", ("null",), "name", "one", client_id=None),
    Shape("all-empty", ("empty",), "empty", "zero"),
    Shape("nested-null", ("one", "null"), "name", "neg1"),
    Shape("nested-null-strings", ("one", "null"), "null", "zero"),
    Shape("deep-null", ("one", "one", "null"), "name", "one"),
    Shape("nullable-null", ("one",), "null", "one", nulls_only_where_allowed=True),
    Shape("empty-strings", ("one",), "empty", "neg1", client_id=""),
    Shape("int-min", ("one",), "name", "min"),
    Shape("int-max", ("one",), "name", "max"),
    Shape("plain", ("one",), "name", "one"),
    Shape("nested-empty-min", ("one", "empty"), "name", "min"),
    Shape("nested-empty-neg1", ("one", "empty"), "name", "neg1"),
    Shape("nested-empty-max", ("one", "empty"), "name", "max"),
    # The longest legacy strings: answers that quote them (error messages, member ids made
    # of the client id) are longer still.
    Shape("long-strings", ("one",), "name", "one", name="n" * 32767, client_id="c" * 32767),
)


def _uvarint(value: int) -> bytes:
    out = bytearray()
    while value > 0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def _int_value(kind: str, field_name: str, shape: Shape) -> int:
    _, bits, signed = _INT_RANGES[kind]
    low, high = (-(1 << (bits - 1)), (1 << (bits - 1)) - 1) if signed else (0, (1 << bits) - 1)
    choice = shape.ints
    if choice == "max" and field_name in CAPPED_INTS:
        choice = "one"
    if choice == "neg1" and not signed:
        choice = "max"
    return {"zero": 0, "neg1": -1, "one": 1, "min": low, "max": high}[choice]


class _Writer:
    def __init__(self, flexible: bool, shape: Shape) -> None:
        self.flexible = flexible
        self.shape = shape
        self.out = bytearray()

    def length(self, n: int | None, *, array: bool) -> None:
        """Array or string length; None writes the null marker."""
        if self.flexible:
            self.out += _uvarint(0 if n is None else n + 1)
        elif n is None:
            self.out += struct.pack(">i" if array else ">h", -1)
        else:
            self.out += struct.pack(">i" if array else ">h", n)

    def bytes_length(self, n: int | None) -> None:
        if self.flexible:
            self.out += _uvarint(0 if n is None else n + 1)
        else:
            self.out += struct.pack(">i", -1 if n is None else n)

    def entity(self, cls: type, depth: int) -> None:
        for f in dataclasses.fields(cls):
            if get_field_tag(f) is not None:
                continue  # tagged fields: left out (the count below is 0)
            self.field(f, depth)
        if self.flexible:
            self.out += b"\x00"

    def _null(self, f: dataclasses.Field[Any], wanted: bool) -> bool:
        if not wanted:
            return False
        return is_optional(f) if self.shape.nulls_only_where_allowed else True

    def field(self, f: dataclasses.Field[Any], depth: int) -> None:
        fc = classify_field(f)
        kind = f.metadata.get("kafka_type")
        shape = self.shape
        if fc.is_array:
            mode = shape.arrays[min(depth, len(shape.arrays) - 1)]
            if shape.nulls_only_where_allowed:
                mode = "null" if is_optional(f) else "one"
            if mode == "null":
                self.length(None, array=True)
                return
            count = 1 if mode == "one" else 0
            self.length(count, array=True)
            for _ in range(count):
                if dataclasses.is_dataclass(fc.type_):
                    self.entity(fc.type_, depth + 1)
                else:
                    self.scalar(kind, f, depth + 1, nullable=False)
            return
        if dataclasses.is_dataclass(fc.type_):
            if is_optional(f):
                if shape.arrays[min(depth, len(shape.arrays) - 1)] == "null":
                    self.out += b"\xff"
                    return
                self.out += b"\x01"
            self.entity(fc.type_, depth)
            return
        self.scalar(kind, f, depth, nullable=is_optional(f))

    def scalar(
        self, kind: str | None, f: dataclasses.Field[Any], depth: int, *, nullable: bool
    ) -> None:
        shape = self.shape
        if kind in _INT_RANGES:
            fmt = _INT_RANGES[kind][0]
            self.out += struct.pack(fmt, _int_value(kind, f.name, shape))
        elif kind == "bool":
            self.out += b"\x01" if shape.ints in ("one", "max", "neg1") else b"\x00"
        elif kind == "float64":
            self.out += struct.pack(">d", -1.0 if shape.ints == "neg1" else 0.0)
        elif kind == "uuid":
            value = {"zero": 0, "one": 1, "neg1": (1 << 128) - 1}.get(shape.ints, 0)
            self.out += uuid.UUID(int=value).bytes
        elif kind == "string":
            if shape.strings == "null" and (nullable or not shape.nulls_only_where_allowed):
                self.length(None, array=False)
            else:
                text = b"" if shape.strings == "empty" else shape.name.encode()
                self.length(len(text), array=False)
                self.out += text
        elif kind in ("bytes", "records"):
            if shape.strings == "null" and (nullable or not shape.nulls_only_where_allowed):
                self.bytes_length(None)
            else:
                data = b"" if shape.strings == "empty" else b"\x00\x01garbage"
                self.bytes_length(len(data))
                self.out += data
        else:
            raise TypeError(f"no sweep value for {f.name} ({kind})")


def body(api_key: int, api_version: int, shape: Shape) -> bytes:
    cls = load_request_schema(api_key, api_version)
    writer = _Writer(bool(cls.__flexible__), shape)
    writer.entity(cls, 0)
    return bytes(writer.out)


def frame(
    api_key: int,
    api_version: int,
    correlation_id: int,
    payload: bytes,
    client_id: str | None = "sweep",
) -> bytes:
    """Request header v1 (v2 for flexible versions) and `payload`, size-prefixed."""
    cls = load_request_schema(api_key, api_version)
    header = struct.pack(">hhi", api_key, api_version, correlation_id)
    if client_id is None:
        header += struct.pack(">h", -1)
    else:
        cid = client_id.encode()
        header += struct.pack(">h", len(cid)) + cid
    if cls.__flexible__:
        header += b"\x00"
    data = header + payload
    return struct.pack(">i", len(data)) + data


def decodes(api_key: int, api_version: int, payload: bytes) -> bool:
    """Whether a strict parser (Kafka's) accepts `payload`: kio reads it and no field the
    schema declares non-nullable came back None (kio reads a null array anywhere)."""
    cls = load_request_schema(api_key, api_version)
    try:
        request, _ = entity_reader(cls)(memoryview(payload).toreadonly(), 0)
    except Exception:
        return False
    # Metadata v10-11: null names are in the schema but Kafka refuses them (the response
    # cannot carry one before v12).
    if (
        api_key == 3
        and 10 <= api_version < 12
        and any(t.name is None for t in request.topics or ())
    ):
        return False
    return not any(True for _ in _wrong_nulls(request))


def _wrong_nulls(entity: Any) -> Iterator[str]:
    for f in dataclasses.fields(entity):
        value = getattr(entity, f.name)
        if value is None:
            if not is_optional(f) and get_field_tag(f) is None:
                yield f.name
            continue
        if isinstance(value, tuple):
            for item in value:
                if dataclasses.is_dataclass(item):
                    yield from _wrong_nulls(item)
        elif dataclasses.is_dataclass(value):
            yield from _wrong_nulls(value)


# ------------------------------------------------------------------- sending


@dataclass(frozen=True, slots=True)
class Outcome:
    api_key: int
    api_version: int
    shape: str
    decodes: bool
    result: str
    """"answered", "no answer" (acks=0, or still waiting when the probe came back),
    "closed", "hang", or "bad answer: ..." (a response kio cannot read)."""
    error_code: int | None = None
    """The answer's top-level error code, where its response has one."""

    @property
    def case(self) -> str:
        return f"{self.api_key}v{self.api_version}/{self.shape}"


PROBE_CORRELATION = 0x7FFF_0000
KIO_NEGATIVE_TIMESTAMP = "Cannot parse negative timestamp"
"""kio cannot read -1 in a timestamp field (DescribeTransactions' start time of a
transaction that has none), which Kafka sends too."""


Login = Callable[["socket.socket"], None]
"""Run on each new connection before the request (SASL authentication)."""


def send(
    port: int,
    api_key: int,
    api_version: int,
    payload: bytes,
    timeout: float = 10.0,
    login: Login | None = None,
    client_id: str | None = "sweep",
) -> tuple[str, int | None]:
    """Send one request then an ApiVersions v0 probe on the same connection and read until
    the probe's answer: (result, top-level error code). The request's own answer must
    decode with its response class, exactly. "answered, closed": answered, then closed."""
    from e2e_harness import HOST, recv_exact
    from e2e_wire import decode_response

    probe = struct.pack(">ihhih", 10, 18, 0, PROBE_CORRELATION, 0)
    with socket.create_connection((HOST, port), timeout=timeout) as sock:
        if login is not None:
            login(sock)
        sock.sendall(frame(api_key, api_version, 1, payload, client_id) + probe)
        result, code = "no answer", None
        while True:
            try:
                (size,) = struct.unpack(">i", recv_exact(sock, 4))
                data = recv_exact(sock, size)
            except TimeoutError:
                return "hang", code
            except OSError:
                return ("answered, closed" if result == "answered" else "closed"), code
            (correlation,) = struct.unpack_from(">i", data)
            if correlation == PROBE_CORRELATION:
                return result, code
            if correlation != 1 or result != "no answer":
                return f"bad answer: correlation id {correlation}", code
            try:
                _, response = decode_response(api_key, api_version, data)
            except Exception as exc:
                if KIO_NEGATIVE_TIMESTAMP not in str(exc):
                    return f"bad answer: {exc}", code
            else:
                error = getattr(response, "error_code", None)
                code = None if error is None else int(error)
            result = "answered"


def sasl_plain(user: str, password: str) -> Login:
    """A `Login` that authenticates with SaslHandshake v1 and SaslAuthenticate v1 (PLAIN)."""
    from e2e_harness import recv_exact
    from e2e_wire import decode_response, encode_request, request_class

    def login(sock: socket.socket) -> None:
        handshake = request_class(17, 1)
        sock.sendall(encode_request(17, 1, 1, handshake.SaslHandshakeRequest(mechanism="PLAIN")))
        (size,) = struct.unpack(">i", recv_exact(sock, 4))
        _, answer = decode_response(17, 1, recv_exact(sock, size))
        assert int(answer.error_code) == 0, answer
        auth = request_class(36, 1)
        token = b"\0" + user.encode() + b"\0" + password.encode()
        sock.sendall(encode_request(36, 1, 2, auth.SaslAuthenticateRequest(auth_bytes=token)))
        (size,) = struct.unpack(">i", recv_exact(sock, 4))
        _, answer = decode_response(36, 1, recv_exact(sock, size))
        assert int(answer.error_code) == 0, answer

    return login


def sweep(
    port: int,
    apis: dict[int, tuple[int, int]],
    shapes: tuple[Shape, ...] = SHAPES,
    login: Login | None = None,
) -> list[Outcome]:
    """Every shape of every version of every API, one connection each."""
    out = []
    for api_key, (low, high) in sorted(apis.items()):
        for version in range(low, high + 1):
            for shape in shapes:
                payload = body(api_key, version, shape)
                result, code = send(
                    port, api_key, version, payload, login=login, client_id=shape.client_id
                )
                ok = decodes(api_key, version, payload)
                out.append(Outcome(api_key, version, shape.id, ok, result, code))
    return out


def has_top_level_error(api_key: int, api_version: int) -> bool:
    return "error_code" in load_response_schema(api_key, api_version).__dataclass_fields__


def problem(outcome: Outcome) -> str | None:
    """What is wrong with `outcome`, or None: a request that decodes gets an answer (or
    none where none is due); one that does not gets INVALID_REQUEST where its response has
    a top-level error code, else a closed connection (as Kafka closes on a bad body)."""
    if outcome.decodes:
        if outcome.result in ("answered", "no answer"):
            return None
        return f"{outcome.case}: decodable request {outcome.result}"
    if has_top_level_error(outcome.api_key, outcome.api_version):
        if outcome.result == "answered" and outcome.error_code == INVALID_REQUEST:
            return None
        return f"{outcome.case}: undecodable request {outcome.result}, code {outcome.error_code}"
    if outcome.result == "closed":
        return None
    return f"{outcome.case}: undecodable request {outcome.result} (expected a close)"


INVALID_REQUEST = 42
