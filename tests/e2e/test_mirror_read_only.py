"""Producing to a read-only mirror topic (KIP-1279), as an operator's honest mistake: real
clients get INVALID_REQUEST with a message naming the mirror, at once (not retried until
the delivery timeout), and keep seeing the topic and its partitions in Metadata (no
"partition count changed from 2 to 0", which an authorization error caused)."""

from __future__ import annotations

import logging
import time

import pytest
from confluent_kafka import KafkaError, Producer
from e2e_fixtures import BrokerFactory
from e2e_harness import create_topic
from mirror_support import mirror_cli, produce_keyed, two_clusters, wait_caught_up, wait_states

PARTITIONS = 2
PROMPT_S = 15.0
"""Well under the 30 s (and librdkafka's default 300 s) delivery timeout a retried error
would run into, with room for a busy machine."""


class _Lines(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())


def _confluent_attempt(
    bootstrap: str, topic: str, idempotent: bool
) -> tuple[list[KafkaError | None], list[str], Producer]:
    """Deliveries of one record per partition and one the partitioner places, with the
    client's own log (topic and metadata debugging on) captured."""
    lines = _Lines()
    logger = logging.getLogger(f"rdkafka-{time.monotonic_ns()}")
    logger.setLevel(logging.DEBUG)
    logger.addHandler(lines)
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "linger.ms": 1,
            "enable.idempotence": idempotent,
            "debug": "topic,metadata",
            "logger": logger,
        }
    )
    errors: list[KafkaError | None] = []
    for p in range(PARTITIONS):
        producer.produce(
            topic, value=b"nope", partition=p, on_delivery=lambda e, m: errors.append(e)
        )
    producer.produce(topic, key=b"k", value=b"nope", on_delivery=lambda e, m: errors.append(e))
    producer.flush(60)
    producer.poll(0.5)  # deliver the last log lines
    return errors, lines.lines, producer


@pytest.mark.parametrize("idempotent", [False, True], ids=["plain", "idempotent"])
def test_produce_to_a_mirror_topic_fails_fast_with_the_read_only_error(
    broker_factory: BrokerFactory, topic_name: str, idempotent: bool
) -> None:
    c = two_clusters(broker_factory)
    create_topic(c.source.bootstrap, topic_name, PARTITIONS)
    produce_keyed(c.source.bootstrap, topic_name, 20, PARTITIONS, "src")
    mirror_cli(c.dest, "create", "dr", "--source", c.source.bootstrap, "--topic", topic_name)
    wait_states(c.dest, "dr", topic_name, {p: "MIRRORING" for p in range(PARTITIONS)})
    ends = wait_caught_up(c.source, c.dest, topic_name, PARTITIONS)

    started = time.monotonic()
    errors, log_lines, producer = _confluent_attempt(c.dest.bootstrap, topic_name, idempotent)
    took = time.monotonic() - started

    assert len(errors) == PARTITIONS + 1, errors
    for error in errors:
        assert error is not None and error.code() == KafkaError.INVALID_REQUEST, error
        assert not error.retriable(), error
    assert took < PROMPT_S, f"the deliveries failed only after {took:.1f}s"
    shrunk = [line for line in log_lines if "partition count changed" in line and "to 0" in line]
    assert any("partition count changed from 0 to 2" in line for line in log_lines)
    assert not shrunk, shrunk
    # Metadata still describes the topic: both partitions, no error.
    described = producer.list_topics(topic_name, timeout=10).topics[topic_name]
    assert described.error is None, described.error
    assert sorted(described.partitions) == list(range(PARTITIONS))
    # Nothing was written: the mirror's offsets are the source's.
    assert wait_caught_up(c.source, c.dest, topic_name, PARTITIONS) == ends


def test_kafka_python_producer_gets_invalid_request(
    broker_factory: BrokerFactory, topic_name: str
) -> None:
    from kafka import KafkaProducer
    from kafka.errors import InvalidRequestError

    c = two_clusters(broker_factory)
    create_topic(c.source.bootstrap, topic_name, PARTITIONS)
    mirror_cli(c.dest, "create", "dr", "--source", c.source.bootstrap, "--topic", topic_name)
    wait_states(c.dest, "dr", topic_name, {p: "MIRRORING" for p in range(PARTITIONS)})

    producer = KafkaProducer(bootstrap_servers=c.dest.bootstrap, retries=5, linger_ms=1)
    try:
        started = time.monotonic()
        future = producer.send(topic_name, value=b"nope", partition=1)
        with pytest.raises(InvalidRequestError) as refused:
            future.get(timeout=30)
        # kafka-python shows the broker's error message (Produce v8+); librdkafka drops it.
        assert "read-only mirror topic" in str(refused.value), refused.value
        assert "lakelog mirror remove-topics" in str(refused.value), refused.value
        assert time.monotonic() - started < PROMPT_S
        assert producer.partitions_for(topic_name) == set(range(PARTITIONS))
    finally:
        producer.close(timeout=5)
