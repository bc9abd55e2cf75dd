"""A pipeline job that starts Spark prints its summary and nothing of Spark's or the JVM's
start-up (log4j banners, WARN lines, the incubator-module warning); `lakelog --debug`
brings them back."""

from __future__ import annotations

import subprocess
import sys

import pytest
from e2e_fixtures import BrokerFactory
from e2e_harness import BrokerProcess, create_topic, make_records, now_ms
from pipeline_clients import produce

pytestmark = pytest.mark.timeout(400)

NOISE = (
    "log4j",
    "WARN",
    "NativeCodeLoader",
    "Using incubator modules",
    "Setting default log level",
    "setLogLevel",
)


def _merge(broker: BrokerProcess, *before: str) -> subprocess.CompletedProcess[str]:
    """`lakelog [BEFORE] pipeline merge` on everything written so far: Spark starts."""
    backend = broker.backend
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "lakelog",
            *before,
            "pipeline",
            "merge",
            "--min-age-ms",
            "0",
            "--storage-url",
            backend.storage_url,
            "--coordinator-url",
            backend.coordinator_url,
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_a_job_prints_its_summary_and_no_spark_noise(
    broker_factory: BrokerFactory, topic_name: str
) -> None:
    broker = broker_factory()
    create_topic(broker.bootstrap, topic_name, 2)
    produce(broker.bootstrap, topic_name, make_records(20, 2, now_ms(), "a"))

    quiet = _merge(broker)
    assert quiet.returncode == 0, quiet.stderr
    assert "lakelog pipeline merge" in quiet.stdout
    assert "not started" not in quiet.stdout, quiet.stdout  # Spark did start
    noisy = [line for line in quiet.stderr.splitlines() if any(n in line for n in NOISE)]
    assert not noisy, quiet.stderr
    assert quiet.stderr.strip() == "", quiet.stderr

    produce(broker.bootstrap, topic_name, make_records(20, 2, now_ms(), "b"))
    loud = _merge(broker, "--debug")
    assert loud.returncode == 0, loud.stderr
    assert "not started" not in loud.stdout, loud.stdout
    assert "log4j" in loud.stderr or "WARN" in loud.stderr, loud.stderr
