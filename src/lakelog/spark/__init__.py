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

`get_or_create(builder)` in place of `builder.getOrCreate()` starts the session faster
(`session_start`, which lakelog.pipeline uses too; this package's `warm_up` loads the
pipeline, so the pipeline imports only its modules, never the package's facade): the
driver JVM maps a class archive (`jvm_cache`) and Python workers import pyspark's compiled
modules, not the zipped sources Spark puts on their path (`SPARK_CONF` with
`lakelog.pipeline.spark_daemon` for task workers; on local masters `python_launcher` for all).
"""

from __future__ import annotations

import contextlib
import threading
from typing import TYPE_CHECKING

from lakelog.spark.session_start import SPARK_CONF, get_or_create, under_spark_submit
from lakelog.spark.source import SCHEMA, LakelogDataSource, WarmUpSource
from lakelog.spark.worker_check import WorkersCannotImportLakelog, check_workers

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = [
    "SCHEMA",
    "SPARK_CONF",
    "LakelogDataSource",
    "WorkersCannotImportLakelog",
    "get_or_create",
    "register",
    "under_spark_submit",
    "warm_up",
]


def register(spark: SparkSession, check: bool = True) -> None:
    """Make `format("lakelog")` available in this session (readers and streams).

    With `check`, first make sure Spark's Python workers can import lakelog, and raise
    `WorkersCannotImportLakelog` with one line saying how to fix it if not (a session
    started from a virtual environment's python without activating it runs its workers
    with `python3` from PATH, which lacks lakelog; executors on other machines lack it
    unless it is shipped to them)."""
    if check:
        check_workers(spark)
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
