"""Huge lengths in request bodies against a real broker process (issue 12).

The 24-byte Metadata v12 frame whose topics length is the varint `ff ff ff ff 0f` made kio's
native decoder ask for 32 GiB and the broker died of SIGABRT. Each bad frame goes on its own
connection, unauthenticated; the broker must close the connection or answer it (an error
response), stay alive, log no traceback, and serve a real client (confluent-kafka) after.
"""

from __future__ import annotations

import struct
import time
import uuid

import pytest
from e2e_harness import BrokerProcess, create_topic
from e2e_wire import WireClient, request_class
from security_support import USERS, SecureFactory, secure_broker

__all__ = ["secure_broker"]  # the fixture, used by name

pytestmark = pytest.mark.timeout(180)

HUGE = bytes.fromhex("ffffffff0f")

METADATA_V12_CRASH = bytes.fromhex(
    "00000014"  # frame size 20
    "0003000c"  # Metadata v12
    "00000001"  # correlation id 1
    "000178"  # client id "x"
    "00"  # header tagged fields
    "ffffffff0f"  # topics: compact array of 2^32 - 2 elements
    "0000"  # allow_auto_topic_creation, include_topic_authorized_operations
    "00"  # tagged fields
)


def uvarint(value: int) -> bytes:
    out = bytearray()
    while value > 0x7F:
        out.append(value & 0x7F | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def sized(body: bytes) -> bytes:
    return struct.pack(">i", len(body)) + body


def header(api_key: int, version: int, flexible: bool) -> bytes:
    head = struct.pack(">hhih", api_key, version, 1, 1) + b"x"
    return head + b"\x00" if flexible else head


FETCH_V12_HEAD = struct.pack(">iiiibii", -1, 500, 1, 1 << 20, 0, 0, -1)

BAD_FRAMES = {
    "metadata-v12-24-bytes": METADATA_V12_CRASH,
    "fetch-v12-nested-partitions": sized(
        header(1, 12, True) + FETCH_V12_HEAD + b"\x02" + b"\x02t" + HUGE
    ),
    "fetch-v12-cluster-id-tag": sized(
        header(1, 12, True) + FETCH_V12_HEAD + b"\x01\x01\x01" + b"\x01\x00\x05" + HUGE
    ),
    "produce-v9-records": sized(
        header(0, 9, True)
        + b"\x00"
        + struct.pack(">hi", 1, 1000)
        + b"\x02\x02t\x02"
        + bytes(4)
        + HUGE
    ),
    "metadata-v4-int32-max": sized(header(3, 4, False) + struct.pack(">i", 0x7FFFFFFF) + b"\x00"),
    "listoffsets-v1-null-topics": sized(header(2, 1, False) + struct.pack(">ii", -1, -1)),
}


def closed_or_answered(client: WireClient, timeout: float = 10.0) -> str:
    """'closed' or 'answered' (an error response for the bad request); never a hang."""
    client.sock.settimeout(timeout)
    try:
        data = client.sock.recv(1 << 16)
    except (ConnectionResetError, BrokenPipeError):
        return "closed"
    except TimeoutError as exc:
        raise AssertionError(f"no answer and no close within {timeout}s") from exc
    if not data:
        return "closed"
    assert len(data) >= 8 and struct.unpack_from(">i", data, 4)[0] == 1, data[:16].hex()
    return "answered"


def serves_a_real_client(
    broker: BrokerProcess, topic: str, conf: dict[str, str] | None = None
) -> None:
    from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition

    conf = {"bootstrap.servers": broker.bootstrap, **(conf or {})}
    value = f"alive-{uuid.uuid4().hex}".encode()
    producer = Producer({**conf, "acks": "all"})
    delivered: list[object] = []
    producer.produce(topic, value=value, partition=0, on_delivery=lambda e, m: delivered.append(e))
    assert producer.flush(30) == 0 and delivered == [None], delivered
    consumer = Consumer(
        {
            **conf,
            "group.id": f"alive-{uuid.uuid4().hex}",
            "enable.auto.commit": False,
            "fetch.wait.max.ms": 100,
        }
    )
    try:
        consumer.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
        deadline = time.monotonic() + 30
        got: list[bytes] = []
        while value not in got and time.monotonic() < deadline:
            got += [m.value() for m in consumer.consume(100, timeout=0.5) if not m.error()]
        assert value in got, got
    finally:
        consumer.close()


def test_huge_lengths_do_not_take_the_broker_down(broker: BrokerProcess) -> None:
    topic = "lengths-alive"
    create_topic(broker.bootstrap, topic, partitions=1)
    assert len(METADATA_V12_CRASH) == 24
    outcomes = {}
    for name, frame in BAD_FRAMES.items():
        with WireClient(broker.port) as client:
            client.send_raw(frame)
            outcomes[name] = closed_or_answered(client)
        assert broker.alive(), f"broker died on {name}: exit codes {broker.exit_codes}"
    # The 24-byte frame again, many times over, on one connection each.
    for _ in range(20):
        with WireClient(broker.port) as client:
            client.send_raw(METADATA_V12_CRASH)
            closed_or_answered(client)
    assert broker.alive(), f"broker died: exit codes {broker.exit_codes}"
    serves_a_real_client(broker, topic)
    assert broker.tracebacks() == [], broker.tracebacks()
    assert "memory allocation" not in broker.log_text()
    assert set(outcomes.values()) <= {"closed", "answered"}, outcomes


SASL_BEFORE_LOGIN = {
    "metadata-v12-24-bytes": METADATA_V12_CRASH,
    "sasl-authenticate-v2-auth-bytes": sized(header(36, 2, True) + HUGE + b"\x00"),
    "sasl-handshake-v1-mechanism": sized(header(17, 1, False) + struct.pack(">h", 0x7FFF) + b"P"),
}


def test_huge_lengths_on_a_sasl_listener_before_and_after_login(
    secure_broker: SecureFactory,
) -> None:
    broker, _, _ = secure_broker("SASL_PLAINTEXT")
    for name, frame in SASL_BEFORE_LOGIN.items():
        with WireClient(broker.port) as client:
            client.send_raw(frame)
            closed_or_answered(client)
        assert broker.alive(), f"broker died on {name} before login: {broker.exit_codes}"
    with WireClient(broker.port) as client:
        handshake = client.request(
            17, 1, request_class(17, 1).SaslHandshakeRequest(mechanism="PLAIN")
        )
        assert int(handshake.error_code) == 0, handshake
        token = b"\0alice\0" + USERS["alice"].encode()
        login = client.request(
            36, 2, request_class(36, 2).SaslAuthenticateRequest(auth_bytes=token)
        )
        assert int(login.error_code) == 0, login
        client.send_raw(METADATA_V12_CRASH)
        closed_or_answered(client)
    assert broker.alive(), f"broker died after login: exit codes {broker.exit_codes}"
    sasl = {
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": "PLAIN",
        "sasl.username": "alice",
        "sasl.password": USERS["alice"],
    }
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": broker.bootstrap, **sasl})
    admin.create_topics([NewTopic("lengths-sasl", 1, 1)])["lengths-sasl"].result(30)
    serves_a_real_client(broker, "lengths-sasl", sasl)
    assert broker.tracebacks() == [], broker.tracebacks()


def test_a_huge_body_of_tiny_entries_is_refused_undecoded(broker: BrokerProcess) -> None:
    """12 MiB of DescribeGroups v5 with 6 million one-byte group ids would hold the event
    loop for about a second to check and decode; over non_produce_request_max_bytes (8 MiB)
    it is refused without decoding, and the others are served meanwhile."""
    topic = "huge-body-alive"
    create_topic(broker.bootstrap, topic, partitions=1)
    count = 6_000_000
    groups = uvarint(count + 1) + b"\x02g" * count  # compact array of one-letter ids
    body = header(15, 5, True) + groups + b"\x00" + b"\x00"
    started = time.monotonic()
    with WireClient(broker.port) as client:
        client.send_raw(sized(body))
        outcome = closed_or_answered(client, timeout=30)
    took = time.monotonic() - started
    print(f"{len(body) / 2**20:.1f} MiB DescribeGroups: {outcome} after {took:.2f}s")
    assert broker.alive(), f"broker died: exit codes {broker.exit_codes}"
    assert "over non_produce_request_max_bytes" in broker.log_text()
    serves_a_real_client(broker, topic)
    assert broker.tracebacks() == [], broker.tracebacks()
