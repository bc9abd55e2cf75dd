"""Starting a SparkSession that reads lakelog or runs its pipeline jobs, faster than
`builder.getOrCreate()`: `get_or_create` (re-exported by `lakelog.spark`). Used by the
pipeline's session too, so it lives below both."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from lakelog.spark import jvm_cache, python_launcher

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

SPARK_CONF = {"spark.python.daemon.module": "lakelog.pipeline.spark_daemon"}
"""Confs for a session that reads lakelog or runs its pipeline jobs, set before it starts:
Spark's task workers then import the installed pyspark, not its zipped sources."""


def get_or_create(builder: SparkSession.Builder) -> SparkSession:
    """`builder.getOrCreate()` with `SPARK_CONF`, the JVM class archive (`jvm_cache`) and,
    on a local master set on `builder`, Python workers started through `python_launcher`
    (`PYSPARK_PYTHON` names it while the session starts: Spark reads that variable, not a
    conf, for its planning processes). A session (or JVM) already running in this process
    is returned as it is, and so is the JVM spark-submit started: only `SPARK_CONF` applies
    there."""
    builder = builder.config(map=SPARK_CONF)
    if under_spark_submit():
        return builder.getOrCreate()
    python = _local_worker_python(builder)
    if python is None:
        return jvm_cache.get_or_create(builder)
    before = os.environ.get("PYSPARK_PYTHON")
    os.environ["PYSPARK_PYTHON"] = str(python)
    try:
        return jvm_cache.get_or_create(builder)
    finally:
        if before is None:
            os.environ.pop("PYSPARK_PYTHON", None)
        else:
            os.environ["PYSPARK_PYTHON"] = before


def under_spark_submit() -> bool:
    """True when spark-submit started this process (it launched the JVM first and tells
    PySpark where its gateway is); then spark-submit's --master and JVM options apply."""
    return "PYSPARK_GATEWAY_PORT" in os.environ


def _local_worker_python(builder: SparkSession.Builder) -> Path | None:
    """The launcher, when a new session's workers will run on this machine with this
    interpreter: no JVM yet, a local master, and no other Python chosen for them."""
    from pyspark import SparkContext

    options = getattr(builder, "_options", {})
    if SparkContext._gateway is not None or "spark.pyspark.python" in options:
        return None
    if not str(options.get("spark.master", "")).startswith("local"):
        return None
    chosen = os.environ.get("PYSPARK_PYTHON")
    if chosen and os.path.realpath(chosen) != os.path.realpath(sys.executable):
        return None
    return python_launcher.launcher()
