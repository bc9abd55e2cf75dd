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
"""

from __future__ import annotations

import contextlib
import threading
from typing import TYPE_CHECKING

from lakelog.spark.source import SCHEMA, LakelogDataSource, WarmUpSource

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = ["SCHEMA", "LakelogDataSource", "register", "warm_up"]


def register(spark: SparkSession) -> None:
    """Make `format("lakelog")` available in this session (readers and streams)."""
    spark.dataSource.register(LakelogDataSource)


def warm_up(spark: SparkSession, *, background: bool = False) -> threading.Thread | None:
    """Read a tiny built-in data source once, one partition per core, so that Spark
    starts the Python processes `format("lakelog")` reads run in (its planner and its
    readers, kept for reuse) and they import lakelog: on a fresh local[2] session that
    start-up is most of the first read's time (several seconds), and it is the same
    whatever is read. Blocks until done, or with `background=True` runs on a daemon
    thread (returned) so the caller can do other work meanwhile; a failed background
    warm-up only means the first read pays the start-up itself."""
    spark.dataSource.register(WarmUpSource)
    partitions = str(max(spark.sparkContext.defaultParallelism, 1))

    def run() -> None:
        spark.read.format(WarmUpSource.name()).option("partitions", partitions).load().collect()

    if not background:
        run()
        return None

    def run_quietly() -> None:
        with contextlib.suppress(Exception):  # a warm-up must never break the caller
            run()

    thread = threading.Thread(target=run_quietly, name="lakelog-spark-warm-up", daemon=True)
    thread.start()
    return thread
