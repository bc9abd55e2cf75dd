"""Real Kafka clients (confluent-kafka) that fill topics for the pipeline tests and read
them back the way a consumer does, so Spark's rows can be compared with both."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from e2e_harness import Rec

PRODUCE_TIMEOUT_S = 60.0


@dataclass(frozen=True, slots=True)
class Row:
    """One record as the Spark source, the export and a consumer all describe it."""

    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...]
    timestamp: int


def produce(
    bootstrap: str, topic: str, records: Sequence[Rec], codec: str = "none", **config: object
) -> list[int]:
    """Produce and wait for every ack; returns each record's offset (in input order)."""
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "compression.type": codec,
            "linger.ms": 20,
            "batch.size": 64 * 1024,
            "message.timeout.ms": int(PRODUCE_TIMEOUT_S * 1000),
            **config,
        }
    )
    _wait_for_partitions(producer, topic, max((r.partition for r in records), default=0) + 1)
    offsets = [-1] * len(records)
    errors: list[str] = []

    def done(index: int) -> Callable[[object, object], None]:
        def report(err: object, msg: object) -> None:
            if err is not None:
                errors.append(str(err))
            else:
                offsets[index] = msg.offset()  # type: ignore[attr-defined]

        return report

    for i, rec in enumerate(records):
        producer.produce(
            topic,
            key=rec.key,
            value=rec.value,
            partition=rec.partition,
            headers=list(rec.headers) or None,
            timestamp=rec.timestamp,
            on_delivery=done(i),
        )
        producer.poll(0)
    left = producer.flush(PRODUCE_TIMEOUT_S)
    assert left == 0 and not errors, f"{left} unacknowledged, errors: {errors[:3]}"
    return offsets


def _wait_for_partitions(producer: Producer, topic: str, count: int) -> None:
    """librdkafka fails records for partitions its metadata does not list yet."""
    deadline = time.monotonic() + 30
    while True:
        meta = producer.list_topics(topic, timeout=10).topics.get(topic)
        if meta is not None and meta.error is None and len(meta.partitions) >= count:
            return
        assert time.monotonic() < deadline, f"{topic} never showed {count} partitions"
        time.sleep(0.2)


def produce_transactions(
    bootstrap: str, topic: str, transactions: Sequence[tuple[Sequence[Rec], bool]]
) -> None:
    """Each (records, commit) is one transaction of one transactional producer, committed
    or aborted in order."""
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "transactional.id": f"pipeline-{uuid.uuid4().hex[:8]}",
            "linger.ms": 5,
            "message.timeout.ms": int(PRODUCE_TIMEOUT_S * 1000),
        }
    )
    _wait_for_partitions(
        producer, topic, max((r.partition for recs, _ in transactions for r in recs), default=0) + 1
    )
    producer.init_transactions(PRODUCE_TIMEOUT_S)
    for records, commit in transactions:
        producer.begin_transaction()
        for rec in records:
            producer.produce(
                topic,
                key=rec.key,
                value=rec.value,
                partition=rec.partition,
                headers=list(rec.headers) or None,
                timestamp=rec.timestamp,
            )
        producer.flush(PRODUCE_TIMEOUT_S)
        if commit:
            producer.commit_transaction(PRODUCE_TIMEOUT_S)
        else:
            producer.abort_transaction(PRODUCE_TIMEOUT_S)


def consume(
    bootstrap: str,
    topic: str,
    partitions: int,
    expect: int,
    isolation: str = "read_committed",
    timeout: float = 60.0,
) -> list[Row]:
    """Every record from offset 0 as a consumer sees it, sorted by (partition, offset).
    Reads until `expect` records arrived and the log stays quiet for a second."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"pipeline-{uuid.uuid4().hex}",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "isolation.level": isolation,
        }
    )
    consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    rows: list[Row] = []
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            batch = consumer.consume(1000, timeout=1.0)
            if not batch and len(rows) >= expect:
                break
            for message in batch:
                if message.error() is not None:
                    raise KafkaException(message.error())
                rows.append(
                    Row(
                        message.partition(),
                        message.offset(),
                        message.key(),
                        message.value(),
                        tuple(message.headers() or ()),
                        message.timestamp()[1],
                    )
                )
    finally:
        consumer.close()
    assert len(rows) >= expect, f"consumer read {len(rows)} of {expect} records"
    return sorted(rows, key=lambda r: (r.partition, r.offset))


def spark_rows(rows: Sequence[object]) -> list[Row]:
    """Spark Rows (Kafka source columns) as `Row`s, sorted by (partition, offset)."""
    out = []
    for r in rows:
        headers = tuple((h["key"], h["value"]) for h in (r["headers"] or ()))  # type: ignore[index]
        ts = r["timestamp"]  # type: ignore[index]
        out.append(
            Row(
                r["partition"],  # type: ignore[index]
                r["offset"],  # type: ignore[index]
                r["key"],  # type: ignore[index]
                r["value"],  # type: ignore[index]
                headers,
                round(ts.timestamp() * 1000),
            )
        )
    return sorted(out, key=lambda r: (r.partition, r.offset))


def as_produced(records: Sequence[Rec], offsets: Sequence[int]) -> list[Row]:
    return sorted(
        (
            Row(rec.partition, off, rec.key, rec.value, rec.headers, rec.timestamp)
            for rec, off in zip(records, offsets, strict=True)
        ),
        key=lambda r: (r.partition, r.offset),
    )
