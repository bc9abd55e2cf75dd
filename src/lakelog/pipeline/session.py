"""The Spark session the pipeline jobs run on: local mode on this machine by default, any
cluster through `--master` or spark-submit.

PySpark is imported here and only here among the job modules' import paths, lazily, so the
broker and the rest of the CLI never load it."""

from __future__ import annotations

import os
import re
import sys
from typing import TYPE_CHECKING

from lakelog.pipeline import spark_quiet

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

DEFAULT_MASTER = "local[*]"
_MASTER = re.compile(
    r"local(\[(\*|[1-9]\d*)(,\s*[1-9]\d*)?\])?"
    r"|local-cluster\[\d+,\s*\d+,\s*\d+\]"
    r"|yarn"
    r"|(spark|k8s|mesos)://\S+"
)
MASTER_FORMS = (
    "local, local[N], local[*], local[N,M], spark://HOST:PORT, yarn, k8s://..., mesos://..."
)


def check_master(master: str | None) -> None:
    """ValueError unless `master` is a Spark master URL Spark accepts (None: the default),
    so a typo ends before a JVM starts."""
    if master is not None and not _MASTER.fullmatch(master.strip()):
        raise ValueError(f"unknown Spark master {master!r}: use {MASTER_FORMS}")


def resolve_master(master: str | None) -> str | None:
    """The master to set on the builder: the given one; else local[*], except under
    spark-submit (None: keep spark-submit's)."""
    if master:
        return master
    from lakelog.spark.session_start import under_spark_submit

    return None if under_spark_submit() else DEFAULT_MASTER


def build_session(master: str | None = None, app_name: str = "lakelog-pipeline") -> SparkSession:
    """A SparkSession for a job (or the existing one, which `getOrCreate` returns).

    Loopback and no UI in local mode: a laptop or CI box needs no network setup and no
    port; executors run this interpreter, so they import the same lakelog. The session
    starts through `lakelog.spark.get_or_create`, which makes it start faster. Spark's
    own logging is errors only unless `lakelog --debug` (`spark_quiet`)."""
    resolved = resolve_master(master)
    local = resolved is None or resolved.startswith("local")
    if local:
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
        os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    builder = SparkSession.builder.appName(app_name)
    if resolved is not None:
        builder = builder.master(resolved)
    builder = (
        builder.config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "8")
        .config("spark.sql.execution.arrow.pyspark.enabled", "true")
    )
    if local:
        builder = builder.config("spark.driver.bindAddress", "127.0.0.1").config(
            "spark.driver.host", "127.0.0.1"
        )
    from pyspark import SparkContext

    from lakelog.spark.session_start import get_or_create, under_spark_submit

    if under_spark_submit() or SparkContext._gateway is not None:
        session = get_or_create(builder)  # the JVM is started: its log set-up stays
    else:
        own = str(getattr(builder, "_options", {}).get(spark_quiet.JAVA_OPTIONS_KEY, ""))
        builder = builder.config(spark_quiet.JAVA_OPTIONS_KEY, spark_quiet.java_options(own))
        with spark_quiet.jvm_stderr_filtered():
            session = get_or_create(builder)
    session.sparkContext.setLogLevel("WARN" if spark_quiet.verbose else "ERROR")
    return session
