"""The pipeline over rows that hold producers' runs (a WAL row's batches carry the
producer's base offsets, garbage here; their real offsets follow the row's): the Spark
source reads them record by record, merge rewrites them into segments with real offsets
that every offset still fetches exactly from, and compaction keeps each key's latest
record inside them."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest
from e2e_harness import BrokerProcess, create_topic, now_ms
from e2e_wire import WireClient
from pyspark.sql import SparkSession
from test_produce_consume import ADAPTERS
from test_run_rows import RUNS, Stored, assert_runs, check_batches, fetch_batches, produce_burst

from lakelog.pipeline.compact import run_compact
from lakelog.pipeline.merge import run_merge
from pipeline_jobs import partition_rows, run_job, spark_rows

pytestmark = pytest.mark.timeout(300)

ENV = {**RUNS, "FILE_DELETE_GRACE_MS": 3000, "RETENTION_CHECK_INTERVAL_MS": 300}


@pytest.fixture
def runs_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    broker = BrokerProcess(tmp_path_factory.mktemp("runs") / "data", env=ENV, name="runs")
    broker.start()
    try:
        yield broker
    finally:
        broker.close()


def spark_read(spark: SparkSession, broker: BrokerProcess, topic: str) -> list[tuple]:
    rows = spark_rows(spark, broker, topic, "partition", "offset", "value", "timestamp")
    return sorted(
        (r.partition, r.offset, bytes(r.value), int(r.timestamp.timestamp() * 1000)) for r in rows
    )


def expected(log: dict[int, list[Stored]]) -> list[tuple]:
    return [(p, s.offset, s.value, s.timestamp) for p, stored in log.items() for s in stored]


def test_spark_and_merge_read_runs(spark: SparkSession, runs_broker: BrokerProcess) -> None:
    topic = f"runs-{uuid.uuid4().hex[:8]}"
    create_topic(runs_broker.bootstrap, topic, partitions=2)
    log = produce_burst(runs_broker, topic, 2, 120, now_ms() - 600_000)
    assert_runs(runs_broker, topic, log[0])
    assert spark_read(spark, runs_broker, topic) == expected(log)

    summary = run_job(runs_broker, spark, run_merge, merge_min_age_ms=0)
    assert summary.batches_moved > 0
    rows = partition_rows(runs_broker, topic, 2)
    assert all(c.object_key.startswith("seg/") for part in rows for c in part)
    with WireClient(runs_broker.port, timeout=30) as client:
        for p, stored in log.items():
            for offset in range(len(stored)):
                check_batches(fetch_batches(client, topic, p, offset, 1 << 20), stored, offset)
    assert spark_read(spark, runs_broker, topic) == expected(log)


def test_compaction_inside_runs(spark: SparkSession, runs_broker: BrokerProcess) -> None:
    topic = f"runs-compact-{uuid.uuid4().hex[:8]}"
    create_topic(runs_broker.bootstrap, topic, partitions=1, configs={"cleanup.policy": "compact"})
    # Two objects: the first one's rows are compacted, the second's last row is not.
    log = produce_burst(runs_broker, topic, 1, 60, now_ms() - 600_000, keys=7)
    log = produce_burst(runs_broker, topic, 1, 30, now_ms() - 500_000, keys=7, log=log)
    [stored] = log.values()
    assert_runs(runs_broker, topic, stored)
    [before] = partition_rows(runs_broker, topic, 1)
    last = before[-1]  # the partition's last row is never compacted (an active segment)

    run_job(runs_broker, spark, lambda ctx: run_compact(ctx, [topic]))
    latest = {s.key: s.offset for s in stored}
    kept = [
        (s.offset, s.key, s.value)
        for s in stored
        if latest[s.key] == s.offset or s.offset >= last.base_offset
    ]
    assert len(kept) < len(stored)
    got = ADAPTERS["confluent-kafka"](runs_broker.bootstrap).consume(topic, 1, len(kept))
    assert sorted((g.offset, g.key, g.value) for g in got) == kept
