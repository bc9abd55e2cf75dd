"""A `cleanup.policy=compact` table topic keeps one row per key: each pass upserts the
latest record of every key it read, and a tombstone (null value) deletes the key's row.

The records carry the current time: the broker compacts the topic meanwhile, and drops
tombstones older than delete.retention.ms (a day) as Kafka does, so a tombstone from the
past could vanish before the job reads it (as it would for any consumer that late)."""

from __future__ import annotations

import time

from e2e_harness import BrokerProcess, Rec
from pipeline_clients import consume, produce
from pyspark.sql import SparkSession
from tables_support import PARTITIONS, new_table_topic, read_table

from lakelog.pipeline.tables import run_tables
from pipeline_jobs import run_job


def test_compacted_topic_table_holds_the_latest_value_per_key(
    shared_broker_process: BrokerProcess, spark: SparkSession
) -> None:
    topic = new_table_topic(
        shared_broker_process,
        "latest",
        {"lakelog.iceberg.mode": "key_value", "cleanup.policy": "compact"},
    )

    now = int(time.time() * 1000)

    def versions(version: int, keys: range) -> list[Rec]:
        return [
            Rec(k % PARTITIONS, f"key-{k}".encode(), f"v{version}-{k}".encode(), (), now)
            for k in keys
        ]

    def latest() -> dict[bytes, bytes]:
        rows = consume(topic.bootstrap, topic.name, PARTITIONS, 1)
        out: dict[bytes, bytes | None] = {}
        for row in sorted(rows, key=lambda r: r.offset):
            assert row.key is not None
            out[row.key] = row.value
        return {k: v for k, v in out.items() if v is not None}

    def table() -> dict[bytes, bytes]:
        frame = read_table(topic)
        assert len(frame) == len(set(frame["key"])), "more than one row for a key"
        return dict(zip(frame["key"], frame["value"], strict=True))

    produce(topic.bootstrap, topic.name, versions(1, range(10)) + versions(2, range(0, 10, 2)))
    run_job(topic.broker, spark, lambda ctx: run_tables(ctx, [topic.name]))
    assert table() == latest()
    assert table()[b"key-2"] == b"v2-2" and table()[b"key-3"] == b"v1-3"

    tombstone = Rec(1, b"key-3", None, (), now)
    produce(topic.bootstrap, topic.name, [*versions(3, range(5, 12)), tombstone])
    run_job(topic.broker, spark, lambda ctx: run_tables(ctx, [topic.name]))
    assert table() == latest()
    assert b"key-3" not in table() and table()[b"key-11"] == b"v3-11"
    assert len(table()) == 11
