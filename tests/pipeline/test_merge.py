"""Merge on local Spark: a topic written as 500 small WAL objects becomes one segment
object and one coordinator row per partition, while a consumer reading throughout sees
every record exactly once; afterwards every client reads the merged log byte for byte and
ListOffsets by time still finds the exact record inside a joined row."""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Iterator

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from e2e_harness import BrokerProcess, create_topic, now_ms, wait_until
from pyspark.sql import SparkSession
from test_produce_consume import ADAPTERS, Got

from lakelog.pipeline.merge import run_merge
from pipeline_jobs import partition_rows, run_job, spark_rows, stored_objects

PARTITIONS = 4
OBJECTS = 500
BROKER_ENV = {
    # Every flush below becomes one object of its own (not an inline file: this is merge
    # of WAL objects; tests/pipeline/test_inline_pipeline.py merges inline files).
    "PRODUCE_COMMIT_INTERVAL_MS": 2,
    "PRODUCE_INLINE": False,
    # The broker's own light loop deletes the merged-away objects once marked and past
    # this grace (longer than any fetch in flight in this test).
    "FILE_DELETE_GRACE_MS": 3000,
    "RETENTION_CHECK_INTERVAL_MS": 300,
}

pytestmark = pytest.mark.timeout(300)


def value(i: int, p: int) -> bytes:
    return f"object-{i}-partition-{p}-".encode() + bytes(range(i % 50))


def produce_objects(broker: BrokerProcess, topic: str, base_ts: int) -> None:
    """OBJECTS produce requests, each one record per partition, each its own object."""
    producer = Producer(
        {"bootstrap.servers": broker.bootstrap, "linger.ms": 0, "enable.idempotence": True}
    )
    for i in range(OBJECTS):
        for p in range(PARTITIONS):
            producer.produce(
                topic, key=f"k{i}".encode(), value=value(i, p), partition=p, timestamp=base_ts + i
            )
        assert producer.flush(30) == 0


class PassReader(threading.Thread):
    """Reads the whole topic from offset 0 again and again until stopped; every pass
    must see each offset exactly once, in order, with the produced value."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        super().__init__(daemon=True)
        self.bootstrap, self.topic = bootstrap, topic
        self.stop = threading.Event()
        self.passes = 0
        self.problems: list[str] = []

    def run(self) -> None:
        try:
            consumer = Consumer(
                {
                    "bootstrap.servers": self.bootstrap,
                    "group.id": f"merge-{uuid.uuid4().hex}",
                    "enable.auto.commit": False,
                    # Small fetches: a pass takes many requests, so passes straddle the swap.
                    "message.max.bytes": 4096,
                    "fetch.max.bytes": 4096,
                    "max.partition.fetch.bytes": 1024,
                    "fetch.queue.backoff.ms": 0,
                }
            )
        except Exception as exc:
            self.problems.append(repr(exc))
            return
        try:
            while not self.stop.is_set() and not self.problems:
                self._one_pass(consumer)
                self.passes += 1
        except Exception as exc:  # surfaced by the test through `problems`
            self.problems.append(repr(exc))
        finally:
            consumer.close()

    def _one_pass(self, consumer: Consumer) -> None:
        consumer.assign([TopicPartition(self.topic, p, 0) for p in range(PARTITIONS)])
        seen: dict[int, list[int]] = {p: [] for p in range(PARTITIONS)}
        deadline = time.monotonic() + 60
        while any(len(s) < OBJECTS for s in seen.values()):
            if time.monotonic() > deadline:
                self.problems.append(
                    f"pass {self.passes} stalled: {[len(s) for s in seen.values()]}"
                )
                return
            for message in consumer.consume(500, timeout=0.5):
                if message.error() is not None:
                    self.problems.append(str(message.error()))
                    return
                p, offset = message.partition(), message.offset()
                if offset != len(seen[p]) or message.value() != value(offset, p):
                    self.problems.append(
                        f"pass {self.passes}: p{p} got offset {offset} after {len(seen[p])} records"
                    )
                    return
                seen[p].append(offset)


@pytest.fixture(scope="module")
def merged_topic(
    spark: SparkSession, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[BrokerProcess, str, int, dict[str, object]]]:
    broker = BrokerProcess(tmp_path_factory.mktemp("merge") / "data", env=BROKER_ENV, name="merge")
    broker.start()
    try:
        topic = f"merge-{uuid.uuid4().hex[:8]}"
        create_topic(broker.bootstrap, topic, PARTITIONS)
        base_ts = now_ms() - 3_600_000
        before = stored_objects(broker)
        produce_objects(broker, topic, base_ts)
        wal = {k for k in stored_objects(broker) - before if k.startswith("wal/")}
        rows_before = sum(len(r) for r in partition_rows(broker, topic, PARTITIONS))

        reader = PassReader(broker.bootstrap, topic)
        reader.start()
        wait_until(lambda: reader.passes >= 1 or reader.problems, 60, "a first full pass")
        started = time.monotonic()
        summary = run_job(broker, spark, run_merge, merge_min_age_ms=0)
        merge_s = time.monotonic() - started
        # The old objects go once the broker's cleaner passes their grace period.
        wait_until(lambda: not wal & stored_objects(broker), 30, "merged-away objects deleted")
        passes_at_merge = reader.passes
        wait_until(
            lambda: reader.passes >= passes_at_merge + 2 or reader.problems,
            60,
            "two full passes after the merge",
        )
        reader.stop.set()
        reader.join(30)
        facts = {
            "summary": summary,
            "wal": wal,
            "rows_before": rows_before,
            "reader": reader,
            "merge_s": merge_s,
            "base_ts": base_ts,
        }
        yield broker, topic, base_ts, facts
    finally:
        broker.close()


def test_merge_shrinks_objects_and_rows(
    merged_topic: tuple[BrokerProcess, str, int, dict[str, object]],
) -> None:
    broker, topic, _, facts = merged_topic
    wal = facts["wal"]
    assert isinstance(wal, set) and len(wal) >= OBJECTS  # librdkafka may split one flush
    assert facts["rows_before"] == OBJECTS * PARTITIONS
    rows = partition_rows(broker, topic, PARTITIONS)
    assert [len(r) for r in rows] == [1] * PARTITIONS  # 500 rows each became one
    assert all(r[0].object_key.startswith("seg/") for r in rows)
    assert [(r[0].base_offset, r[0].last_offset) for r in rows] == [(0, OBJECTS - 1)] * PARTITIONS
    objects = stored_objects(broker)
    assert not {k for k in objects if k.startswith("wal/")} & wal
    segments = {k for k in objects if k.startswith("seg/")}
    assert segments == {r[0].object_key for r in rows}  # OBJECTS objects became PARTITIONS
    summary = facts["summary"]
    assert summary.objects_written == PARTITIONS  # type: ignore[attr-defined]
    assert summary.details["rows before"] == OBJECTS * PARTITIONS  # type: ignore[attr-defined]
    size = sum(r[0].byte_size for r in rows)
    print(
        f"\nmerge: {len(wal)} objects, {size / 2**20:.2f} MiB in {facts['merge_s']:.2f} s "
        f"(job {summary.seconds:.2f} s): {len(wal) / summary.seconds:.0f} objects/s, "  # type: ignore[attr-defined]
        f"{size / 2**20 / summary.seconds:.2f} MiB/s"  # type: ignore[attr-defined]
    )


def test_a_consumer_reading_throughout_saw_every_record_once(
    merged_topic: tuple[BrokerProcess, str, int, dict[str, object]],
) -> None:
    reader = merged_topic[3]["reader"]
    assert isinstance(reader, PassReader)
    assert reader.problems == []
    assert reader.passes >= 3


@pytest.mark.parametrize("client", sorted(ADAPTERS))
def test_every_client_reads_the_merged_log(
    merged_topic: tuple[BrokerProcess, str, int, dict[str, object]], client: str
) -> None:
    broker, topic, base_ts, _ = merged_topic
    adapter = ADAPTERS[client](broker.bootstrap)
    got = adapter.consume(topic, PARTITIONS, OBJECTS * PARTITIONS)
    assert sorted((g.partition, g.offset) for g in got) == [
        (p, i) for p in range(PARTITIONS) for i in range(OBJECTS)
    ]
    assert all(
        isinstance(g, Got)
        and g.value == value(g.offset, g.partition)
        and g.key == f"k{g.offset}".encode()
        and g.timestamp == base_ts + g.offset
        for g in got
    )
    # By time: the exact record, though it sits deep inside one joined row.
    lookups = {p: [base_ts + 123, base_ts + OBJECTS - 1] for p in range(PARTITIONS)}
    earliest, latest, by_time = adapter.offsets(topic, PARTITIONS, lookups)
    assert earliest == dict.fromkeys(range(PARTITIONS), 0)
    assert latest == dict.fromkeys(range(PARTITIONS), OBJECTS)
    for p in range(PARTITIONS):  # (confluent-kafka reports no timestamp here)
        assert by_time[p, base_ts + 123] in ((123, base_ts + 123), (123, -1))
        assert by_time[p, base_ts + OBJECTS - 1] in (
            (OBJECTS - 1, base_ts + OBJECTS - 1),
            (OBJECTS - 1, -1),
        )


def test_spark_source_reads_the_merged_log(
    spark: SparkSession, merged_topic: tuple[BrokerProcess, str, int, dict[str, object]]
) -> None:
    """The Spark source reads a merged segment's joined rows record by record."""
    broker, topic, base_ts, _ = merged_topic
    rows = spark_rows(spark, broker, topic, "partition", "offset", "key", "value", "timestamp")
    got = sorted(
        (r.partition, r.offset, bytes(r.key), bytes(r.value), int(r.timestamp.timestamp() * 1000))
        for r in rows
    )
    assert got == [
        (p, i, f"k{i}".encode(), value(i, p), base_ts + i)
        for p in range(PARTITIONS)
        for i in range(OBJECTS)
    ]
