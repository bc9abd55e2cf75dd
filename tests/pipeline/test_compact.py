"""Compaction on local Spark: a keyed topic with updates, tombstones, every codec and an
aborted transaction ends with the latest value per key at its original offset; tombstones
go once older than delete.retention.ms; consumers from offset 0 read the compacted log.
Keyless records are refused at produce on compacted topics (INVALID_RECORD), as in Kafka."""

from __future__ import annotations

from collections.abc import Sequence

import pytest
from confluent_kafka import KafkaError, Producer
from e2e_harness import BrokerProcess, Rec, create_topic, now_ms
from pipeline_clients import Row, consume, produce, produce_transactions
from pyspark.sql import SparkSession

from lakelog.pipeline.compact import run_compact
from pipeline_jobs import partition_rows, run_job

PARTITIONS = 2
KEYS = 30
INVALID_RECORD = 87

pytestmark = pytest.mark.timeout(300)


def recs(keys: Sequence[int], tag: str | None, ts: int) -> list[Rec]:
    """One record per key and partition; tag None writes tombstones."""
    return [
        Rec(p, f"k{i}".encode(), None if tag is None else f"{tag}-{i}-{p}".encode(), (), ts + i)
        for p in range(PARTITIONS)
        for i in keys
    ]


def fill(broker: BrokerProcess, topic: str) -> None:
    ts = now_ms() - 600_000
    produce(broker.bootstrap, topic, recs(range(KEYS), "v1", ts))
    produce(broker.bootstrap, topic, recs(range(15), "v2", ts + 100), "gzip")
    produce(broker.bootstrap, topic, recs(range(20, 25), None, ts + 200), "lz4")
    produce(broker.bootstrap, topic, recs(range(5, 10), "v4", ts + 300), "zstd")
    produce_transactions(
        broker.bootstrap,
        topic,
        [(recs(range(25, 30), "aborted", ts + 400), False), (recs([26], "txn", ts + 500), True)],
    )
    produce(broker.bootstrap, topic, recs(range(3), "v5", ts + 600), "snappy")
    # The partition's last batch, never compacted: a key of its own.
    produce(broker.bootstrap, topic, [Rec(p, b"end", b"end", (), ts + 700) for p in range(2)])


def compacted(rows: Sequence[Row], drop_tombstones: bool) -> list[Row]:
    """What compaction must leave of the committed rows: each key's latest record (the
    last batch, `end`, is kept whole), tombstones only if they are not yet due."""
    latest: dict[tuple[int, bytes | None], int] = {}
    for row in rows:
        latest[row.partition, row.key] = row.offset
    return [
        row
        for row in rows
        if latest[row.partition, row.key] == row.offset
        and not (drop_tombstones and row.value is None)
    ]


@pytest.mark.parametrize("retention", ["0", "86400000"], ids=["tombstones-due", "tombstones-kept"])
def test_compaction_keeps_the_latest_record_per_key(
    shared_broker: BrokerProcess, spark: SparkSession, topic_name: str, retention: str
) -> None:
    broker = shared_broker
    create_topic(
        broker.bootstrap,
        topic_name,
        PARTITIONS,
        {"cleanup.policy": "compact", "delete.retention.ms": retention},
    )
    fill(broker, topic_name)
    total = (KEYS + 15 + 5 + 5 + 1 + 3 + 1) * PARTITIONS
    committed = consume(broker.bootstrap, topic_name, PARTITIONS, total)
    everything = consume(
        broker.bootstrap,
        topic_name,
        PARTITIONS,
        total + 5 * PARTITIONS,
        isolation="read_uncommitted",
    )
    assert len(everything) == len(committed) + 5 * PARTITIONS  # the aborted records
    rows_before = sum(len(r) for r in partition_rows(broker, topic_name, PARTITIONS))

    summary = run_job(broker, spark, lambda ctx: run_compact(ctx, [topic_name]))
    expected = compacted(committed, drop_tombstones=retention == "0")
    # Aborted records are gone from storage too: even read_uncommitted no longer sees them.
    for isolation in ("read_committed", "read_uncommitted"):
        after = consume(
            broker.bootstrap, topic_name, PARTITIONS, len(expected), isolation=isolation
        )
        assert after == expected, isolation
    assert {row.key for row in expected if row.partition == 0} >= {b"k0", b"k26", b"end"}
    # Aborted batches go whole; every other committed record missing now was dropped.
    assert summary.details["records dropped"] == len(committed) - len(expected)
    assert summary.details["partitions changed meanwhile"] == 0
    assert summary.details["partitions failed"] == 0
    assert summary.objects_written >= PARTITIONS
    rows_after = sum(len(r) for r in partition_rows(broker, topic_name, PARTITIONS))
    assert rows_after < rows_before

    # A second run finds nothing more to do and changes nothing.
    again = run_job(broker, spark, lambda ctx: run_compact(ctx, [topic_name]))
    assert again.details["records dropped"] == 0
    assert consume(broker.bootstrap, topic_name, PARTITIONS, len(expected)) == expected


def test_keyless_records_are_refused_on_compacted_topics(
    shared_broker: BrokerProcess, topic_name: str
) -> None:
    create_topic(shared_broker.bootstrap, topic_name, 1, {"cleanup.policy": "compact,delete"})
    producer = Producer({"bootstrap.servers": shared_broker.bootstrap, "linger.ms": 0})
    errors: list[int | None] = []

    def report(err: KafkaError | None, _msg: object) -> None:
        errors.append(None if err is None else err.code())

    producer.produce(topic_name, key=b"k", value=b"keyed", on_delivery=report)
    assert producer.flush(30) == 0
    producer.produce(topic_name, key=None, value=b"keyless", on_delivery=report)
    assert producer.flush(30) == 0
    assert errors == [None, INVALID_RECORD]
