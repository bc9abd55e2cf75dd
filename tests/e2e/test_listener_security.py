"""The broker's opt-in listener security against real clients: confluent-kafka
(librdkafka) and kafka-python produce and consume over SASL_SSL with PLAIN and SCRAM;
a wrong password is refused; a request other than ApiVersions/SASL before login closes
the connection; ApiVersions advertises the SASL APIs only on a SASL listener; a TLS
listener with ssl.client.auth=required wants a client certificate."""

from __future__ import annotations

import socket
import struct
import time
from typing import Any

import kafka
import kafka.errors
import pytest
from confluent_kafka import Consumer, KafkaError, Producer
from e2e_harness import HOST, BrokerProcess, api_versions_roundtrip, wait_until
from security_support import USERS, SecureFactory, api_versions_tls, client_tls, secure_broker

__all__ = ["secure_broker"]  # the fixture, used by name

COUNT = 50


def _conf(
    broker: BrokerProcess, ca: str, mechanism: str, password: str | None = None
) -> dict[str, Any]:
    return {
        "bootstrap.servers": broker.bootstrap,
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": mechanism,
        "sasl.username": "alice",
        "sasl.password": USERS["alice"] if password is None else password,
        "ssl.ca.location": ca,
    }


def _api_keys(body: bytes) -> set[int]:
    (error, count) = struct.unpack_from(">hi", body)
    assert error == 0
    return {struct.unpack_from(">h", body, 6 + 6 * i)[0] for i in range(count)}


def test_sasl_ssl_produce_and_consume(secure_broker: SecureFactory, topic_name: str) -> None:
    broker, pki, _ = secure_broker("SASL_SSL")
    ca = str(pki.ca)
    producer = Producer({**_conf(broker, ca, "SCRAM-SHA-512"), "linger.ms": 5})
    for i in range(COUNT):
        producer.produce(topic_name, key=b"k", value=f"librdkafka-{i}".encode())
    assert producer.flush(30) == 0

    k_producer = kafka.KafkaProducer(
        bootstrap_servers=broker.bootstrap,
        security_protocol="SASL_SSL",
        sasl_mechanism="PLAIN",
        sasl_plain_username="alice",
        sasl_plain_password=USERS["alice"],
        ssl_cafile=ca,
    )
    for i in range(COUNT):
        k_producer.send(topic_name, key=b"k", value=f"kafka-python-{i}".encode())
    k_producer.flush(30)
    k_producer.close()

    want = [f"librdkafka-{i}".encode() for i in range(COUNT)]
    want += [f"kafka-python-{i}".encode() for i in range(COUNT)]
    k_consumer = kafka.KafkaConsumer(
        topic_name,
        bootstrap_servers=broker.bootstrap,
        security_protocol="SASL_SSL",
        sasl_mechanism="SCRAM-SHA-256",
        sasl_plain_username="alice",
        sasl_plain_password=USERS["alice"],
        ssl_cafile=ca,
        auto_offset_reset="earliest",
        consumer_timeout_ms=10_000,
    )
    got_kp = [m.value for m in k_consumer]
    k_consumer.close()
    assert got_kp == want

    consumer = Consumer(
        {
            **_conf(broker, ca, "SCRAM-SHA-256"),
            "group.id": "secure-readers",
            "auto.offset.reset": "earliest",
        }
    )
    consumer.subscribe([topic_name])
    got: list[bytes] = []
    deadline = time.monotonic() + 30
    while len(got) < len(want) and time.monotonic() < deadline:
        message = consumer.poll(0.5)
        if message is not None and message.error() is None:
            got.append(message.value())
    consumer.close()
    assert got == want
    assert {18, 17, 36} <= _api_keys(api_versions_tls(broker.port, client_tls(pki)))


def test_wrong_password_is_refused(secure_broker: SecureFactory, topic_name: str) -> None:
    broker, pki, _ = secure_broker("SASL_SSL")
    errors: list[Any] = []
    producer = Producer(
        {
            **_conf(broker, str(pki.ca), "SCRAM-SHA-256", password="not-it"),
            "error_cb": errors.append,
            "reconnect.backoff.ms": 1000,
        }
    )
    producer.produce(topic_name, value=b"never")
    wait_until(
        lambda: (
            producer.poll(0.2) is not None
            and any(e.code() == KafkaError._AUTHENTICATION for e in errors)
        ),
        20,
        "an authentication error",
    )
    assert any("invalid credentials" in e.str() for e in errors)
    assert producer.flush(0) == 1  # nothing was delivered
    # kafka-python only reports a timeout; the broker's log says why.
    k_producer = kafka.KafkaProducer(
        bootstrap_servers=broker.bootstrap,
        security_protocol="SASL_SSL",
        sasl_mechanism="PLAIN",
        sasl_plain_username="alice",
        sasl_plain_password="not-it",
        ssl_cafile=str(pki.ca),
        api_version=(2, 5, 0),
        max_block_ms=3000,
    )
    with pytest.raises(kafka.errors.KafkaTimeoutError):
        k_producer.send(topic_name, b"never").get(3)
    k_producer.close(0)
    log = broker.log_text()
    assert "SASL SCRAM-SHA-256 authentication failed for user 'alice'" in log
    assert "SASL PLAIN authentication failed for user 'alice'" in log


def test_requests_before_login_close_the_connection(secure_broker: SecureFactory) -> None:
    broker, _, _ = secure_broker("SASL_PLAINTEXT")
    assert {17, 36} <= _api_keys(api_versions_roundtrip(broker.port))
    metadata_v1 = struct.pack(">hhih", 3, 1, 9, 1) + b"x" + struct.pack(">i", -1)
    with socket.create_connection((HOST, broker.port), timeout=5) as sock:
        sock.sendall(struct.pack(">i", len(metadata_v1)) + metadata_v1)
        assert sock.recv(16) == b""  # closed without an answer
    wait_until(
        lambda: "API 3 v1 before SASL authentication" in broker.log_text(), 5, "the log line"
    )


def test_plaintext_listener_does_not_advertise_sasl(broker: BrokerProcess) -> None:
    keys = _api_keys(api_versions_roundtrip(broker.port))
    assert 18 in keys and not {17, 36} & keys


def test_tls_client_auth_required(secure_broker: SecureFactory, topic_name: str) -> None:
    broker, pki, _ = secure_broker("SSL", SSL_CLIENT_AUTH="required")
    conf = {
        "bootstrap.servers": broker.bootstrap,
        "security.protocol": "SSL",
        "ssl.ca.location": str(pki.ca),
        "ssl.certificate.location": str(pki.client_cert),
        "ssl.key.location": str(pki.client_key),
    }
    producer = Producer(conf)
    producer.produce(topic_name, value=b"with a certificate")
    assert producer.flush(30) == 0
    with pytest.raises(OSError):  # no client certificate: the handshake fails
        api_versions_tls(broker.port, client_tls(pki))
