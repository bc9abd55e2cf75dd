"""Per-partition order under pipelining: a connection's Produce requests reach the log in
the order they were sent, whatever their sizes, however full the WAL pipeline is.

The broker runs with a small WAL buffer and one sealed buffer in flight, so nearly every
request meets back-pressure: the case where later requests used to overtake earlier ones.
"""

from __future__ import annotations

import threading
import time
import uuid

import pytest
from e2e_fixtures import BrokerFactory
from e2e_harness import BrokerProcess, create_topic
from e2e_wire import (
    WireClient,
    decode_response,
    encode_request,
    produce_errors,
    produce_v7,
    record_batch,
)

SMALL = 1024
LARGE = 500_000
BACK_PRESSURE = {
    "PRODUCE_BUFFER_MAX_BYTES": 1 << 20,
    "PRODUCE_MAX_SEALED_BUFFERS": 1,
    "MESSAGE_MAX_BYTES": 1 << 20,
    # Each Produce pauses a random 0-5 ms before validating, as a slow topic lookup
    # would: without per-connection order, later requests overtake earlier ones.
    "FAULT_PRODUCE_JITTER_MS": 5,
}


@pytest.fixture
def pressed_broker(broker_factory: BrokerFactory) -> BrokerProcess:
    return broker_factory(BACK_PRESSURE)


def _value(seq: int, size: int) -> bytes:
    head = b"%08d:" % seq
    return head + b"x" * (size - len(head))


def _size(seq: int) -> int:
    """Runs of small and large records, the mix that reordered before."""
    return LARGE if (seq // 7) % 2 else SMALL


def test_raw_pipelined_produce_keeps_request_order(pressed_broker: BrokerProcess) -> None:
    """60 Produce requests written back to back on one socket before any answer is read:
    base offsets follow the request order exactly."""
    topic = f"order-raw-{uuid.uuid4().hex[:8]}"
    create_topic(pressed_broker.bootstrap, topic, partitions=1)
    frames = [
        encode_request(
            0, 7, seq + 1, produce_v7({topic: {0: record_batch([_value(seq, _size(seq))], 1)}})
        )
        for seq in range(60)
    ]
    with WireClient(pressed_broker.port, timeout=60) as client:
        sender = threading.Thread(target=lambda: client.send_raw(b"".join(frames)))
        sender.start()
        offsets = []
        for seq in range(60):
            correlation_id, response = decode_response(0, 7, client.read_frame())
            assert correlation_id == seq + 1  # answers in request order
            error, base_offset = produce_errors(response)[(topic, 0)]
            assert error == 0, f"request {seq}: error {error}"
            offsets.append(base_offset)
        sender.join(30)
    assert offsets == list(range(60))


def _produce(bootstrap: str, topic: str, count: int) -> tuple[dict[int, int], list[str]]:
    """A plain producer: no idempotence, no retries, 5 requests in flight. Returns the
    acknowledged sequence numbers with their offsets, and the failures."""
    from confluent_kafka import Producer

    acked: dict[int, int] = {}
    failures: list[str] = []

    def delivered(err: object, msg: object) -> None:
        seq = int(msg.value()[:8])  # type: ignore[attr-defined]
        if err is not None:
            failures.append(f"{seq}: {err}")
        else:
            acked[seq] = msg.offset()  # type: ignore[attr-defined]

    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "enable.idempotence": False,
            "message.send.max.retries": 0,
            "max.in.flight.requests.per.connection": 5,
            "acks": "all",
            "linger.ms": 2,
            "batch.size": 1_000_000,
            "message.max.bytes": 1_000_000,
            "message.timeout.ms": 120_000,
        }
    )
    for seq in range(count):
        while True:
            try:
                producer.produce(topic, _value(seq, _size(seq)), partition=0, on_delivery=delivered)
                break
            except BufferError:
                producer.poll(0.05)
        producer.poll(0)
    assert producer.flush(180) == 0, "records still unacknowledged"
    return acked, failures


def _stored_sequences(bootstrap: str, topic: str, count: int) -> list[int]:
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"order-check-{uuid.uuid4().hex[:6]}",
            "enable.auto.commit": False,
            "fetch.max.bytes": 8 << 20,
            "max.partition.fetch.bytes": 8 << 20,
        }
    )
    seqs: list[int] = []
    try:
        consumer.assign([TopicPartition(topic, 0, 0)])
        deadline = time.monotonic() + 120
        while len(seqs) < count and time.monotonic() < deadline:
            for msg in consumer.consume(500, 1.0):
                assert msg.error() is None, msg.error()
                seqs.append(int(msg.value()[:8]))
    finally:
        consumer.close()
    return seqs


@pytest.mark.parametrize("round_", range(3))
def test_plain_producer_order_with_mixed_sizes(pressed_broker: BrokerProcess, round_: int) -> None:
    """The issue's case: one non-idempotent confluent-kafka producer, records of 1 KiB
    and 500 KB, 5 requests in flight, one partition: stored order == send order."""
    topic = f"order-{round_}-{uuid.uuid4().hex[:8]}"
    create_topic(pressed_broker.bootstrap, topic, partitions=1)
    count = 280
    acked, failures = _produce(pressed_broker.bootstrap, topic, count)
    assert failures == []
    assert len(acked) == count
    stored = _stored_sequences(pressed_broker.bootstrap, topic, count)
    out_of_place = sum(1 for i, seq in enumerate(stored) if seq != i)
    assert out_of_place == 0, f"{out_of_place} records out of place"
    assert stored == list(range(count))
    assert [acked[seq] for seq in range(count)] == list(range(count))


def test_produce_abandoned_before_its_commit_is_not_stored(broker_factory: BrokerFactory) -> None:
    """A client that closes its connection before the acknowledgement (it gave up on a slow
    broker and will send the records elsewhere) leaves nothing behind here, so a plain
    producer's resend cannot become a duplicate."""
    proc = broker_factory({"FAULT_COMMIT_DELAY_MS": 1500})
    topic = f"abandoned-{uuid.uuid4().hex[:8]}"
    create_topic(proc.bootstrap, topic, partitions=1)
    with WireClient(proc.port) as client:
        frame = encode_request(0, 7, 1, produce_v7({topic: {0: record_batch([b"gone"], 1)}}))
        client.send_raw(frame)
        time.sleep(0.3)  # read and in the WAL; its commit waits 1.5 s
    with WireClient(proc.port, timeout=30) as client:
        answer = client.request(0, 7, produce_v7({topic: {0: record_batch([b"kept"], 1)}}))
    assert produce_errors(answer)[(topic, 0)] == (0, 0)
