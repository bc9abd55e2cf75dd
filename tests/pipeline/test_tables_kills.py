"""The tables job SIGKILLed at each step of a pass (its files written, its commit half
done, its commit done), then run again: the table holds every committed record exactly
once, and `lakelog pipeline gc --orphan-grace-ms 0` leaves no file under tables/ that the
table does not reference. Runs on the test's backend (embedded, or PostgreSQL + S3)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from e2e_harness import BrokerProcess, Rec, make_records
from pipeline_clients import consume, produce, produce_transactions
from pyspark.sql import SparkSession
from tables_support import (
    JOB_TIMEOUT_S,
    MIDNIGHT,
    PARTITIONS,
    key_value_rows,
    kill_job_at,
    new_table_topic,
    read_table,
    referenced_files,
    table_files,
)

from lakelog.pipeline.tables import run_tables
from pipeline_jobs import run_job


def test_killed_at_every_step_then_rerun_gives_each_record_once(
    broker: BrokerProcess, spark: SparkSession, tmp_path: Path
) -> None:
    topic = new_table_topic(broker, "kills", {"lakelog.iceberg.mode": "key_value"})
    expected = 0
    orphans_seen = False
    for round_number, step in enumerate(("written", "committing", "committed")):
        records = make_records(40, PARTITIONS, MIDNIGHT + round_number * 1000, tag=step)
        produce(topic.bootstrap, topic.name, records)
        aborted = [Rec(i % PARTITIONS, b"txn", step.encode(), (), MIDNIGHT) for i in range(3)]
        produce_transactions(topic.bootstrap, topic.name, [(aborted, False)])
        expected += len(records)

        kill_job_at(topic, step, tmp_path)
        if step != "committed":
            orphans_seen |= bool(table_files(topic) - referenced_files(topic))
        summary = run_job(broker, spark, lambda ctx: run_tables(ctx, [topic.name]))
        rows = key_value_rows(read_table(topic))
        assert rows == consume(topic.bootstrap, topic.name, PARTITIONS, expected), step
        assert len({(r.partition, r.offset) for r in rows}) == len(rows) == expected
        # Killed after its commit, the pass had nothing left for the rerun.
        assert (summary.rows_written == 0) == (step == "committed"), step  # type: ignore[attr-defined]

    assert orphans_seen, "the killed runs left no file for gc to collect"
    backend = broker.backend
    gc = subprocess.run(
        [
            sys.executable,
            "-m",
            "lakelog",
            "pipeline",
            "gc",
            "--orphan-grace-ms",
            "0",
            "--storage-url",
            backend.storage_url,
            "--coordinator-url",
            backend.coordinator_url,
            "--master",
            "local[2]",
        ],
        capture_output=True,
        text=True,
        timeout=JOB_TIMEOUT_S,
        cwd=tmp_path,
    )
    assert gc.returncode == 0, gc.stdout + gc.stderr
    assert "table orphans deleted" in gc.stdout
    assert table_files(topic) == referenced_files(topic)
    assert len(key_value_rows(read_table(topic))) == expected
