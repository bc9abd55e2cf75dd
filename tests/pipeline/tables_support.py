"""Helpers of the table topic tests: topics with table configs on the shared broker, the
tables job as a real process (optionally paused at a named step, for the kill tests), and
reading a table back with pyiceberg and pandas."""

from __future__ import annotations

import datetime
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd
from e2e_harness import BrokerProcess, create_topic
from pipeline_clients import Row

from lakelog.config import Settings
from lakelog.tables.catalog import DLQ_NAMESPACE, NAMESPACE, open_catalog

PARTITIONS = 2
MIDNIGHT = int(datetime.datetime(2026, 3, 1, tzinfo=datetime.UTC).timestamp() * 1000)
JOB_TIMEOUT_S = 600.0


@dataclass(frozen=True)
class TableTopic:
    broker: BrokerProcess
    name: str

    @property
    def settings(self) -> Settings:
        backend = self.broker.backend
        return Settings(
            data_dir=self.broker.data_dir,
            storage_url=backend.storage_url,
            coordinator_url=backend.coordinator_url,
        )

    @property
    def bootstrap(self) -> str:
        return self.broker.bootstrap


def new_table_topic(broker: BrokerProcess, prefix: str, configs: Mapping[str, str]) -> TableTopic:
    if not broker.alive():
        broker.kill()
        broker.start()
    name = f"{prefix}-{time.monotonic_ns()}"
    # Unlimited retention: the records carry timestamps from March 2026.
    create_topic(broker.bootstrap, name, PARTITIONS, configs={"retention.ms": "-1", **configs})
    return TableTopic(broker, name)


def job_command(topic: TableTopic, *extra: str) -> list[str]:
    backend = topic.broker.backend
    return [
        sys.executable,
        "-m",
        "lakelog",
        "pipeline",
        "tables",
        topic.name,
        "--storage-url",
        backend.storage_url,
        "--coordinator-url",
        backend.coordinator_url,
        "--master",
        "local[2]",
        *extra,
    ]


def run_job_process(topic: TableTopic, cwd: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    """`lakelog pipeline tables` as a real process; fails the test unless it succeeds."""
    done = subprocess.run(
        job_command(topic, *extra),
        capture_output=True,
        text=True,
        timeout=JOB_TIMEOUT_S,
        cwd=cwd,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return done


def kill_job_at(topic: TableTopic, step: str, cwd: Path) -> None:
    """Start the job paused at `step` (its fault hook), wait until it gets there, then
    SIGKILL it with its whole process group (Spark's JVM and Python workers included)."""
    marker = cwd / f"paused-{step}-{time.monotonic_ns()}"
    env = {**os.environ, "LAKELOG_TABLES_PAUSE_AT": f"{step}:{marker}"}
    log = (cwd / f"job-{step}.log").open("w")
    process = subprocess.Popen(
        job_command(topic),
        cwd=cwd,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    deadline = time.monotonic() + JOB_TIMEOUT_S
    try:
        while not marker.exists():
            assert process.poll() is None, (
                f"the job ended before {step}: " + (cwd / f"job-{step}.log").read_text()
            )
            assert time.monotonic() < deadline, f"the job never reached {step}"
            time.sleep(0.2)
    finally:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait(timeout=60)
        log.close()


def read_table(topic: TableTopic, namespace: str = NAMESPACE) -> pd.DataFrame:
    """The table as pandas, through pyiceberg and the catalog the job commits to."""
    catalog = open_catalog(topic.settings)
    return catalog.load_table((namespace, topic.name)).scan().to_pandas()


def read_dlq(topic: TableTopic) -> pd.DataFrame:
    return read_table(topic, DLQ_NAMESPACE)


def key_value_rows(frame: pd.DataFrame) -> list[Row]:
    """key_value rows as `Row`s (what a consumer reads), sorted by (partition, offset)."""
    out = []
    for r in frame.itertuples(index=False):
        given = r.headers if r.headers is not None else ()
        headers = tuple((h["key"], h["value"]) for h in given)
        ts = round(r.timestamp.timestamp() * 1000)
        out.append(Row(int(r.partition), int(r.offset), r.key, r.value, headers, ts))
    return sorted(out, key=lambda row: (row.partition, row.offset))


def table_files(topic: TableTopic) -> set[str]:
    """Every object under tables/ of the topic's store (both its tables)."""
    backend = topic.broker.backend
    return {k for k in backend.list_keys("tables/") if f"/{topic.name}/" in f"/{k}"}


def referenced_files(topic: TableTopic, namespaces: Sequence[str] = (NAMESPACE,)) -> set[str]:
    """Files the topic's tables reference (data, manifests, manifest lists, metadata), as
    keys relative to the store's root."""
    from lakelog.pipeline.tables_gc import referenced_paths

    catalog = open_catalog(topic.settings)
    out: set[str] = set()
    for namespace in namespaces:
        table = catalog.load_table((namespace, topic.name))
        out |= referenced_paths(table)
    root = topic.settings.resolved_storage_url.split("?")[0].rstrip("/")
    return {p.removeprefix(root + "/") for p in out if p.startswith(root)}


def summary_offsets(topic: TableTopic) -> dict[str, Any]:
    catalog = open_catalog(topic.settings)
    table = catalog.load_table((NAMESPACE, topic.name))
    snapshot = table.current_snapshot()
    assert snapshot is not None
    return json.loads(snapshot.summary["lakelog.next-offsets"])
