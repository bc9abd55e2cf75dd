"""SASL sessions over the wire: KIP-368 re-authentication (librdkafka keeps producing
past several session lifetimes; a raw client that never re-authenticates is closed at
its first request after expiry), and hostile logins (garbage after a SaslHandshake v0,
an oversized token, a SCRAM proof with the wrong nonce): each closes its connection with
a log line and the broker goes on serving."""

from __future__ import annotations

import asyncio
import logging
import socket
import struct
import time
from typing import Any

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic
from e2e_harness import HOST, BrokerProcess, api_versions_roundtrip, recv_exact, wait_until
from kio.index import load_request_schema, load_response_schema
from kio.serial import entity_reader
from security_support import USERS, SecureFactory, secure_broker

from lakelog.admin.wire import encode_request
from lakelog.log.protocol.varint import skip_tagged_fields
from lakelog.mirror.connection import SourceConnection
from lakelog.security.client_config import ClientSecurity
from lakelog.security.scram import ScramClient

__all__ = ["secure_broker"]  # the fixture, used by name

LIFETIME_MS = 3000


class Wire:
    """One raw connection speaking whole Kafka frames."""

    def __init__(self, port: int) -> None:
        self.sock = socket.create_connection((HOST, port), timeout=10)
        self.correlation = 0

    def call(self, api_key: int, version: int, **fields: Any) -> Any:
        self.correlation += 1
        request = load_request_schema(api_key, version)(**fields)
        self.sock.sendall(encode_request(api_key, version, self.correlation, "wire", request))
        size = struct.unpack(">i", recv_exact(self.sock, 4))[0]
        body = recv_exact(self.sock, size)
        assert struct.unpack(">i", body[:4])[0] == self.correlation
        cls = load_response_schema(api_key, version)
        flexible_header = cls.__flexible__ and api_key != 18
        pos = skip_tagged_fields(body, 4) if flexible_header else 4
        return entity_reader(cls)(body, pos)[0]

    def closed(self) -> bool:
        """True once the broker has closed the connection (nothing more to read)."""
        try:
            return self.sock.recv(1) == b""
        except ConnectionResetError:
            return True

    def close(self) -> None:
        self.sock.close()


class Lines(logging.Logger):
    """librdkafka's log lines, kept."""

    def __init__(self) -> None:
        super().__init__("librdkafka")
        self.lines: list[str] = []

    def log(self, level: int, msg: object, *args: object, **kwargs: Any) -> None:
        self.lines.append(str(msg) % args if args else str(msg))


def _plain_login(wire: Wire, version: int = 2) -> Any:
    assert wire.call(17, 1, mechanism="PLAIN").error_code == 0
    token = f"\0alice\0{USERS['alice']}".encode()
    return wire.call(36, version, auth_bytes=token)


def test_librdkafka_reauthenticates_past_several_lifetimes(
    secure_broker: SecureFactory, topic_name: str
) -> None:
    broker, _, _ = secure_broker("SASL_PLAINTEXT", CONNECTIONS_MAX_REAUTH_MS=LIFETIME_MS)
    conf = {
        "bootstrap.servers": broker.bootstrap,
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": "SCRAM-SHA-256",
        "sasl.username": "alice",
        "sasl.password": USERS["alice"],
    }
    admin = AdminClient(conf)
    admin.create_topics([NewTopic(topic_name, 1)])[topic_name].result(30)
    logged = Lines()
    producer = Producer(
        {**conf, "linger.ms": 0, "message.timeout.ms": 30_000, "debug": "security"},
        logger=logged,
    )
    delivered: list[bool] = []
    started = time.monotonic()
    sent = 0
    while time.monotonic() - started < 4 * LIFETIME_MS / 1000:
        producer.produce(
            topic_name, value=b"x", on_delivery=lambda e, _m: delivered.append(e is None)
        )
        sent += 1
        producer.poll(0.25)
    assert producer.flush(30) == 0
    assert len(delivered) == sent and all(delivered)
    reauthentications = [line for line in logged.lines if "Auth in state REAUTH" in line]
    assert len(reauthentications) >= 2, logged.lines[-20:]
    log = broker.log_text()
    assert "expired without re-authentication" not in log
    assert "re-authentication" not in log  # no refused re-authentication either


def test_a_client_that_never_reauthenticates_is_closed(secure_broker: SecureFactory) -> None:
    broker, _, _ = secure_broker("SASL_PLAINTEXT", CONNECTIONS_MAX_REAUTH_MS=LIFETIME_MS)
    wire = Wire(broker.port)
    response = _plain_login(wire)
    assert response.error_code == 0
    assert response.session_lifetime.total_seconds() * 1000 == LIFETIME_MS
    assert wire.call(3, 1, topics=None).brokers  # logged in: Metadata is served
    time.sleep(LIFETIME_MS / 1000 + 0.5)
    request = load_request_schema(3, 1)(topics=None)
    wire.sock.sendall(encode_request(3, 1, 99, "wire", request))
    assert wire.closed()
    wire.close()
    wait_until(lambda: "expired without re-authentication" in broker.log_text(), 10, "the log line")
    # A session re-authenticated in time goes on.
    wire = Wire(broker.port)
    _plain_login(wire)
    time.sleep(1.5)
    assert _plain_login(wire).error_code == 0
    time.sleep(LIFETIME_MS / 1000 - 1.0)
    assert wire.call(3, 1, topics=None).brokers
    wire.close()


def _still_serving(broker: BrokerProcess) -> None:
    assert api_versions_roundtrip(broker.port)


def test_garbage_after_a_v0_handshake_closes(secure_broker: SecureFactory) -> None:
    broker, _, _ = secure_broker("SASL_PLAINTEXT")
    wire = Wire(broker.port)
    assert wire.call(17, 0, mechanism="PLAIN").error_code == 0
    garbage = b"\xde\xad\xbe\xef" * 16
    wire.sock.sendall(struct.pack(">i", len(garbage)) + garbage)
    assert wire.closed()
    wire.close()
    wait_until(
        lambda: "authentication failed (v0 handshake)" in broker.log_text(), 10, "the log line"
    )
    # The same broker logs a v0 client in with bare tokens.
    wire = Wire(broker.port)
    assert wire.call(17, 0, mechanism="PLAIN").error_code == 0
    token = f"\0alice\0{USERS['alice']}".encode()
    wire.sock.sendall(struct.pack(">i", len(token)) + token)
    assert recv_exact(wire.sock, 4) == b"\0\0\0\0"
    assert wire.call(3, 1, topics=None).brokers
    wire.close()
    _still_serving(broker)


def test_oversized_tokens_close(secure_broker: SecureFactory) -> None:
    broker, _, _ = secure_broker("SASL_PLAINTEXT")
    wire = Wire(broker.port)
    assert wire.call(17, 1, mechanism="PLAIN").error_code == 0
    wire.sock.sendall(struct.pack(">i", 8 * 1024 * 1024) + b"\0\x24\0\x02")
    assert wire.closed()
    wire.close()
    wait_until(lambda: "outside 1..524288" in broker.log_text(), 10, "the log line")
    wire = Wire(broker.port)
    assert wire.call(17, 1, mechanism="SCRAM-SHA-512").error_code == 0
    response = wire.call(36, 2, auth_bytes=b"n,,n=" + b"a" * 400_000 + b",r=abc")
    assert response.error_code == 58  # SASL_AUTHENTICATION_FAILED
    assert wire.closed()
    wire.close()
    _still_serving(broker)


def test_scram_with_a_bad_nonce_closes(secure_broker: SecureFactory) -> None:
    broker, _, _ = secure_broker("SASL_PLAINTEXT")
    wire = Wire(broker.port)
    assert wire.call(17, 1, mechanism="SCRAM-SHA-256").error_code == 0
    client = ScramClient("SCRAM-SHA-256", "alice", USERS["alice"])
    first = wire.call(36, 2, auth_bytes=client.first())
    assert first.error_code == 0
    final = client.final(bytes(first.auth_bytes)).replace(b",p=", b"tampered,p=")
    response = wire.call(36, 2, auth_bytes=final)
    assert response.error_code == 58
    assert wire.closed()
    wire.close()
    wait_until(lambda: "wrong nonce" in broker.log_text(), 10, "the log line")
    _still_serving(broker)


def test_the_mirrors_source_connection_reauthenticates(secure_broker: SecureFactory) -> None:
    """The mirror's source connection logs in again before its session ends."""
    broker, _, _ = secure_broker("SASL_PLAINTEXT", CONNECTIONS_MAX_REAUTH_MS=2000)
    security = ClientSecurity.from_configs(
        {
            "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "SCRAM-SHA-512",
            "sasl.username": "mirror",
            "sasl.password": USERS["mirror"],
        }
    )

    async def run() -> int:
        connection = await SourceConnection.open(HOST, broker.port, 10, security=security)
        answered = 0
        request = load_request_schema(18, 0)()
        for correlation in range(1, 25):  # about three session lifetimes
            frame = encode_request(18, 0, correlation, "probe", request)
            response = await connection.request(frame, bytearray, 10)
            assert int.from_bytes(response[:4], "big") == correlation
            answered += 1
            await asyncio.sleep(0.25)
        connection.close()
        return answered

    assert asyncio.run(run()) == 24
    assert "expired without re-authentication" not in broker.log_text()
