"""Lakelog's Spark data source: read topics straight from object storage.

    from lakelog.spark import register
    register(spark)  # once per SparkSession
    df = (spark.read.format("lakelog")
          .option("lakelog.data.dir", "./lakelog-data")  # or lakelog.storage.url +
          .option("subscribe", "orders")                 #    lakelog.coordinator.url
          .load())

Options and columns follow Spark's Kafka source (see `lakelog.spark.options`); the same
works with `spark.readStream`. `register` makes the short name "lakelog" known to the
session; `spark.dataSource.register(LakelogDataSource)` is the same thing. `warm_up`
starts Spark's Python workers for the source ahead of the first read.

`get_or_create(builder)` in place of `builder.getOrCreate()` starts the session faster: the
driver JVM maps a class archive (`jvm_cache`) and Python workers import pyspark's compiled
modules, not the zipped sources Spark puts on their path (`SPARK_CONF` with
`lakelog.pipeline.spark_daemon` for task workers; on local masters `python_launcher` for all).
"""

from __future__ import annotations

import contextlib
import os
import sys
import threading
from pathlib import Path
from typing import TYPE_CHECKING

from lakelog.spark import jvm_cache, python_launcher
from lakelog.spark.source import SCHEMA, LakelogDataSource, WarmUpSource

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = [
    "SCHEMA",
    "SPARK_CONF",
    "LakelogDataSource",
    "get_or_create",
    "register",
    "under_spark_submit",
    "warm_up",
]

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


def register(spark: SparkSession) -> None:
    """Make `format("lakelog")` available in this session (readers and streams)."""
    spark.dataSource.register(LakelogDataSource)


def warm_up(spark: SparkSession, *, background: bool = False) -> threading.Thread | None:
    """Start Spark's Python workers now, so the first read or pipeline job does not pay.

    On a fresh local[2] session the first `format("lakelog")` read and the first pipeline
    job wait for Spark to start its Python processes (one per planning step, and the task
    workers, which import lakelog) and for the JVM's first run of that code. Spark keeps
    two pools of reusable Python workers, one for data sources and one for RDD jobs (the
    pipeline's tasks): this reads a tiny built-in data source (lakelog_warm_up, one row per
    core) and runs one tiny RDD job at the same time, both importing lakelog. Blocks until
    done, or with `background=True` runs on a daemon thread (returned) so the caller can do
    other work meanwhile; a failed background warm-up only means the first job pays for start-up."""
    spark.dataSource.register(WarmUpSource)
    slots = max(spark.sparkContext.defaultParallelism, 1)

    failed: list[BaseException] = []

    def read() -> None:
        reader = spark.read.format(WarmUpSource.name()).option("partitions", str(slots))
        try:
            reader.load().collect()
        except BaseException as exc:
            failed.append(exc)

    def run() -> None:
        reading = threading.Thread(target=read, name="lakelog-spark-warm-up-read", daemon=True)
        reading.start()
        try:
            spark.sparkContext.parallelize(range(slots), slots).map(_import_pipeline).collect()
        finally:
            reading.join()
        if failed:
            raise failed[0]

    if not background:
        run()
        return None

    def run_quietly() -> None:
        with contextlib.suppress(Exception):  # a warm-up must never break the caller
            run()

    thread = threading.Thread(target=run_quietly, name="lakelog-spark-warm-up", daemon=True)
    thread.start()
    return thread


def _import_pipeline(item: int) -> int:
    """Executor side of the RDD warm-up: load what the pipeline's tasks use."""
    import lakelog.pipeline.export
    import lakelog.pipeline.merge  # noqa: F401

    return item
