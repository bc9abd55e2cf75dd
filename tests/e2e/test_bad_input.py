"""Bad input over raw sockets: every case gets a Kafka error code or a closed connection,
and the broker keeps serving fresh connections afterwards (no crash, no hang).

Error codes: CORRUPT_MESSAGE=2, UNKNOWN_TOPIC_OR_PARTITION=3, MESSAGE_TOO_LARGE=10,
UNSUPPORTED_VERSION=35, INVALID_RECORD=87.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from pathlib import Path

import pytest
from e2e_fixtures import running_broker
from e2e_harness import BrokerProcess, api_versions_roundtrip, create_topic, now_ms
from e2e_wire import (
    WireClient,
    api_versions_v0,
    corrupt_payload,
    decode_response,
    encode_request,
    fetch_v4,
    legacy_message_set,
    metadata_v1,
    parse_batch_header,
    parse_records,
    produce_errors,
    produce_v7,
    record_batch,
)

NONE = 0
CORRUPT_MESSAGE = 2
UNKNOWN_TOPIC_OR_PARTITION = 3
MESSAGE_TOO_LARGE = 10
UNSUPPORTED_VERSION = 35
INVALID_RECORD = 87

MESSAGE_MAX_BYTES = 20_000
REQUEST_MAX_BYTES = 1024 * 1024
TOPIC = "bad-input-good"
SMALL_TOPIC = "bad-input-small"
SMALL_TOPIC_MAX = 5_000

pytestmark = pytest.mark.timeout(120)


@pytest.fixture(scope="module")
def bad_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    """One broker with small limits for the whole module: a crash in one case fails the
    cases after it too, which is the point (each checks the broker still serves)."""
    with running_broker(
        Path(tmp_path_factory.mktemp("bad-input")) / "data",
        {
            "MESSAGE_MAX_BYTES": MESSAGE_MAX_BYTES,
            "SOCKET_REQUEST_MAX_BYTES": REQUEST_MAX_BYTES,
            "AUTO_CREATE_TOPICS_ENABLE": False,
        },
        "bad-input",
    ) as proc:
        create_topic(proc.bootstrap, TOPIC, partitions=2)
        create_topic(
            proc.bootstrap,
            SMALL_TOPIC,
            partitions=1,
            configs={"max.message.bytes": str(SMALL_TOPIC_MAX)},
        )
        yield proc


def still_serves(broker: BrokerProcess) -> None:
    """The broker is alive, answers ApiVersions on a new connection, and round-trips a
    record through Produce and Fetch."""
    assert broker.alive(), f"broker died: exit codes {broker.exit_codes}"
    api_versions_roundtrip(broker.port, timeout=10)
    value = f"alive-{now_ms()}".encode()
    with WireClient(broker.port) as client:
        response = client.request(0, 7, produce_v7({TOPIC: {0: record_batch([value], now_ms())}}))
        error, offset = produce_errors(response)[TOPIC, 0]
        assert error == NONE and offset >= 0, (error, offset)
        fetched = client.request(1, 4, fetch_v4(TOPIC, 0, offset))
        (part,) = fetched.responses[0].partitions
        assert int(part.error_code) == NONE, part.error_code
        data = bytes(part.records or b"")
        assert data, "fetch returned no records for a just-acknowledged offset"
        header = parse_batch_header(data)
        assert header.base_offset <= offset <= header.base_offset + header.last_offset_delta
        assert header.base_offset == offset, "fetch must patch baseOffset to the real offset"
        assert [r.value for r in parse_records(data[: header.size])] == [value]


def assert_closed_or_answered(client: WireClient) -> None:
    """Garbage must not hang the connection: the broker closes it (Kafka's answer)."""
    assert client.closed_by_peer(timeout=10), "broker sent bytes in answer to garbage"


def produce_one(broker: BrokerProcess, topic: str, partition: int, records: bytes | None) -> int:
    with WireClient(broker.port) as client:
        response = client.request(0, 7, produce_v7({topic: {partition: records}}))
        errors = produce_errors(response)
        assert set(errors) == {(topic, partition)}, errors
        error, _ = errors[topic, partition]
        # The connection stays usable after a per-partition error.
        client.request(18, 0, api_versions_v0())
        return error


# ------------------------------------------------------------------- framing


def sized(body: bytes) -> bytes:
    return struct.pack(">i", len(body)) + body


@pytest.mark.parametrize(
    "frame",
    [
        pytest.param(struct.pack(">i", 3) + b"\x00\x03\x00", id="shorter-than-header"),
        pytest.param(
            # transactional_id length 0x7f7f: more than the frame holds
            sized(struct.pack(">hhih", 0, 7, 1, 3) + b"abc" + b"\x7f" * 49),
            id="produce-garbage-body",
        ),
        pytest.param(sized(b"\x13\x37" * 40), id="random-bytes"),
        pytest.param(
            struct.pack(">ihhih", 14, 3, 1, 2, -1) + struct.pack(">i", 1_000_000),
            id="metadata-array-overruns-frame",
        ),
        pytest.param(
            struct.pack(">ihhih", 20, 3, 1, 3, 500) + b"x" * 10, id="client-id-overruns-frame"
        ),
        pytest.param(struct.pack(">i", -5) + b"\x00" * 16, id="negative-size"),
        pytest.param(struct.pack(">i", 0), id="zero-size"),
    ],
)
def test_malformed_frame(bad_broker: BrokerProcess, frame: bytes) -> None:
    with WireClient(bad_broker.port) as client:
        client.send_raw(frame)
        assert_closed_or_answered(client)
    still_serves(bad_broker)


def test_trailing_bytes_after_valid_request(bad_broker: BrokerProcess) -> None:
    """Kafka parses the body and ignores what follows (librdkafka's Metadata v13 has extra
    bytes), so either a proper answer or a closed connection is acceptable."""
    frame = encode_request(3, 1, 7, metadata_v1([TOPIC]))
    body = frame[4:] + b"\x00\x01garbage"
    with WireClient(bad_broker.port) as client:
        client.send_raw(struct.pack(">i", len(body)) + body)
        try:
            correlation_id, response = decode_response(3, 1, client.read_frame())
        except ConnectionError:
            pass
        else:
            assert correlation_id == 7
            assert [str(t.name) for t in response.topics] == [TOPIC]
    still_serves(bad_broker)


@pytest.mark.parametrize("api_key", [9999, 1000, -1])
def test_unknown_api_key(bad_broker: BrokerProcess, api_key: int) -> None:
    with WireClient(bad_broker.port) as client:
        body = struct.pack(">hhih", api_key, 0, 42, 1) + b"x"
        client.send_raw(struct.pack(">i", len(body)) + body)
        assert_closed_or_answered(client)
    still_serves(bad_broker)


def test_unsupported_produce_version(bad_broker: BrokerProcess) -> None:
    with WireClient(bad_broker.port) as client:
        body = struct.pack(">hhih", 0, 999, 42, 1) + b"x" + b"\x00" * 20
        client.send_raw(struct.pack(">i", len(body)) + body)
        assert_closed_or_answered(client)
    still_serves(bad_broker)


def test_api_versions_above_max_gets_v0_answer(bad_broker: BrokerProcess) -> None:
    """KIP-511: a newer client learns our versions from a v0 response with
    UNSUPPORTED_VERSION and the list of APIs, and the connection stays open."""
    with WireClient(bad_broker.port) as client:
        body = struct.pack(">hhih", 18, 999, 77, 1) + b"x" + b"\x00" * 8
        client.send_raw(struct.pack(">i", len(body)) + body)
        correlation_id, response = decode_response(18, 0, client.read_frame())
        assert correlation_id == 77
        assert int(response.error_code) == UNSUPPORTED_VERSION
        keys = {int(k.api_key): (int(k.min_version), int(k.max_version)) for k in response.api_keys}
        assert 18 in keys and 0 in keys and 1 in keys, keys
        client.request(18, 0, api_versions_v0())  # the same connection still works
    still_serves(bad_broker)


@pytest.mark.parametrize("size", [REQUEST_MAX_BYTES + 1, 0x7FFFFFFF])
def test_oversize_request_is_refused_before_its_body(bad_broker: BrokerProcess, size: int) -> None:
    with WireClient(bad_broker.port) as client:
        client.send_raw(struct.pack(">i", size) + b"\x00" * 64)  # body never sent in full
        assert_closed_or_answered(client)
    still_serves(bad_broker)


# ------------------------------------------------------------------- produce payloads


def test_bad_crc_fails_only_its_partition(bad_broker: BrokerProcess) -> None:
    good = record_batch([b"good-1", b"good-2"], now_ms())
    bad = corrupt_payload(record_batch([b"bad-1", b"bad-2"], now_ms()))
    with WireClient(bad_broker.port) as client:
        before = client.request(1, 4, fetch_v4(TOPIC, 0, 0, max_bytes=1))
        high_before = int(before.responses[0].partitions[0].high_watermark)
        response = client.request(0, 7, produce_v7({TOPIC: {0: bad, 1: good}}))
        errors = produce_errors(response)
        assert errors[TOPIC, 0][0] == CORRUPT_MESSAGE, errors
        assert errors[TOPIC, 1][0] == NONE and errors[TOPIC, 1][1] >= 0, errors
        after = client.request(1, 4, fetch_v4(TOPIC, 0, 0, max_bytes=1))
        assert int(after.responses[0].partitions[0].high_watermark) == high_before, (
            "a corrupt batch must not take offsets"
        )
    still_serves(bad_broker)


def test_truncated_batch_is_corrupt(bad_broker: BrokerProcess) -> None:
    batch = record_batch([b"a" * 100], now_ms())
    assert produce_one(bad_broker, TOPIC, 0, batch[:-10]) == CORRUPT_MESSAGE
    still_serves(bad_broker)


@pytest.mark.parametrize("magic", [0, 1])
def test_legacy_message_set_is_invalid_record(bad_broker: BrokerProcess, magic: int) -> None:
    records = legacy_message_set([b"old-1", b"old-2"], magic, timestamp=now_ms())
    assert produce_one(bad_broker, TOPIC, 0, records) == INVALID_RECORD
    still_serves(bad_broker)


@pytest.mark.parametrize(
    ("topic", "partition"),
    [("no-such-topic", 0), (TOPIC, 2), (TOPIC, 99), (TOPIC, -1)],
    ids=["unknown-topic", "partition-just-past-end", "partition-99", "partition-minus-1"],
)
def test_unknown_topic_or_partition(bad_broker: BrokerProcess, topic: str, partition: int) -> None:
    batch = record_batch([b"nowhere"], now_ms())
    assert produce_one(bad_broker, topic, partition, batch) == UNKNOWN_TOPIC_OR_PARTITION
    still_serves(bad_broker)


def test_batch_above_message_max_bytes(bad_broker: BrokerProcess) -> None:
    big = record_batch([b"x" * (MESSAGE_MAX_BYTES + 100)], now_ms())
    assert len(big) > MESSAGE_MAX_BYTES
    assert produce_one(bad_broker, TOPIC, 0, big) == MESSAGE_TOO_LARGE
    fits = record_batch([b"y" * (MESSAGE_MAX_BYTES - 200)], now_ms())
    assert len(fits) <= MESSAGE_MAX_BYTES
    assert produce_one(bad_broker, TOPIC, 0, fits) == NONE
    still_serves(bad_broker)


def test_topic_max_message_bytes_overrides_broker_limit(bad_broker: BrokerProcess) -> None:
    big = record_batch([b"z" * (SMALL_TOPIC_MAX + 100)], now_ms())
    assert SMALL_TOPIC_MAX < len(big) < MESSAGE_MAX_BYTES
    assert produce_one(bad_broker, SMALL_TOPIC, 0, big) == MESSAGE_TOO_LARGE
    assert produce_one(bad_broker, SMALL_TOPIC, 0, record_batch([b"ok"], now_ms())) == NONE
    still_serves(bad_broker)


def test_null_records_are_rejected(bad_broker: BrokerProcess) -> None:
    """A partition entry with null records carries nothing to append: an error code or a
    closed connection, not a crash."""
    with WireClient(bad_broker.port) as client:
        client.send_raw(encode_request(0, 7, 5, produce_v7({TOPIC: {0: None}})))
        try:
            correlation_id, response = decode_response(0, 7, client.read_frame())
        except ConnectionError:
            pass  # closed: acceptable
        else:
            assert correlation_id == 5
            error, _ = produce_errors(response)[TOPIC, 0]
            assert error in (CORRUPT_MESSAGE, INVALID_RECORD), error
    still_serves(bad_broker)
