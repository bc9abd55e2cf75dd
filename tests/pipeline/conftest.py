"""Pipeline tests: local Spark plus the e2e broker fixtures (helpers live in tests/e2e).

`spark` is module-scoped: a module's tests share one local[2] session (the first start of
the JVM costs ~9 s; later modules reuse the JVM and start a new session in ~1-2 s), and
stopping it between modules keeps one module's settings from leaking into the next.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

_E2E = str(Path(__file__).resolve().parent.parent / "e2e")
if _E2E not in sys.path:
    sys.path.insert(0, _E2E)

from e2e_fixtures import (  # noqa: E402
    broker,
    broker_factory,
    pytest_configure,
    pytest_runtest_makereport,
    shared_broker,
    shared_broker_process,
    topic_name,
)

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = [
    "broker",
    "broker_factory",
    "pytest_configure",
    "pytest_runtest_makereport",
    "shared_broker",
    "shared_broker_process",
    "spark",
    "topic_name",
]

SPARK_CONF = {
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.sql.shuffle.partitions": "2",
    "spark.sql.session.timeZone": "UTC",
    "spark.driver.memory": "1g",
    # Python workers are reused across tasks: each costs ~1 s to start on this machine.
    "spark.python.worker.reuse": "true",
}


@pytest.fixture(scope="module")
def spark() -> Iterator[SparkSession]:
    """A local[2] SparkSession for one test module, with the lakelog source registered."""
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    from lakelog.spark import SPARK_CONF, register

    builder = SparkSession.builder.master("local[2]").appName("lakelog-tests")
    builder = builder.config(map=SPARK_CONF)
    for key, value in SPARK_CONF.items():
        builder = builder.config(key, value)
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel("ERROR")
    register(session)
    try:
        yield session
    finally:
        session.stop()
