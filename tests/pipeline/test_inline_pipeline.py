"""Inline files (issue 32) in the readers that run outside the broker and in the log's
housekeeping: a log that mixes batches in inline files (small writes, bytes in the
coordinator) with batches in objects is read identically by the Spark source and by a
consumer, is compacted, trimmed by retention and DeleteRecords, and `lakelog pipeline
merge` moves what stays inline into objects."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pytest
from e2e_fixtures import BrokerFactory
from e2e_harness import BrokerProcess, Rec, create_topic, kafka_admin, now_ms, wait_until
from pipeline_clients import Row, consume, produce, produce_transactions, spark_rows
from pyspark.sql import SparkSession

from lakelog.config import Settings
from lakelog.coordinator import BatchCoordinator
from lakelog.pipeline.compact import run_compact
from lakelog.pipeline.export import run_export
from lakelog.pipeline.merge import run_merge
from pipeline_jobs import partition_rows, run_job, with_coordinator

pytestmark = pytest.mark.timeout(300)

INLINE_ENV = {
    "PRODUCE_INLINE": True,
    "PRODUCE_INLINE_MAX_BYTES": 4096,  # the big records below go to objects
    "PRODUCE_INLINE_MOVE_AGE_MS": 3_600_000,  # the broker moves nothing during a test
    "FILE_DELETE_GRACE_MS": 200,
    "RETENTION_CHECK_INTERVAL_MS": 200,
}
BIG = 8 * 1024


def read_spark(spark: SparkSession, broker: BrokerProcess, topic: str) -> list[Row]:
    backend = broker.backend
    frame = (
        spark.read.format("lakelog")
        .option("subscribe", topic)
        .option("lakelog.storage.url", backend.storage_url)
        .option("lakelog.coordinator.url", backend.coordinator_url)
        .load()
    )
    return spark_rows(frame.collect())


def kinds(broker: BrokerProcess, topic: str, partitions: int) -> set[str]:
    """Where the topic's rows live: 'inline' and/or 'wal'/'seg' (markers have no object)."""
    rows = partition_rows(broker, topic, partitions)
    return {c.object_key.split("/")[0] for part in rows for c in part if c.object_key}


def inline_counts(broker: BrokerProcess) -> tuple[int, int]:
    """(inline files holding batches, inline file rows in any state)."""

    async def counts(c: BatchCoordinator) -> tuple[int, int]:
        return len(await c.inline_files()), (await c.inline_usage(0)).files

    return with_coordinator(broker, counts)


def recs(
    partitions: int, keys: Sequence[int], tag: str | None, ts: int, size: int = 0
) -> list[Rec]:
    pad = b"x" * size
    return [
        Rec(
            p,
            f"k{i}".encode(),
            None if tag is None else f"{tag}-{i}-{p}".encode() + pad,
            (),
            ts + i,
        )
        for p in range(partitions)
        for i in keys
    ]


def test_spark_source_and_compaction_over_inline_and_object_batches(
    broker_factory: BrokerFactory, spark: SparkSession, topic_name: str
) -> None:
    broker = broker_factory(INLINE_ENV)
    create_topic(
        broker.bootstrap,
        topic_name,
        2,
        {"cleanup.policy": "compact", "delete.retention.ms": "86400000"},
    )
    ts = now_ms() - 600_000
    produce(broker.bootstrap, topic_name, recs(2, range(20), "v1", ts))  # inline
    produce(broker.bootstrap, topic_name, recs(2, range(10), "v2", ts + 100, BIG))  # objects
    produce(broker.bootstrap, topic_name, recs(2, range(5, 15), "v3", ts + 200), "zstd")
    produce_transactions(
        broker.bootstrap,
        topic_name,
        [
            (recs(2, range(15, 20), "aborted", ts + 300), False),
            (recs(2, [16], "txn", ts + 400), True),
        ],
    )
    produce(broker.bootstrap, topic_name, [Rec(p, b"end", b"end", (), ts + 500) for p in range(2)])
    assert kinds(broker, topic_name, 2) == {"inline", "wal"}

    total = (20 + 10 + 10 + 1 + 1) * 2
    before = consume(broker.bootstrap, topic_name, 2, total)
    assert len(before) == total
    assert read_spark(spark, broker, topic_name) == before

    summary = run_job(broker, spark, lambda ctx: run_compact(ctx, [topic_name]))
    assert summary.details["partitions failed"] == 0
    assert summary.details["records dropped"] > 0
    latest: dict[tuple[int, bytes | None], int] = {}
    for row in before:
        latest[row.partition, row.key] = row.offset
    want = [r for r in before if latest[r.partition, r.key] == r.offset]
    after = consume(broker.bootstrap, topic_name, 2, len(want))
    assert after == want
    assert read_spark(spark, broker, topic_name) == want


def test_retention_delete_records_and_merge_over_inline_and_object_batches(
    broker_factory: BrokerFactory, spark: SparkSession, topic_name: str
) -> None:
    from kafka import TopicPartition

    broker = broker_factory(INLINE_ENV)
    create_topic(broker.bootstrap, topic_name, 1, {"retention.ms": "3600000"})
    old = now_ms() - 7_200_000
    produce(broker.bootstrap, topic_name, recs(1, range(10), "old", old))  # inline, expired
    produce(broker.bootstrap, topic_name, recs(1, range(10), "a", now_ms()))  # inline
    produce(broker.bootstrap, topic_name, recs(1, range(5), "big", now_ms(), BIG))  # objects
    produce(broker.bootstrap, topic_name, recs(1, range(10), "b", now_ms()))  # inline
    assert kinds(broker, topic_name, 1) == {"inline", "wal"}
    everything = 35

    # Retention drops the expired inline batches; their inline files are then deleted.
    files_before = inline_counts(broker)[1]

    def earliest() -> int:
        from confluent_kafka import Consumer
        from confluent_kafka import TopicPartition as TP

        c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "probe"})
        try:
            return c.get_watermark_offsets(TP(topic_name, 0), timeout=15, cached=False)[0]
        finally:
            c.close()

    wait_until(lambda: earliest() == 10, 60, "retention to drop the expired records")
    wait_until(lambda: inline_counts(broker)[1] < files_before, 60, "expired inline files deleted")
    rows = consume(broker.bootstrap, topic_name, 1, everything - 10)
    assert [r.offset for r in rows] == list(range(10, everything))

    # DeleteRecords into the middle of the object batches.
    with kafka_admin(broker.bootstrap) as admin:
        result = admin.delete_records({TopicPartition(topic_name, 0): 23})  # type: ignore[attr-defined]
        assert result[TopicPartition(topic_name, 0)]["low_watermark"] == 23
    rows = consume(broker.bootstrap, topic_name, 1, everything - 23)
    assert [r.offset for r in rows] == list(range(23, everything))
    assert read_spark(spark, broker, topic_name) == rows
    assert inline_counts(broker)[0] > 0

    # `lakelog pipeline merge` moves every inline file (no broker did: their age is 1 h).
    summary = run_job(broker, spark, run_merge)
    assert summary.details["inline files moved"] > 0
    assert inline_counts(broker)[0] == 0
    assert "inline" not in kinds(broker, topic_name, 1)
    wait_until(lambda: inline_counts(broker)[1] == 0, 60, "moved inline files deleted")
    assert consume(broker.bootstrap, topic_name, 1, everything - 23) == rows
    assert read_spark(spark, broker, topic_name) == rows


def test_export_reads_inline_batches(
    broker_factory: BrokerFactory, spark: SparkSession, topic_name: str, tmp_path: Path
) -> None:
    broker = broker_factory(INLINE_ENV)
    create_topic(broker.bootstrap, topic_name, 2, {"retention.ms": "-1"})
    ts = now_ms()
    produce(broker.bootstrap, topic_name, recs(2, range(30), "small", ts))
    produce(broker.bootstrap, topic_name, recs(2, range(3), "big", ts + 100, BIG))
    assert kinds(broker, topic_name, 2) == {"inline", "wal"}
    backend = broker.backend
    settings = Settings(storage_url=backend.storage_url, coordinator_url=backend.coordinator_url)
    output = tmp_path / "export"
    summary = run_export(settings, [topic_name], str(output), spark=spark)
    assert summary.records == 66
    consumed = consume(broker.bootstrap, topic_name, 2, 66)
    exported = sorted(
        (r["partition"], r["offset"], r["key"], r["value"])
        for r in spark.read.parquet(str(output)).collect()
    )
    assert exported == [(r.partition, r.offset, r.key, r.value) for r in consumed]
