"""The bounds check that runs before kio decodes a request body (issue 12).

kio's native decoder aborts the whole process (SIGABRT) on a huge compact-array length, so
every case that could reach kio with a bad length runs its decode in a child process: a
hole in the guard then fails the test instead of killing the test runner.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import os
import struct
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kio.index import load_request_schema, load_response_schema
from kio.serial import entity_reader

from lakelog.log.protocol.bounded import OutOfBounds, check_body
from lakelog.log.protocol.frames import MalformedRequest, api_schema, decode_body, parse_header
from tests.support.request_samples import encode, frame, handled_versions, sample, sample_body

ROOT = Path(__file__).resolve().parents[3]
HUGE = bytes.fromhex("ffffffff0f")  # unsigned varint 2^32 - 1
I32 = struct.Struct(">i")
I16 = struct.Struct(">h")

METADATA_V12_CRASH = bytes.fromhex(
    "00000014"  # frame size 20
    "0003000c"  # Metadata v12
    "00000001"  # correlation id
    "000178"  # client id "x"
    "00"  # header tagged fields
    "ffffffff0f"  # topics: compact array of 2^32 - 2
    "0000"  # allow_auto_topic_creation, include_topic_authorized_operations
    "00"  # tagged fields
)
"""The 24-byte request that took the broker down: kio asked for 32 GiB and Rust aborted."""


def compact(text: bytes) -> bytes:
    return bytes([len(text) + 1]) + text


def legacy(text: bytes) -> bytes:
    return I16.pack(len(text)) + text


def produce_v7(transactional_id: bytes, records_length: int) -> bytes:
    """A Produce v7 body (acks 1, timeout 1000, topic "t", partition 0) up to and including
    the length of its one partition's records."""
    head = transactional_id + I16.pack(1) + I32.pack(1000)
    return head + I32.pack(1) + legacy(b"t") + I32.pack(1) + bytes(4) + I32.pack(records_length)


FETCH_V12_HEAD = I32.pack(-1) + I32.pack(500) + I32.pack(1) + I32.pack(1 << 20) + b"\x00"
FETCH_V12_HEAD += I32.pack(0) + I32.pack(-1)
FETCH_V12_EMPTY = FETCH_V12_HEAD + b"\x01" + b"\x01" + compact(b"")  # topics, forgotten, rack

BAD_BODIES: dict[str, tuple[int, int, bytes]] = {
    # flexible versions: compact lengths
    "metadata-v12-topics": (3, 12, HUGE + b"\x00\x00\x00"),
    "metadata-v12-topic-name": (3, 12, b"\x02" + bytes(16) + HUGE),
    "fetch-v12-nested-partitions": (1, 12, FETCH_V12_HEAD + b"\x02" + compact(b"t") + HUGE),
    "fetch-v12-forgotten-int32-array": (
        1,
        12,
        FETCH_V12_HEAD + b"\x01" + b"\x02" + compact(b"t") + HUGE,
    ),
    "fetch-v12-tag-count": (1, 12, FETCH_V12_EMPTY + HUGE),
    "fetch-v12-tag-size": (1, 12, FETCH_V12_EMPTY + b"\x01\x00" + HUGE),
    "fetch-v12-unknown-tag-size": (1, 12, FETCH_V12_EMPTY + b"\x01\x07" + HUGE),
    "fetch-v12-cluster-id-inside-tag": (1, 12, FETCH_V12_EMPTY + b"\x01\x00\x05" + HUGE),
    # kio reads on after a known tag's value, not after its size: a short value would let
    # it read unchecked bytes as the next tag
    "fetch-v12-tag-longer-than-value": (
        1,
        12,
        FETCH_V12_EMPTY + b"\x02\x00\x08" + compact(b"a") + b"\x01\x07" + HUGE + b"\x00\x00",
    ),
    "fetch-v12-partition-tag-size": (
        1,
        12,
        FETCH_V12_HEAD + b"\x02" + compact(b"t") + b"\x02" + bytes(32) + b"\x01\x00" + HUGE,
    ),
    "joingroup-v6-protocol-metadata-bytes": (
        11,
        6,
        compact(b"g")
        + I32.pack(10_000)
        + I32.pack(10_000)
        + compact(b"")
        + b"\x00"
        + compact(b"consumer")
        + b"\x02"
        + compact(b"range")
        + HUGE,
    ),
    "produce-v9-records": (
        0,
        9,
        b"\x00"
        + I16.pack(1)
        + I32.pack(1000)
        + b"\x02"
        + compact(b"t")
        + b"\x02"
        + bytes(4)
        + HUGE,
    ),
    "varint-six-bytes": (3, 12, bytes.fromhex("808080808001") + b"\x00\x00\x00"),
    "varint-unterminated": (3, 12, bytes.fromhex("ffffffff")),
    # non-flexible versions: int32 and int16 lengths, negative and null ones
    "metadata-v4-topics-int32-max": (3, 4, I32.pack(0x7FFFFFFF)),
    "metadata-v4-topics-minus-2": (3, 4, I32.pack(-2)),
    "produce-v7-records-int32-max": (0, 7, produce_v7(legacy(b""), 0x7FFFFFFF)),
    "produce-v7-records-minus-2": (0, 7, produce_v7(I16.pack(-1), -2)),
    "listoffsets-v1-null-non-nullable-topics": (2, 1, I32.pack(1) + I32.pack(-1)),
    "listoffsets-v6-null-non-nullable-topics": (2, 6, I32.pack(1) + b"\x00" + b"\x00" + b"\x00"),
    "findcoordinator-v0-null-key": (10, 0, I16.pack(-1)),
    "findcoordinator-v1-key-overruns": (10, 1, I16.pack(0x7FFF) + b"g" + b"\x00"),
    "offsetcommit-v2-string-minus-2": (8, 2, I16.pack(-2)),
}


def child_outcomes(frames: dict[str, bytes]) -> dict[str, str]:
    """Decode each frame as the broker does, in a child process; its exit code too."""
    script = (
        "import json, sys\n"
        "from tests.support.length_sweep import outcome\n"
        "frames = json.loads(sys.stdin.read())\n"
        "print(json.dumps({k: outcome(bytes.fromhex(v)) for k, v in frames.items()}))\n"
    )
    stdout = run_decoder(
        ["-c", script], input=json.dumps({k: v.hex() for k, v in frames.items()}), timeout=120
    )
    return dict(json.loads(stdout))


def run_decoder(args: list[str], timeout: float, input: str | None = None) -> str:
    """Run Python with `args` in a child process from the repository root; its stdout, once
    it has exited 0."""
    done = subprocess.run(
        [sys.executable, *args],
        input=input,
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        timeout=timeout,
    )
    assert done.returncode == 0, f"decoder process died ({done.returncode}): {done.stderr[-2000:]}"
    return done.stdout


def test_the_24_byte_metadata_v12_frame_is_rejected_before_kio() -> None:
    assert len(METADATA_V12_CRASH) == 24
    frame_body = METADATA_V12_CRASH[4:]
    cls = load_request_schema(3, 12)
    header = parse_header(memoryview(frame_body))
    assert (header.api_key, header.api_version, header.body_offset) == (3, 12, 12)
    with pytest.raises(OutOfBounds, match="array of 4294967294 elements"):
        check_body(cls, frame_body, header.body_offset)
    assert child_outcomes({"crash": frame_body}) == {"crash": "guard"}


@pytest.mark.parametrize("name", sorted(BAD_BODIES))
def test_huge_negative_and_null_lengths_rejected_by_the_guard(name: str) -> None:
    api_key, version, body = BAD_BODIES[name]
    with pytest.raises(OutOfBounds):
        check_body(load_request_schema(api_key, version), body, 0)


def test_bad_bodies_give_malformed_request_in_the_decode_path() -> None:
    frames = {name: frame(k, v, body) for name, (k, v, body) in BAD_BODIES.items()}
    assert child_outcomes(frames) == dict.fromkeys(BAD_BODIES, "guard")


@pytest.mark.parametrize(("api_key", "version"), handled_versions())
def test_guard_ends_where_kio_ends_on_valid_requests(api_key: int, version: int) -> None:
    """No false rejects: on valid requests (arrays of 0-3 elements, nullable fields null or
    not) the walk ends exactly where kio's decode ends."""
    cls = load_request_schema(api_key, version)
    read = entity_reader(cls)
    for count in (0, 1, 3):
        for null in (False, True):
            body = sample_body(api_key, version, count=count, null=null)
            _request, size = read(body, 0)
            assert size == len(body)
            assert check_body(cls, body, 0) == size
            assert check_body(cls, memoryview(b"\x09" + body).toreadonly(), 1) == size + 1


def test_every_length_of_every_api_mutated_decodes_or_is_malformed() -> None:
    """Every API and version in the handler table: boundary values over and before every
    byte of a sample body, and every truncation, decoded in a child process."""
    result = json.loads(run_decoder(["-m", "tests.support.length_sweep"], timeout=300))
    assert result["unhandled"] == []
    counts = result["counts"]
    assert set(counts) <= {"ok", "guard", "kio"}, counts
    assert counts["guard"] > 100_000 and counts["ok"] > 0, counts
    # Only requests with no body at all have no length to reject.
    empty = {f"{k} v{v}" for k, v in handled_versions() if not sample_body(k, v)}
    assert set(result["unguarded"]) <= empty, result["unguarded"]


SAMPLES = [(k, v, sample_body(k, v, count=c)) for k, v in handled_versions() for c in (1, 2)]


@settings(max_examples=400, deadline=None)
@given(
    sample=st.sampled_from(SAMPLES),
    edits=st.lists(
        st.tuples(
            st.integers(min_value=0, max_value=400),
            st.sampled_from(["over", "insert", "cut"]),
            st.binary(min_size=1, max_size=6),
        ),
        min_size=1,
        max_size=3,
    ),
)
def test_guard_only_ever_raises_out_of_bounds(
    sample: tuple[int, int, bytes], edits: list[tuple[int, str, bytes]]
) -> None:
    """The guard alone (no kio): any mutation either passes, ending inside the buffer, or
    raises OutOfBounds, never anything else."""
    api_key, version, body = sample
    for offset, how, value in edits:
        i = offset % (len(body) + 1)
        if how == "over":
            body = body[:i] + value + body[i + len(value) :]
        elif how == "insert":
            body = body[:i] + value + body[i:]
        else:
            body = body[:i]
    try:
        end = check_body(load_request_schema(api_key, version), body, 0)
    except OutOfBounds:
        return
    assert 0 <= end <= len(body)


@pytest.mark.parametrize(("api_key", "version"), handled_versions())
def test_guard_ends_where_kio_ends_on_valid_responses(api_key: int, version: int) -> None:
    """The same walk guards responses read from other brokers (admin client, mirror)."""
    cls = load_response_schema(api_key, version)
    read = entity_reader(cls)
    for count in (0, 2):
        for null in (False, True):
            body = encode(sample(cls, count=count, null=null))
            _response, size = read(body, 0)
            assert check_body(cls, body, 0) == size == len(body)


# Metadata v12 response: header tagged fields, throttle_time_ms, then brokers (compact array)
HOSTILE_METADATA_V12_RESPONSE = struct.pack(">i", 1) + b"\x00" + I32.pack(0) + HUGE + bytes(8)


async def test_admin_client_refuses_a_response_with_a_huge_length() -> None:
    """The admin client (the CLI, and the mirror's control requests to a source cluster)
    reads kio responses from another broker: a huge length is a ConnectionError there."""
    from kio.schema.metadata.v12.request import MetadataRequest

    from lakelog.admin.client import AdminClient

    reader = asyncio.StreamReader()
    data = HOSTILE_METADATA_V12_RESPONSE
    reader.feed_data(struct.pack(">i", len(data)) + data)

    class Writer:
        def write(self, data: bytes) -> None:
            pass

        async def drain(self) -> None:
            pass

    client = AdminClient(reader, Writer(), "test", 5.0)  # type: ignore[arg-type]
    request = MetadataRequest(
        topics=None, allow_auto_topic_creation=False, include_topic_authorized_operations=False
    )
    with pytest.raises(ConnectionError, match="malformed response"):
        await client._roundtrip(3, 12, request)


async def test_mirror_source_connection_refuses_a_response_with_a_huge_length() -> None:
    from kio.schema.metadata.v12.request import MetadataRequest

    from lakelog.mirror.connection import SourceConnection

    connection = SourceConnection()

    async def request(frame: bytes, allocate: object, timeout: float) -> bytes:
        return struct.pack(">i", -1) + HOSTILE_METADATA_V12_RESPONSE[4:]

    connection.request = request  # type: ignore[method-assign,assignment]
    request_body = MetadataRequest(
        topics=None, allow_auto_topic_creation=False, include_topic_authorized_operations=False
    )
    with pytest.raises(ConnectionError, match="malformed response"):
        await connection._roundtrip(5.0, 3, 12, request_body)


class PanicException(BaseException):
    """Stands in for pyo3's PanicException (a Rust panic raised into Python)."""


@pytest.mark.parametrize(
    ("raised", "expected"),
    [(PanicException("index out of bounds"), MalformedRequest), (KeyboardInterrupt(), None)],
)
def test_a_panic_in_kio_is_a_malformed_request(
    raised: BaseException, expected: type[Exception] | None
) -> None:
    body = sample_body(3, 12)
    data = memoryview(frame(3, 12, body))
    header = parse_header(data)
    schema = api_schema(3, 12)
    assert schema is not None

    def read_request(buf: object, pos: int) -> tuple[object, int]:
        raise raised

    panicking = dataclasses.replace(schema, read_request=read_request)
    with pytest.raises(expected or type(raised)):
        decode_body(panicking, data, header)


def test_requests_captured_from_real_clients_pass_the_guard() -> None:
    """No false rejects on what kafka-python, confluent-kafka and aiokafka actually send
    (the fuzz corpus, when present)."""
    import lakelog.server.api  # noqa: F401  (fills the handler table)
    from lakelog.server.api.registry import HANDLERS

    files = sorted((ROOT / "tests" / "fuzz" / "corpus").glob("*/*.bin"))
    if not files:
        pytest.skip("no captured corpus in tests/fuzz/corpus")
    checked = 0
    for path in files:
        data = memoryview(path.read_bytes())
        header = parse_header(data)
        spec = HANDLERS.get(header.api_key)
        if spec is None or not spec.min_version <= header.api_version <= spec.max_version:
            continue
        cls = load_request_schema(header.api_key, header.api_version)
        assert check_body(cls, data, header.body_offset) <= len(data), path.name
        checked += 1
    assert checked > 0


def test_string_arrays_with_long_null_and_overrunning_elements() -> None:
    """The inline loop over a flexible string array (DescribeGroups v5 groups)."""
    from kio.schema.describe_groups.v5.request import DescribeGroupsRequest

    cls = DescribeGroupsRequest
    body = encode(cls(groups=("a" * 200, "", "b" * 127, "c"), include_authorized_operations=True))
    assert check_body(cls, body, 0) == entity_reader(cls)(body, 0)[1] == len(body)
    null_element = b"\x03" + compact(b"g") + b"\x00" + b"\x00\x00"
    overrun_last = b"\x03" + compact(b"g") + b"\x05ab"
    for bad in (null_element, overrun_last, b"\x02" + bytes.fromhex("8001") + b"x" * 10):
        with pytest.raises(OutOfBounds):
            check_body(cls, bad, 0)
