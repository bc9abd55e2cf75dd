"""`lakelog pipeline ...` as users run it: the flags `lakelog serve` takes, a summary table,
dry runs that change nothing, and a one-line error (exit 1) instead of a traceback."""

from __future__ import annotations

import subprocess
import sys

import pytest
from e2e_fixtures import BrokerFactory
from e2e_harness import BrokerProcess, create_topic, make_records, now_ms
from pipeline_clients import produce
from pyspark.sql import SparkSession
from typer.testing import CliRunner

from lakelog.cli.common import UserError
from lakelog.pipeline.cli import pipeline_app
from pipeline_jobs import stored_objects

pytestmark = pytest.mark.timeout(300)


def flags(broker: BrokerProcess) -> list[str]:
    backend = broker.backend
    return ["--storage-url", backend.storage_url, "--coordinator-url", backend.coordinator_url]


def beginning_offsets(bootstrap: str, topic: str, partitions: int) -> list[int]:
    from kafka import KafkaConsumer, TopicPartition

    consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=None)
    try:
        tps = [TopicPartition(topic, p) for p in range(partitions)]
        found = consumer.beginning_offsets(tps)
        return [found[tp] for tp in tps]
    finally:
        consumer.close()


def test_retention_from_the_command_line(broker_factory: BrokerFactory, topic_name: str) -> None:
    """`python -m lakelog.pipeline` (spark-submit's entry point) enforces retention.ms."""
    broker = broker_factory(env={"RETENTION_CHECK_INTERVAL_MS": 3_600_000})
    create_topic(broker.bootstrap, topic_name, 2, {"retention.ms": "60000"})
    produce(broker.bootstrap, topic_name, make_records(40, 2, now_ms() - 3_600_000, "old"))
    produce(broker.bootstrap, topic_name, make_records(10, 2, now_ms(), "new"))
    command = [sys.executable, "-m", "lakelog.pipeline", "retention", *flags(broker)]

    dry = subprocess.run([*command, "--dry-run"], capture_output=True, text=True, timeout=120)
    assert dry.returncode == 0, dry.stderr
    assert "lakelog pipeline retention (dry run)" in dry.stdout
    assert beginning_offsets(broker.bootstrap, topic_name, 2) == [0, 0]

    done = subprocess.run(command, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "batches dropped" in done.stdout
    assert beginning_offsets(broker.bootstrap, topic_name, 2) == [20, 20]


def test_jobs_on_the_active_spark_session(
    shared_broker: BrokerProcess, spark: SparkSession, topic_name: str
) -> None:
    """In-process (as from a notebook), jobs use the running session and leave it running."""
    broker = shared_broker
    create_topic(broker.bootstrap, topic_name, 1)
    produce(broker.bootstrap, topic_name, make_records(10, 1, now_ms(), "cli"))
    before = stored_objects(broker)
    runner = CliRunner()

    gc = runner.invoke(pipeline_app, ["gc", "--dry-run", *flags(broker)])
    assert gc.exit_code == 0, gc.output
    assert "lakelog pipeline gc (dry run)" in gc.output
    assert "objects listed" in gc.output

    merge = runner.invoke(pipeline_app, ["merge", "--dry-run", "--min-age-ms", "0", *flags(broker)])
    assert merge.exit_code == 0, merge.output
    assert "segments planned" in merge.output
    assert stored_objects(broker) == before
    assert spark.sparkContext._jsc is not None  # still running

    refused = runner.invoke(pipeline_app, ["compact", topic_name, *flags(broker)])
    assert refused.exit_code == 1
    assert isinstance(refused.exception, UserError)  # `lakelog` prints it as one line
    assert "cleanup.policy has no compact" in str(refused.exception)


def test_bad_settings_end_with_a_message() -> None:
    command = [sys.executable, "-m", "lakelog.pipeline", "retention"]
    result = subprocess.run(
        [*command, "--coordinator-url", "mysql://nowhere/db"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 1
    assert result.stderr.startswith("error: invalid setting coordinator_url")
    assert "unsupported coordinator URL" in result.stderr
    assert "Traceback" not in result.stderr
