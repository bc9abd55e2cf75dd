"""A table topic's table as the broker's metrics and the web console show it: rows,
snapshots and lag behind the topic (records, seconds), after `lakelog pipeline tables`
ran as a real process against a real broker (embedded, or PostgreSQL + S3 with
LAKELOG_TEST_BACKEND=scaleout)."""

from __future__ import annotations

import re
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from e2e_fixtures import FAST_COMMITS, warn_tracebacks
from e2e_harness import HOST, BrokerProcess, create_topic, free_port, make_records, wait_until
from pipeline_clients import produce
from prometheus_client.parser import text_string_to_metric_families
from tables_support import MIDNIGHT, PARTITIONS, TableTopic, new_table_topic, run_job_process

DEADLINE_S = 180.0
"""The broker refreshes its gauges every 0.5 s here; generous for a loaded machine."""
FIRST = 40
MORE = 10
KEY_VALUE = {"lakelog.iceberg.mode": "key_value"}


@dataclass(frozen=True)
class Written:
    topic: TableTopic
    rows: int


@pytest.fixture(scope="module")
def status_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    proc = BrokerProcess(
        tmp_path_factory.mktemp("table-status") / "data",
        env={**FAST_COMMITS, "TABLE_STATUS_INTERVAL_MS": 500},
        metrics=True,
        name="table-status",
    )
    proc.start()
    yield proc
    proc.close()
    warn_tracebacks(proc)


@pytest.fixture(scope="module")
def written(status_broker: BrokerProcess, tmp_path_factory: pytest.TempPathFactory) -> Written:
    """A key_value table topic with FIRST records, and its table written by one run of
    the tables job."""
    topic = new_table_topic(status_broker, "status", KEY_VALUE)
    produce(topic.bootstrap, topic.name, make_records(FIRST, PARTITIONS, MIDNIGHT, tag="a"))
    run_job_process(topic, tmp_path_factory.mktemp("job"))
    return Written(topic, FIRST)


def table_gauges(broker: BrokerProcess, topic: str) -> dict[str, float]:
    """The broker's lakelog_table_* samples for `topic`, by metric name."""
    url = f"http://{HOST}:{broker.metrics_port}/metrics"
    text = urllib.request.urlopen(url, timeout=30).read().decode()
    out: dict[str, float] = {}
    for family in text_string_to_metric_families(text):
        if family.name.startswith("lakelog_table_"):
            for sample in family.samples:
                if sample.labels.get("topic") == topic:
                    out[sample.name] = sample.value
    return out


def test_the_broker_publishes_rows_snapshots_and_lag_of_a_table_topic(
    written: Written,
) -> None:
    broker, name = written.topic.broker, written.topic.name

    def caught_up() -> dict[str, float] | None:
        g = table_gauges(broker, name)
        ok = g.get("lakelog_table_rows") == FIRST and g.get("lakelog_table_lag_records") == 0
        return g if ok else None

    gauges = wait_until(caught_up, DEADLINE_S, f"gauges of {name} caught up")
    assert gauges["lakelog_table_snapshots"] >= 1
    assert gauges["lakelog_table_lag_seconds"] == 0

    produce(written.topic.bootstrap, name, make_records(MORE, PARTITIONS, MIDNIGHT + 1000, "b"))

    def lagging() -> dict[str, float] | None:
        g = table_gauges(broker, name)
        return g if g.get("lakelog_table_lag_records") == MORE else None

    gauges = wait_until(lagging, DEADLINE_S, f"gauges of {name} lagging by {MORE}")
    assert gauges["lakelog_table_rows"] == FIRST  # the table did not change
    assert gauges["lakelog_table_lag_seconds"] > 0


def test_a_table_topic_without_a_table_lags_by_the_whole_topic(
    status_broker: BrokerProcess,
) -> None:
    topic = new_table_topic(status_broker, "untabled", KEY_VALUE)
    produce(topic.bootstrap, topic.name, make_records(7, PARTITIONS, MIDNIGHT, tag="u"))

    def published() -> dict[str, float] | None:
        g = table_gauges(status_broker, topic.name)
        return g if g.get("lakelog_table_lag_records") == 7 else None

    gauges = wait_until(published, DEADLINE_S, f"gauges of {topic.name}")
    assert gauges["lakelog_table_rows"] == 0
    assert gauges["lakelog_table_snapshots"] == 0
    assert "lakelog_table_lag_seconds" not in gauges  # no commit: no age to measure


def _get(url: str) -> str:
    try:
        with urllib.request.urlopen(url, timeout=60) as response:
            return response.read().decode()
    except urllib.error.HTTPError as exc:
        return f"HTTP {exc.code}: {exc.read().decode()}"


def _table_row(page: str, table: str) -> list[str] | None:
    """The cells' text of the Table section's row for `table`, None when absent."""
    found = re.search(rf'<tr data-table="{re.escape(table)}">(.*?)</tr>', page, re.S)
    if found is None:
        return None
    return [c.strip() for c in re.findall(r"<td>(.*?)</td>", found.group(1), re.S)]


def test_the_console_shows_the_table_section_and_marks_table_topics(
    written: Written, tmp_path: Path
) -> None:
    topic = written.topic
    plain = f"plain-{time.monotonic_ns()}"
    port = free_port()
    url = f"http://{HOST}:{port}"
    log = (tmp_path / "console.log").open("wb")
    console = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "lakelog",
            "console",
            "-b",
            topic.bootstrap,
            "--listen",
            f"{HOST}:{port}",
            "--interval-seconds",
            "1",
            "--metrics",
            f"{HOST}:{topic.broker.metrics_port}",
        ],
        stdin=subprocess.DEVNULL,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    log.close()
    try:
        page_url = f"{url}/topics/{topic.name}"

        def shown() -> str | None:
            if console.poll() is not None:
                raise AssertionError((tmp_path / "console.log").read_text())
            try:
                page = _get(page_url)
            except OSError:
                return None
            cells = _table_row(page, f"lakelog.{topic.name}")
            return page if cells is not None and cells[3] == str(written.rows) else None

        page = wait_until(shown, DEADLINE_S, f"the Table section of {page_url}", interval=0.5)
        assert '<section data-live id="table">' in page
        cells = _table_row(page, f"lakelog.{topic.name}")
        assert cells is not None
        table, mode, snapshots, _, lag_records, lag_seconds = cells
        assert (table, mode) == (f"lakelog.{topic.name}", "key_value")
        assert int(snapshots) >= 1
        assert int(lag_records.replace(",", "")) >= 0
        assert float(lag_seconds.replace(",", "")) >= 0
        listing = _get(f"{url}/topics")
        row = listing.split(f'data-topic="{topic.name}"', 1)[1].split("</tr>", 1)[0]
        assert "data-table-topic" in row
        # A plain topic has no Table section and no mark.
        create_topic(topic.bootstrap, plain, 1)
        assert 'id="table"' not in _get(f"{url}/topics/{plain}")
        listing = _get(f"{url}/topics")
        row = listing.split(f'data-topic="{plain}"', 1)[1].split("</tr>", 1)[0]
        assert "data-table-topic" not in row
    finally:
        console.terminate()
        try:
            console.wait(20)
        except subprocess.TimeoutExpired:
            console.kill()
            console.wait(10)
