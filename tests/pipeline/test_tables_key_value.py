"""`lakelog pipeline tables` in key_value mode, end to end on the test's backend (embedded,
or PostgreSQL + S3 with LAKELOG_TEST_BACKEND=scaleout): real clients produce (a
transaction aborted among them), the job runs as a real process, and the table read back
with pyiceberg and pandas holds exactly the committed records."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from e2e_harness import BrokerProcess, Rec, make_records
from pipeline_clients import consume, produce, produce_transactions
from pyiceberg.exceptions import NoSuchTableError
from tables_support import (
    JOB_TIMEOUT_S,
    MIDNIGHT,
    PARTITIONS,
    TableTopic,
    job_command,
    key_value_rows,
    new_table_topic,
    read_table,
    run_job_process,
    summary_offsets,
)


@pytest.fixture
def topic(shared_broker_process: BrokerProcess) -> Iterator[TableTopic]:
    yield new_table_topic(shared_broker_process, "kv", {"lakelog.iceberg.mode": "key_value"})


def test_key_value_table_holds_exactly_the_committed_records(
    topic: TableTopic, tmp_path: Path
) -> None:
    first = make_records(120, PARTITIONS, MIDNIGHT - 60, tag="first")
    produce(topic.bootstrap, topic.name, first, "zstd")
    aborted = [Rec(i % PARTITIONS, b"txn", b"aborted", (), MIDNIGHT) for i in range(6)]
    committed = [Rec(i % PARTITIONS, b"txn", b"committed", (), MIDNIGHT + 5) for i in range(4)]
    produce_transactions(topic.bootstrap, topic.name, [(aborted, False), (committed, True)])

    done = run_job_process(topic, tmp_path)
    assert "rows written" in done.stdout
    expected = consume(topic.bootstrap, topic.name, PARTITIONS, len(first) + len(committed))
    frame = read_table(topic)
    assert key_value_rows(frame) == expected
    assert b"aborted" not in set(frame["value"])
    assert set(frame["timestamp_type"]) == {"CreateTime"}
    # The transactional producer's records carry its producer id and epoch; the plain
    # (non-idempotent) producer's have none.
    txn = frame[frame["value"] == b"committed"]
    assert len(txn) == len(committed) and txn["producer_id"].nunique() == 1
    assert (txn["producer_id"] >= 0).all() and (txn["producer_epoch"] >= 0).all()
    assert frame[frame["value"] != b"committed"]["producer_id"].isna().all()
    offsets = summary_offsets(topic)
    ends = {str(p): max(r.offset for r in expected if r.partition == p) + 1 for p in (0, 1)}
    # The commit markers take offsets too: the recorded next offsets are past them.
    assert all(offsets["next"][p] >= ends[p] for p in ends)

    # `lakelog topics describe` shows the table, its rows and no lag.
    backend = topic.broker.backend
    described = subprocess.run(
        [
            sys.executable,
            "-m",
            "lakelog",
            "topics",
            "describe",
            topic.name,
            "-b",
            topic.bootstrap,
            "--storage-url",
            backend.storage_url,
            "--coordinator-url",
            backend.coordinator_url,
        ],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
    )
    assert described.returncode == 0, described.stderr
    assert f"Table: lakelog.{topic.name}\tSnapshots: 1\tRows: {len(expected)}\t" in (
        described.stdout
    )
    assert "LagRecords: 0\tLagSeconds: 0" in described.stdout

    # Incremental: a second pass writes only what is new.
    second = make_records(30, PARTITIONS, MIDNIGHT + 86_400_000, tag="second")
    produce(topic.bootstrap, topic.name, second)
    run_job_process(topic, tmp_path)
    everything = consume(topic.bootstrap, topic.name, PARTITIONS, len(expected) + len(second))
    assert key_value_rows(read_table(topic)) == everything


def test_every_keeps_writing_what_is_new(topic: TableTopic, tmp_path: Path) -> None:
    """`--every` runs a pass, waits, runs the next: records produced while it runs reach
    the table without another start."""
    first = make_records(20, PARTITIONS, MIDNIGHT, tag="every-1")
    produce(topic.bootstrap, topic.name, first)
    log = (tmp_path / "every.log").open("w")
    process = subprocess.Popen(
        job_command(topic, "--every", "1"),
        cwd=tmp_path,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        wait_for_rows(topic, process, len(first))
        second = make_records(15, PARTITIONS, MIDNIGHT + 1000, tag="every-2")
        produce(topic.bootstrap, topic.name, second)
        wait_for_rows(topic, process, len(first) + len(second))
    finally:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait(timeout=60)
        log.close()
    expected = consume(topic.bootstrap, topic.name, PARTITIONS, len(first) + len(second))
    assert key_value_rows(read_table(topic)) == expected
    assert "rows written" in (tmp_path / "every.log").read_text()  # a pass before the last


def wait_for_rows(topic: TableTopic, process: subprocess.Popen[bytes], rows: int) -> None:
    deadline = time.monotonic() + JOB_TIMEOUT_S
    while True:
        assert process.poll() is None, "the job stopped"
        try:
            if len(read_table(topic)) >= rows:
                return
        except NoSuchTableError:
            pass  # the first pass has not created it yet
        assert time.monotonic() < deadline, f"the table never reached {rows} rows"
        time.sleep(1)
