"""read_committed against a real broker: a confluent-kafka transactional producer commits
and aborts; read_committed consumers of confluent-kafka, kafka-python and aiokafka get
exactly the committed records (the broker's synthesized control batches and aborted lists
let each client drop the rest); read_uncommitted gets everything; an open transaction
holds read_committed consumers and ListOffsets "latest" back until it ends."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence

from confluent_kafka import Producer, TopicPartition
from e2e_harness import BrokerProcess, create_topic
from txn_readers import (
    Values,
    confluent_consumer,
    read_aiokafka,
    read_confluent,
    read_kafka_python,
)

PARTITIONS = 2
DEADLINE_S = 30


def _transactional(bootstrap: str, txn_id: str) -> Producer:
    producer = Producer(
        {"bootstrap.servers": bootstrap, "transactional.id": txn_id, "linger.ms": 1}
    )
    producer.init_transactions(30)
    return producer


def _plain(bootstrap: str, topic: str, values: Sequence[tuple[int, bytes]]) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 1})
    for partition, value in values:
        producer.produce(topic, value=value, partition=partition)
    assert producer.flush(30) == 0


def _send(producer: Producer, topic: str, tag: str, count: int, sent: Values) -> None:
    for i in range(count):
        for p in range(PARTITIONS):
            value = f"{tag}-{p}-{i}".encode()
            producer.produce(topic, value=value, partition=p)
            sent[p].append(value)


def _kafka_python_latest(bootstrap: str, topic: str, isolation: str) -> int:
    """ListOffsets latest of partition 0 at the given isolation level."""
    from kafka import KafkaConsumer
    from kafka import TopicPartition as KTopicPartition

    consumer = KafkaConsumer(bootstrap_servers=bootstrap, isolation_level=isolation)
    try:
        tp = KTopicPartition(topic, 0)
        return int(consumer.end_offsets([tp])[tp])
    finally:
        consumer.close()


def _confluent_latest(bootstrap: str, topic: str, isolation: str) -> int:
    consumer = confluent_consumer(bootstrap, isolation)
    try:
        _, high = consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)
        return int(high)
    finally:
        consumer.close()


def test_read_committed_sees_exactly_the_committed_records(
    shared_broker: BrokerProcess, topic_name: str
) -> None:
    bootstrap = shared_broker.bootstrap
    create_topic(bootstrap, topic_name, PARTITIONS)
    committed: Values = {p: [] for p in range(PARTITIONS)}
    everything: Values = {p: [] for p in range(PARTITIONS)}
    producer = _transactional(bootstrap, f"{topic_name}-txn")
    for index, (count, commit) in enumerate([(5, True), (4, False), (3, True), (2, False)]):
        producer.begin_transaction()
        sent: Values = {p: [] for p in range(PARTITIONS)}
        _send(producer, topic_name, f"t{index}", count, sent)
        if commit:
            producer.commit_transaction(30)
        else:
            producer.flush(30)  # the aborted records do reach the log
            producer.abort_transaction(30)
        for p in range(PARTITIONS):
            everything[p] += sent[p]
            if commit:
                committed[p] += sent[p]
        if index == 1:  # plain records between transactions
            plain = [(p, f"plain-{p}".encode()) for p in range(PARTITIONS)]
            _plain(bootstrap, topic_name, plain)
            for p, value in plain:
                committed[p].append(value)
                everything[p].append(value)

    expect = sum(map(len, committed.values()))
    args = (bootstrap, topic_name, PARTITIONS)
    assert read_confluent(*args, "read_committed", expect, DEADLINE_S) == committed
    assert read_kafka_python(*args, expect, DEADLINE_S) == committed
    assert asyncio.run(read_aiokafka(*args, expect, DEADLINE_S)) == committed
    every = sum(map(len, everything.values()))
    assert read_confluent(*args, "read_uncommitted", every, DEADLINE_S) == everything


def test_an_open_transaction_holds_read_committed_back(
    shared_broker: BrokerProcess, topic_name: str
) -> None:
    bootstrap = shared_broker.bootstrap
    create_topic(bootstrap, topic_name, 1)
    _plain(bootstrap, topic_name, [(0, b"a"), (0, b"b"), (0, b"c")])  # 0-2
    producer = _transactional(bootstrap, f"{topic_name}-txn")
    producer.begin_transaction()
    producer.produce(topic_name, value=b"t1", partition=0)
    producer.produce(topic_name, value=b"t2", partition=0)
    producer.flush(30)  # 3-4, in the log, undecided
    _plain(bootstrap, topic_name, [(0, b"d")])  # 5

    assert _kafka_python_latest(bootstrap, topic_name, "read_committed") == 3
    assert _kafka_python_latest(bootstrap, topic_name, "read_uncommitted") == 6
    assert _confluent_latest(bootstrap, topic_name, "read_committed") == 3
    assert _confluent_latest(bootstrap, topic_name, "read_uncommitted") == 6

    consumer = confluent_consumer(bootstrap, "read_committed")
    consumer.assign([TopicPartition(topic_name, 0, 0)])
    try:
        seen: list[bytes] = []
        deadline = time.monotonic() + 3
        while time.monotonic() < deadline:  # the stable part, then nothing
            for message in consumer.consume(100, timeout=0.2):
                assert message.error() is None, message.error()
                seen.append(message.value())
        assert seen == [b"a", b"b", b"c"]

        producer.commit_transaction(30)  # marker at 6: the LSO moves to 7
        committed_at = time.monotonic()
        deadline = committed_at + 10
        while len(seen) < 6 and time.monotonic() < deadline:
            for message in consumer.consume(100, timeout=0.2):
                assert message.error() is None, message.error()
                seen.append(message.value())
        assert seen == [b"a", b"b", b"c", b"t1", b"t2", b"d"]
        assert time.monotonic() - committed_at < 5
    finally:
        consumer.close()
    assert _kafka_python_latest(bootstrap, topic_name, "read_committed") == 7
    assert _confluent_latest(bootstrap, topic_name, "read_committed") == 7
