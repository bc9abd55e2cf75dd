"""Reading a whole topic back with each client library's consumer (confluent-kafka,
kafka-python, aiokafka), for the transaction tests that compare what read_committed and
read_uncommitted consumers get: {partition: values in offset order}. Each reader stops
once it has the expected count and one more poll brought nothing (so an extra record,
a duplicate or an aborted one, shows up), or at its deadline."""

from __future__ import annotations

import time

from confluent_kafka import Consumer, KafkaException, TopicPartition

Values = dict[int, list[bytes]]


def confluent_consumer(bootstrap: str, isolation: str) -> Consumer:
    return Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"reader-{isolation}-{time.monotonic_ns()}",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "isolation.level": isolation,
            "fetch.wait.max.ms": 100,
        }
    )


def read_confluent(
    bootstrap: str, topic: str, partitions: int, isolation: str, expect: int, deadline_s: float
) -> Values:
    consumer = confluent_consumer(bootstrap, isolation)
    consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    got: Values = {p: [] for p in range(partitions)}
    deadline = time.monotonic() + deadline_s
    try:
        while time.monotonic() < deadline:
            total = sum(map(len, got.values()))
            batch = consumer.consume(1000, timeout=1.0 if total >= expect else 0.2)
            if not batch and total >= expect:
                break
            for message in batch:
                if message.error() is not None:
                    raise KafkaException(message.error())
                got[message.partition()].append(message.value())
    finally:
        consumer.close()
    return got


def read_kafka_python(
    bootstrap: str, topic: str, partitions: int, expect: int, deadline_s: float
) -> Values:
    """read_committed, with kafka-python."""
    from kafka import KafkaConsumer
    from kafka import TopicPartition as KTopicPartition

    consumer = KafkaConsumer(
        bootstrap_servers=bootstrap,
        isolation_level="read_committed",
        enable_auto_commit=False,
        auto_offset_reset="earliest",
    )
    consumer.assign([KTopicPartition(topic, p) for p in range(partitions)])
    got: Values = {p: [] for p in range(partitions)}
    deadline = time.monotonic() + deadline_s
    try:
        while time.monotonic() < deadline and sum(map(len, got.values())) < expect:
            for records in consumer.poll(timeout_ms=500).values():
                for record in records:
                    got[record.partition].append(record.value)
        for records in consumer.poll(timeout_ms=1000).values():
            for record in records:
                got[record.partition].append(record.value)
    finally:
        consumer.close()
    return got


async def read_aiokafka(
    bootstrap: str, topic: str, partitions: int, expect: int, deadline_s: float
) -> Values:
    """read_committed, with aiokafka."""
    from aiokafka import AIOKafkaConsumer
    from aiokafka import TopicPartition as ATopicPartition

    consumer = AIOKafkaConsumer(
        bootstrap_servers=bootstrap,
        isolation_level="read_committed",
        enable_auto_commit=False,
        auto_offset_reset="earliest",
    )
    await consumer.start()
    got: Values = {p: [] for p in range(partitions)}
    try:
        consumer.assign([ATopicPartition(topic, p) for p in range(partitions)])
        deadline = time.monotonic() + deadline_s
        while time.monotonic() < deadline and sum(map(len, got.values())) < expect:
            for records in (await consumer.getmany(timeout_ms=500)).values():
                for record in records:
                    got[record.partition].append(record.value)
        for records in (await consumer.getmany(timeout_ms=1000)).values():
            for record in records:
                got[record.partition].append(record.value)
    finally:
        await consumer.stop()
    return got
