"""Lakelog's Spark data source: read topics straight from object storage.

    from lakelog.spark import register
    register(spark)  # once per SparkSession
    df = (spark.read.format("lakelog")
          .option("lakelog.data.dir", "./lakelog-data")  # or lakelog.storage.url +
          .option("subscribe", "orders")                 #    lakelog.coordinator.url
          .load())

Options and columns follow Spark's Kafka source (see `lakelog.spark.options`); the same
works with `spark.readStream`. `register` makes the short name "lakelog" known to the
session; `spark.dataSource.register(LakelogDataSource)` is the same thing.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from lakelog.spark.source import SCHEMA, LakelogDataSource

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = ["SCHEMA", "LakelogDataSource", "register"]


def register(spark: SparkSession) -> None:
    """Make `format("lakelog")` available in this session (readers and streams)."""
    spark.dataSource.register(LakelogDataSource)
