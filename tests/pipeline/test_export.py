"""`lakelog pipeline export`: topics to Parquet by topic and date, incremental, and safe to
re-run after a crash between the data and the state file."""

from __future__ import annotations

import datetime
import json
import shutil
import subprocess
import sys
import time
import warnings
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import duckdb
import pandas
import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.parquet as pq
import pytest
from e2e_harness import BrokerProcess, Rec, create_topic, make_records
from pipeline_clients import Row, consume, produce, produce_transactions
from pyspark.sql import SparkSession

from lakelog.config import Settings
from lakelog.pipeline.export import (
    EXPORT_SCHEMA,
    STATE_FILE,
    plan_chunks,
    read_state,
    run_export,
    unrecorded,
    upgrade_v1_files,
)

PARTITIONS = 2
MIDNIGHT = int(datetime.datetime(2026, 3, 1, tzinfo=datetime.UTC).timestamp() * 1000)


@dataclass(frozen=True)
class Topic:
    broker: BrokerProcess
    name: str

    @property
    def settings(self) -> Settings:
        backend = self.broker.backend
        return Settings(storage_url=backend.storage_url, coordinator_url=backend.coordinator_url)


@pytest.fixture
def topic(shared_broker_process: BrokerProcess) -> Iterator[Topic]:
    broker = shared_broker_process
    if not broker.alive():
        broker.kill()
        broker.start()
    name = f"export-{time.monotonic_ns()}"
    # Unlimited retention: the records carry timestamps from March 2026.
    create_topic(broker.bootstrap, name, PARTITIONS, configs={"retention.ms": "-1"})
    yield Topic(broker, name)


def _exported(spark: SparkSession, output: Path) -> list[tuple[Row, str, str]]:
    """(record, topic column, date partition) of every exported row."""
    out = []
    for r in spark.read.parquet(str(output)).collect():
        headers = tuple((h["key"], h["value"]) for h in r["headers"])
        ts = round(r["timestamp"].timestamp() * 1000)
        row = Row(r["partition"], r["offset"], r["key"], r["value"], headers, ts)
        out.append((row, r["topic"], str(r["date"])))
    return sorted(out, key=lambda t: (t[0].partition, t[0].offset))


def _utc_date(ms: int) -> str:
    return datetime.datetime.fromtimestamp(ms / 1000, datetime.UTC).date().isoformat()


def _files(output: Path) -> list[str]:
    return sorted(str(p.relative_to(output)) for p in output.rglob("*.parquet"))


def test_export_incremental_by_date_and_idempotent_after_a_crash(
    spark: SparkSession, topic: Topic, tmp_path: Path
) -> None:
    bootstrap = topic.broker.bootstrap
    output = tmp_path / "export"
    # Records that straddle midnight UTC, plus an aborted transaction that must not appear.
    first = make_records(150, PARTITIONS, MIDNIGHT - 75, tag="first")
    produce(bootstrap, topic.name, first, "zstd")
    aborted = [Rec(i % PARTITIONS, b"txn", b"aborted", (), MIDNIGHT) for i in range(8)]
    produce_transactions(bootstrap, topic.name, [(aborted, False)])

    summary = run_export(topic.settings, [topic.name], str(output), spark=spark)
    assert summary.records == len(first)
    consumed = consume(bootstrap, topic.name, PARTITIONS, len(first))
    exported = _exported(spark, output)
    assert [row for row, _, _ in exported] == consumed
    assert {t for _, t, _ in exported} == {topic.name}
    assert all(date == _utc_date(row.timestamp) for row, _, date in exported)
    assert {date for _, _, date in exported} == {"2026-02-28", "2026-03-01"}
    state = json.loads((output / STATE_FILE).read_text())
    ends = {str(p): max(r.offset for r in consumed if r.partition == p) + 1 for p in (0, 1)}
    # The aborted transaction's records and marker take offsets too: the state is past them.
    assert all(state["topics"][topic.name]["next"][p] >= ends[p] for p in ends)
    for name in _files(output):
        assert name.startswith(f"topic={topic.name}/date=2026-")
        assert Path(name).name.startswith("part-")
    saved_state = (output / STATE_FILE).read_text()

    # Incremental: the second run (through the CLI) writes only the new records.
    second = make_records(90, PARTITIONS, MIDNIGHT + 86_400_000, tag="second")
    produce(bootstrap, topic.name, second, "lz4")
    backend = topic.broker.backend
    cli = subprocess.run(
        [
            sys.executable,
            "-m",
            "lakelog",
            "pipeline",
            "export",
            topic.name,
            "--output",
            str(output),
            "--storage-url",
            backend.storage_url,
            "--coordinator-url",
            backend.coordinator_url,
            "--master",
            "local[1]",
        ],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=tmp_path,
    )
    assert cli.returncode == 0, cli.stdout + cli.stderr
    assert "records exported" in cli.stdout and "90" in cli.stdout
    everything = consume(bootstrap, topic.name, PARTITIONS, len(first) + len(second))
    assert [row for row, _, _ in _exported(spark, output)] == everything
    files_after_second = _files(output)

    # A crash after the data but before the state: the state still says "after run 1", and
    # the crashed run left a temporary file. Re-running writes the same ranges again.
    (output / STATE_FILE).write_text(saved_state)
    leftover = output / f"topic={topic.name}" / "date=2026-03-02" / "_tmp-part-0-9999-10000.parquet"
    leftover.write_bytes(b"half a file")
    again = run_export(topic.settings, [topic.name], str(output), spark=spark)
    assert again.records == len(second)
    assert not leftover.exists()
    assert _files(output) == files_after_second
    assert [row for row, _, _ in _exported(spark, output)] == everything

    # Nothing new: nothing written, nothing started.
    idle = run_export(topic.settings, [topic.name], str(output), spark=spark)
    assert (idle.records, idle.files, idle.ranges) == (0, 0, 0)
    assert _files(output) == files_after_second


def _row(
    partition: int,
    offset: int,
    key: bytes | None,
    value: bytes | None,
    headers: Iterable[dict[str, Any]],
    ts: int,
) -> Row:
    pairs = tuple((h["key"], h["value"]) for h in headers)
    return Row(int(partition), int(offset), key, value, pairs, int(ts))


def _read_with_pandas(output: Path) -> list[tuple[Row, str, str]]:
    frame = pandas.read_parquet(output)
    assert sorted(frame.columns) == sorted([*EXPORT_SCHEMA.names, "topic", "date"])
    out = []
    for r in frame.itertuples(index=False):
        ts = round(r.timestamp.timestamp() * 1000)
        row = _row(r.partition, r.offset, r.key, r.value, r.headers, ts)
        out.append((row, str(r.topic), str(r.date)))
    return sorted(out, key=lambda t: (t[0].partition, t[0].offset))


def _read_with_duckdb(output: Path) -> list[tuple[Row, str, str]]:
    source = "read_parquet('{}/**/*.parquet', hive_partitioning=true)".format(
        str(output).replace("'", "''")
    )
    with duckdb.connect() as con:
        described = con.execute(f"DESCRIBE SELECT * FROM {source}").fetchall()
        types = {name: kind for name, kind, *_ in described}
        assert (types["topic"], types["date"]) == ("VARCHAR", "DATE")
        assert sorted(types) == sorted([*EXPORT_SCHEMA.names, "topic", "date"])
        rows = con.execute(
            'SELECT "partition", "offset", key, value, headers, epoch_ms("timestamp"), topic, '
            f"CAST(date AS VARCHAR) FROM {source}"
        ).fetchall()
    out = [(_row(*r[:6]), r[6], r[7]) for r in rows]
    return sorted(out, key=lambda t: (t[0].partition, t[0].offset))


def test_export_directory_reads_in_pandas_duckdb_and_spark(
    spark: SparkSession, topic: Topic, tmp_path: Path
) -> None:
    """The whole directory, as a new user would read it: no merge error in pyarrow, no
    duplicate column in Spark or DuckDB, and topic and date from the folders."""
    bootstrap = topic.broker.bootstrap
    output = tmp_path / "export"
    records = make_records(60, PARTITIONS, MIDNIGHT - 30, tag="readers")
    produce(bootstrap, topic.name, records, "zstd")
    aborted = [Rec(i % PARTITIONS, b"txn", b"aborted", (), MIDNIGHT) for i in range(4)]
    produce_transactions(bootstrap, topic.name, [(aborted, False)])
    assert run_export(topic.settings, [topic.name], str(output), spark=spark).records == 60
    consumed = consume(bootstrap, topic.name, PARTITIONS, len(records))
    expected = [(row, topic.name, _utc_date(row.timestamp)) for row in consumed]
    assert {date for _, _, date in expected} == {"2026-02-28", "2026-03-01"}
    for name in _files(output):
        assert pq.read_schema(output / name) == EXPORT_SCHEMA  # no partition column inside

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert _read_with_pandas(output) == expected
    assert _read_with_duckdb(output) == expected
    frame = spark.read.parquet(str(output))
    types = {f.name: f.dataType.simpleString() for f in frame.schema.fields}
    assert len(frame.columns) == len(types) == len(EXPORT_SCHEMA) + 2
    assert (types["topic"], types["date"]) == ("string", "date")
    assert _exported(spark, output) == expected


def test_a_version_1_export_is_upgraded_in_place(tmp_path: Path) -> None:
    """Files written before the topic column left them lose it; a rerun after a crash
    part-way through finishes the job and rewrites nothing twice."""
    output = tmp_path / "old"
    batch = pa.table(
        {
            "partition": pa.array([0, 0], pa.int32()),
            "offset": pa.array([0, 1], pa.int64()),
            "timestamp": pa.array([MIDNIGHT * 1000] * 2, pa.timestamp("us", tz="UTC")),
            "key": pa.array([b"k", None], pa.binary()),
            "value": pa.array([b"v0", b"v1"], pa.binary()),
            "headers": pa.array(
                [[], [{"key": "h", "value": b"x"}]], EXPORT_SCHEMA.field("headers").type
            ),
        },
        schema=EXPORT_SCHEMA,
    )
    v1 = pa.table({"topic": pa.array(["t", "t"]), **{n: batch[n] for n in batch.column_names}})
    old = output / "topic=t" / "date=2026-03-01" / "part-0-0-2.parquet"
    done = output / "topic=t" / "date=2026-03-02" / "part-0-2-4.parquet"
    old.parent.mkdir(parents=True)
    done.parent.mkdir(parents=True)
    pq.write_table(v1, old)
    pq.write_table(batch, done)  # as if a crashed upgrade had already rewritten it
    (output / STATE_FILE).write_text(json.dumps({"version": 1, "topics": {}}))
    fs = pafs.LocalFileSystem()
    assert read_state(fs, str(output))["version"] == 1
    assert upgrade_v1_files(fs, str(output)) == 1
    assert pq.read_table(old) == batch
    assert upgrade_v1_files(fs, str(output)) == 0
    frame = pandas.read_parquet(output)
    assert len(frame) == 4 and set(frame["topic"].astype(str)) == {"t"}


def test_export_of_an_unknown_topic_writes_nothing(
    spark: SparkSession, topic: Topic, tmp_path: Path
) -> None:
    output = tmp_path / "export"
    with pytest.raises(ValueError, match="unknown topics: nope"):
        run_export(topic.settings, [topic.name, "nope"], str(output), spark=spark)
    assert not (output / STATE_FILE).exists()


def test_export_in_chunks_names_files_by_range(
    spark: SparkSession, topic: Topic, tmp_path: Path
) -> None:
    records = make_records(40, PARTITIONS, MIDNIGHT + 3_600_000, tag="chunks")
    offsets = produce(topic.broker.bootstrap, topic.name, records)
    output = tmp_path / "export"
    summary = run_export(
        topic.settings, [topic.name], str(output), spark=spark, max_offsets_per_file=8
    )
    assert summary.records == 40 and summary.ranges == summary.files == 6
    names = {Path(n).name for n in _files(output)}
    assert names == {
        f"part-{p}-{lo}-{hi}.parquet" for p in (0, 1) for lo, hi in plan_chunks(0, 20, 8)
    }
    assert len(_exported(spark, output)) == len(offsets)
    shutil.rmtree(output)


def test_plan_chunks_and_unrecorded_files() -> None:
    assert plan_chunks(10, 31, 10) == [(10, 20), (20, 30), (30, 31)]
    assert plan_chunks(5, 5, 10) == []
    names = [
        "out/topic=t/date=2026-03-01/part-0-0-10.parquet",
        "out/topic=t/date=2026-03-01/part-0-10-20.parquet",
        "out/topic=t/date=2026-03-02/part-0-10-20-1.parquet",
        "out/topic=t/date=2026-03-02/_tmp-part-1-4-9.parquet",
        "out/topic=t/date=2026-03-02/part-1-0-4.parquet",
        "out/topic=t/date=2026-03-02/notes.txt",
        "out/topic=t/date=2026-03-02/_tmp-part-1-5-9.parquet.tmp",
    ]
    assert unrecorded(names, {0: 10, 1: 4}) == [names[1], names[2], names[3], names[6]]
