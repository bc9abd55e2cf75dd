"""`lakelog pipeline tables --maintain` end to end on the test's backend: after passes that
each left small files, maintenance rewrites them into fewer files holding the same rows,
keeps the table's resume point (the next pass writes only what is new, no duplicate), and
deletes a stray file under the table's location once it is past the grace."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from e2e_harness import BrokerProcess, make_records
from pipeline_clients import consume, produce
from tables_support import (
    MIDNIGHT,
    PARTITIONS,
    TableTopic,
    key_value_rows,
    new_table_topic,
    read_table,
    run_job_process,
)

from lakelog.tables.catalog import NAMESPACE, open_catalog


@pytest.fixture
def topic(shared_broker_process: BrokerProcess) -> TableTopic:
    return new_table_topic(shared_broker_process, "maint", {"lakelog.iceberg.mode": "key_value"})


def data_files(topic: TableTopic) -> int:
    table = open_catalog(topic.settings).load_table((NAMESPACE, topic.name))
    return sum(1 for _ in table.scan().plan_files())


def test_maintain_rewrites_small_files_and_keeps_the_resume_point(
    topic: TableTopic, tmp_path: Path
) -> None:
    total = 0
    for round_ in range(2):  # two passes on the same day: two small files per partition
        records = make_records(40, PARTITIONS, MIDNIGHT + round_ * 1000, tag=f"r{round_}")
        produce(topic.bootstrap, topic.name, records)
        total += len(records)
        run_job_process(topic, tmp_path)
    before = data_files(topic)
    assert before >= 2 * PARTITIONS

    done = run_job_process(topic, tmp_path, "--maintain", "--json")
    figures = json.loads(done.stdout[done.stdout.index("{") :])
    assert figures["job"] == "tables-maintain"
    assert figures["figures"]["files_rewritten"] == str(before), done.stdout
    assert figures["figures"]["rows_rewritten"] == str(total), done.stdout
    assert data_files(topic) < before
    expected = consume(topic.bootstrap, topic.name, PARTITIONS, total)
    assert key_value_rows(read_table(topic)) == expected

    # The rewrite kept the resume point: the next pass adds only the new records.
    more = make_records(10, PARTITIONS, MIDNIGHT + 5000, tag="after")
    produce(topic.bootstrap, topic.name, more)
    run_job_process(topic, tmp_path)
    everything = consume(topic.bootstrap, topic.name, PARTITIONS, total + len(more))
    assert key_value_rows(read_table(topic)) == everything


def test_maintain_with_every_is_refused_in_one_line(topic: TableTopic, tmp_path: Path) -> None:
    import subprocess

    from tables_support import job_command

    done = subprocess.run(
        job_command(topic, "--maintain", "--every", "5"),
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
    )
    assert done.returncode != 0
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "--maintain" in lines[0], done.stderr
