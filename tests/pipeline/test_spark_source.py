"""The Spark data source against a real broker's data: real producers (every codec,
headers, null keys and values, transactions), read back by Spark and by a Kafka consumer."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from e2e_harness import BrokerProcess, Rec, create_topic, make_records, now_ms
from pipeline_clients import (
    Row,
    as_produced,
    consume,
    produce,
    produce_transactions,
    spark_rows,
)
from pyspark.sql import DataFrame, SparkSession

CODECS = ("none", "gzip", "snappy", "lz4", "zstd")
PARTITIONS = 4


@dataclass(frozen=True)
class LogData:
    broker: BrokerProcess
    codecs_topic: str
    codecs_rows: list[Row]
    txn_topic: str
    txn_committed: set[bytes]
    txn_aborted: set[bytes]
    append_topic: str

    def options(self) -> dict[str, str]:
        backend = self.broker.backend
        return {
            "lakelog.storage.url": backend.storage_url,
            "lakelog.coordinator.url": backend.coordinator_url,
        }


@pytest.fixture(scope="module")
def log_data(shared_broker_process: BrokerProcess) -> Iterator[LogData]:
    broker = shared_broker_process
    if not broker.alive():
        broker.kill()
        broker.start()
    suffix = str(time.monotonic_ns())
    codecs_topic = f"spark-codecs-{suffix}"
    create_topic(broker.bootstrap, codecs_topic, PARTITIONS)
    base = now_ms() - 3_600_000
    rows: list[Row] = []
    for i, codec in enumerate(CODECS):
        records = make_records(120, PARTITIONS, base + i * 1000, tag=codec)
        offsets = produce(broker.bootstrap, codecs_topic, records, codec)
        rows += as_produced(records, offsets)

    txn_topic = f"spark-txn-{suffix}"
    create_topic(broker.bootstrap, txn_topic, 2)

    def values(tag: str, count: int, partitions: int = 2) -> list[Rec]:
        return [
            Rec(i % partitions, None, f"{tag}-{i}".encode(), (), now_ms()) for i in range(count)
        ]

    committed = values("commit-a", 10) + values("commit-b", 7)
    aborted = values("abort", 9)
    plain = values("plain", 6)
    produce_transactions(broker.bootstrap, txn_topic, [(committed[:10], True), (aborted, False)])
    produce(broker.bootstrap, txn_topic, plain)
    produce_transactions(broker.bootstrap, txn_topic, [(committed[10:], True)])

    append_topic = f"spark-append-{suffix}"
    create_topic(
        broker.bootstrap, append_topic, 1, configs={"message.timestamp.type": "LogAppendTime"}
    )
    produce(broker.bootstrap, append_topic, values("appended", 5, partitions=1))
    yield LogData(
        broker,
        codecs_topic,
        sorted(rows, key=lambda r: (r.partition, r.offset)),
        txn_topic,
        {r.value for r in committed + plain if r.value is not None},
        {r.value for r in aborted if r.value is not None},
        append_topic,
    )


def _read(spark: SparkSession, data: LogData, **options: Any) -> DataFrame:
    reader = spark.read.format("lakelog").options(**data.options())
    for key, value in options.items():
        reader = reader.option(key, value)
    return reader.load()


def test_batch_read_equals_produced_and_consumed(spark: SparkSession, log_data: LogData) -> None:
    df = _read(spark, log_data, subscribe=log_data.codecs_topic)
    assert df.schema.simpleString() == (
        "struct<key:binary,value:binary,topic:string,partition:int,offset:bigint,"
        "timestamp:timestamp,timestampType:int,headers:array<struct<key:string,value:binary>>>"
    )
    assert df.rdd.getNumPartitions() == PARTITIONS  # one Spark partition per topic partition
    collected = df.collect()
    got = spark_rows(collected)
    assert got == log_data.codecs_rows
    assert {r["topic"] for r in collected} == {log_data.codecs_topic}
    assert {r["timestampType"] for r in collected} == {0}
    consumed = consume(
        log_data.broker.bootstrap, log_data.codecs_topic, PARTITIONS, len(log_data.codecs_rows)
    )
    assert got == consumed
    # the awkward cases are really there
    assert any(r.key is None for r in got) and any(r.value is None for r in got)
    assert any(r.value == b"" for r in got) and any(len(r.headers) == 3 for r in got)


def test_offset_ranges_follow_kafka_source_json(spark: SparkSession, log_data: LogData) -> None:
    topic = log_data.codecs_topic
    ends = {
        p: max(r.offset for r in log_data.codecs_rows if r.partition == p) + 1 for p in range(4)
    }
    starting = {topic: {"0": 5, "1": -2, "2": -1, "3": 10}}
    ending = {topic: {"0": 20, "1": 3, "2": -1, "3": ends[3]}}
    df = _read(
        spark,
        log_data,
        subscribe=topic,
        startingOffsets=json.dumps(starting),
        endingOffsets=json.dumps(ending),
    )
    got = [(r["partition"], r["offset"]) for r in df.select("partition", "offset").collect()]
    expected = [(0, o) for o in range(5, 20)] + [(1, o) for o in range(0, 3)]
    expected += [(3, o) for o in range(10, ends[3])]
    assert sorted(got) == expected
    assert df.rdd.getNumPartitions() == 3  # partition 2's range is empty: no task


def test_starting_timestamp_picks_first_record_at_or_after(
    spark: SparkSession, log_data: LogData
) -> None:
    rows = log_data.codecs_rows
    pivot = sorted(r.timestamp for r in rows)[len(rows) // 2]
    df = _read(spark, log_data, subscribe=log_data.codecs_topic, startingTimestamp=str(pivot))
    got = spark_rows(df.collect())
    # Timestamps ascend within each partition, so "from the first record at or after" means
    # exactly the records at or after the pivot.
    assert got == [r for r in rows if r.timestamp >= pivot]


def test_timestamp_after_every_record(spark: SparkSession, log_data: LogData) -> None:
    future = str(now_ms() + 3_600_000)
    with pytest.raises(Exception, match="no record at or after timestamp"):
        _read(spark, log_data, subscribe=log_data.codecs_topic, startingTimestamp=future).collect()
    empty = _read(
        spark,
        log_data,
        subscribe=log_data.codecs_topic,
        startingTimestamp=future,
        startingOffsetsByTimestampStrategy="latest",
    )
    assert empty.count() == 0


def test_aborted_transactions_are_absent_by_default(spark: SparkSession, log_data: LogData) -> None:
    committed = _read(spark, log_data, subscribe=log_data.txn_topic).collect()
    values = [bytes(r["value"]) for r in committed]
    assert sorted(values) == sorted(log_data.txn_committed)
    consumed = consume(log_data.broker.bootstrap, log_data.txn_topic, 2, len(values))
    assert [(r.partition, r.offset, r.value) for r in consumed] == sorted(
        (r["partition"], r["offset"], bytes(r["value"])) for r in committed
    )
    everything = _read(
        spark,
        log_data,
        subscribe=log_data.txn_topic,
        **{"kafka.isolation.level": "read_uncommitted"},
    ).collect()
    assert {bytes(r["value"]) for r in everything} == log_data.txn_committed | log_data.txn_aborted


def test_log_append_time_topic_reports_append_time(spark: SparkSession, log_data: LogData) -> None:
    before = now_ms() - 600_000
    rows = _read(spark, log_data, subscribe=log_data.append_topic).collect()
    assert len(rows) == 5
    assert {r["timestampType"] for r in rows} == {1}
    assert all(r["timestamp"].timestamp() * 1000 > before for r in rows)


def test_bad_options_fail_with_the_option_name(spark: SparkSession, log_data: LogData) -> None:
    with pytest.raises(Exception, match="subscribe"):
        _read(spark, log_data).collect()
    with pytest.raises(Exception, match="startingOffsets"):
        _read(spark, log_data, subscribe=log_data.codecs_topic, startingOffsets="{oops").collect()
    with pytest.raises(Exception, match="every partition"):
        _read(
            spark,
            log_data,
            subscribe=log_data.codecs_topic,
            startingOffsets=json.dumps({log_data.codecs_topic: {"0": 1}}),
        ).collect()


def test_stream_restart_from_checkpoint_is_exactly_once(
    spark: SparkSession, log_data: LogData, tmp_path: Path
) -> None:
    broker = log_data.broker
    topic = f"spark-stream-{time.monotonic_ns()}"
    create_topic(broker.bootstrap, topic, 2)
    first = make_records(60, 2, now_ms(), tag="first")
    produce(broker.bootstrap, topic, first)
    sink, checkpoint = str(tmp_path / "sink"), str(tmp_path / "checkpoint")

    def start(trigger: dict[str, Any]) -> Any:
        stream = (
            spark.readStream.format("lakelog")
            .options(**log_data.options())
            .option("subscribe", topic)
            .option("startingOffsets", "earliest")
            .option("maxOffsetsPerTrigger", "25")
            .load()
        )
        return (
            stream.writeStream.format("parquet")
            .option("path", sink)
            .option("checkpointLocation", checkpoint)
            .trigger(**trigger)
            .start()
        )

    # Stopped as soon as the first micro-batch is done, mid-way through the backlog.
    query = start({"processingTime": "1 second"})
    deadline = time.monotonic() + 120
    while not query.recentProgress and time.monotonic() < deadline:
        time.sleep(0.2)
    query.stop()
    assert query.recentProgress, "the stream made no progress"
    done_before = spark.read.parquet(sink).count()
    assert 0 < done_before < len(first)

    second = make_records(45, 2, now_ms(), tag="second")
    produce(broker.bootstrap, topic, second)
    query = start({"availableNow": True})
    query.awaitTermination(180)
    assert query.exception() is None

    rows = spark.read.parquet(sink).select("partition", "offset", "value").collect()
    keys = [(r["partition"], r["offset"]) for r in rows]
    assert len(keys) == len(set(keys)) == len(first) + len(second)
    values = sorted(bytes(r["value"]) for r in rows if r["value"] is not None)
    assert values == sorted(r.value for r in first + second if r.value is not None)


def test_warm_up_starts_workers_and_reads_still_work(
    spark: SparkSession, log_data: LogData
) -> None:
    from lakelog.spark import warm_up

    assert warm_up(spark) is None
    thread = warm_up(spark, background=True)
    assert thread is not None
    thread.join(timeout=120)
    assert not thread.is_alive()
    n = spark.read.format("lakelog_warm_up").option("partitions", "3").load().count()
    assert n == 3
    df = _read(spark, log_data, subscribe=log_data.codecs_topic)
    assert spark_rows(df.collect()) == log_data.codecs_rows
