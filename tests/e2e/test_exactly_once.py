"""Exactly-once consume-transform-produce with real clients (issue #5's must-show).

confluent-kafka reads 3 input partitions, writes a transformed copy of every record to the
same partition of a 3-partition output topic and commits its input offsets inside the
transaction (`send_offsets_to_transaction`); 1,000 transactions, every 7th aborted and
its input re-processed. read_committed consumers of all three client libraries must read
each input record's copy exactly once, in input order; read_uncommitted sees the aborted
copies too."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterable

from confluent_kafka import Consumer, Message, Producer, TopicPartition
from e2e_fixtures import BrokerFactory
from e2e_harness import create_topic
from txn_readers import read_aiokafka, read_confluent, read_kafka_python

PARTITIONS = 3
TRANSACTIONS = 1000
ABORT_EVERY = 7
CHUNK = 3
"""Input records per transaction."""
COMMITTED = TRANSACTIONS - TRANSACTIONS // ABORT_EVERY
PER_PARTITION = COMMITTED * CHUNK // PARTITIONS
DEADLINE_S = 60


def _seed(bootstrap: str, topic: str) -> dict[int, list[bytes]]:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    sent: dict[int, list[bytes]] = {p: [] for p in range(PARTITIONS)}
    for i in range(PER_PARTITION):
        for p in range(PARTITIONS):
            value = f"in-{p}-{i}".encode()
            producer.produce(topic, value=value, key=str(i).encode(), partition=p)
            sent[p].append(value)
    assert producer.flush(60) == 0
    return sent


def _transform(value: bytes) -> bytes:
    return b"out:" + value


def _run_pipeline(bootstrap: str, source: str, sink: str, group: str) -> tuple[int, int]:
    """Run exactly TRANSACTIONS transactions; returns (committed, aborted)."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "isolation.level": "read_committed",
        }
    )
    producer = Producer(
        {"bootstrap.servers": bootstrap, "transactional.id": f"{group}-txn", "linger.ms": 0}
    )
    producer.init_transactions(30)
    consumer.subscribe([source])
    committed = aborted = 0
    deadline = time.monotonic() + 600
    try:
        for index in range(TRANSACTIONS):
            chunk = []
            while len(chunk) < CHUNK:
                assert time.monotonic() < deadline, "pipeline too slow"
                for message in consumer.consume(CHUNK - len(chunk), timeout=1.0):
                    assert message.error() is None, message.error()
                    chunk.append(message)
            producer.begin_transaction()
            for message in chunk:
                producer.produce(
                    sink,
                    value=_transform(message.value()),
                    key=message.key(),
                    partition=message.partition(),
                )
            positions = consumer.position(consumer.assignment())
            producer.send_offsets_to_transaction(positions, consumer.consumer_group_metadata())
            if index % ABORT_EVERY == ABORT_EVERY - 1:
                # Flushed first: abort_transaction drops records not sent yet, and the
                # test wants every aborted record in the log (read_uncommitted sees them).
                assert producer.flush(30) == 0
                producer.abort_transaction(30)
                aborted += 1
                # Re-process the chunk: rewind to where each of its partitions started.
                for message in _first_per_partition(chunk):
                    consumer.seek(TopicPartition(source, message.partition(), message.offset()))
            else:
                producer.commit_transaction(30)
                committed += 1
    finally:
        consumer.close()
    return committed, aborted


def _first_per_partition(chunk: Iterable[Message]) -> list[Message]:
    first: dict[int, Message] = {}
    for message in chunk:
        first.setdefault(message.partition(), message)
    return list(first.values())


def _assert_same(
    client: str, got: dict[int, list[bytes]], expected: dict[int, list[bytes]]
) -> None:
    """Equal logs, or a short account of where they part."""
    for p in expected:
        if got[p] == expected[p]:
            continue
        first = next(
            (i for i, (a, b) in enumerate(zip(got[p], expected[p], strict=False)) if a != b),
            min(len(got[p]), len(expected[p])),
        )
        raise AssertionError(
            f"{client}, partition {p}: read {len(got[p])} records, expected"
            f" {len(expected[p])}; first difference at #{first}:"
            f" {got[p][first : first + 3]} vs {expected[p][first : first + 3]}"
        )


def test_consume_transform_produce_exactly_once(
    broker_factory: BrokerFactory, topic_name: str
) -> None:
    broker = broker_factory({"PRODUCE_COMMIT_INTERVAL_MS": 2})
    source, sink = f"{topic_name}-in", f"{topic_name}-out"
    create_topic(broker.bootstrap, source, PARTITIONS)
    create_topic(broker.bootstrap, sink, PARTITIONS)
    sent = _seed(broker.bootstrap, source)

    committed, aborted = _run_pipeline(broker.bootstrap, source, sink, f"{topic_name}-eos")
    assert (committed, aborted) == (COMMITTED, TRANSACTIONS // ABORT_EVERY)

    expected = {p: [_transform(v) for v in values] for p, values in sent.items()}
    total = sum(map(len, expected.values()))
    _assert_same(
        "confluent-kafka",
        read_confluent(broker.bootstrap, sink, PARTITIONS, "read_committed", total, DEADLINE_S),
        expected,
    )
    _assert_same(
        "kafka-python",
        read_kafka_python(broker.bootstrap, sink, PARTITIONS, total, DEADLINE_S),
        expected,
    )
    _assert_same(
        "aiokafka",
        asyncio.run(read_aiokafka(broker.bootstrap, sink, PARTITIONS, total, DEADLINE_S)),
        expected,
    )

    # read_uncommitted also sees the aborted copies: every aborted transaction's records.
    everything = read_confluent(
        broker.bootstrap, sink, PARTITIONS, "read_uncommitted", total + aborted * CHUNK, DEADLINE_S
    )
    assert sum(map(len, everything.values())) == total + aborted * CHUNK
    for p in range(PARTITIONS):
        assert set(everything[p]) == set(expected[p])

    # The group's committed input offsets are the ends of the input: offsets moved only
    # with committed transactions, and all of them did.
    check = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": f"{topic_name}-eos"})
    try:
        offsets = check.committed([TopicPartition(source, p) for p in range(PARTITIONS)], 30)
    finally:
        check.close()
    assert [tp.offset for tp in offsets] == [PER_PARTITION] * PARTITIONS
