"""Running the pipeline jobs against a test broker's storage and coordinator, and looking
at both the way the jobs do (the coordinator API, object listings)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any, TypeVar

from e2e_harness import BrokerProcess
from pyspark.sql import SparkSession

from lakelog.config import Settings
from lakelog.coordinator import BatchCoordinator, FindBatchesRequest, PartitionKey, open_coordinator
from lakelog.coordinator.log_types import BatchCoordinate
from lakelog.log.storage.store import ObjectStorage
from lakelog.pipeline.context import JobContext
from lakelog.pipeline.progress import JobSummary

T = TypeVar("T")


def job_settings(broker: BrokerProcess, **overrides: Any) -> Settings:
    backend = broker.backend
    return Settings(
        data_dir=broker.data_dir,
        storage_url=backend.storage_url,
        coordinator_url=backend.coordinator_url,
        **overrides,
    )


def run_job(
    broker: BrokerProcess,
    spark: SparkSession,
    job: Callable[[JobContext], JobSummary],
    *,
    dry_run: bool = False,
    **overrides: Any,
) -> JobSummary:
    """One job on the test's Spark session (left running for the next job)."""
    with JobContext(job_settings(broker, **overrides), dry_run=dry_run, spark=spark) as ctx:
        return job(ctx)


def with_coordinator(broker: BrokerProcess, action: Callable[[BatchCoordinator], Any]) -> Any:
    async def main() -> Any:
        coordinator = open_coordinator(broker.backend.coordinator_url)
        await coordinator.start()
        try:
            return await action(coordinator)
        finally:
            await coordinator.close()

    return asyncio.run(main())


def partition_rows(
    broker: BrokerProcess, topic: str, partitions: int
) -> list[list[BatchCoordinate]]:
    """Every coordinator row of each partition, from its log start."""

    async def rows(c: BatchCoordinator) -> list[list[BatchCoordinate]]:
        [info] = await c.get_topics([topic])
        out = []
        for p in range(partitions):
            [log] = await c.log_info([PartitionKey(info.topic_id, p)])
            [found] = await c.find_batches(
                [FindBatchesRequest(info.topic_id, p, log.log_start_offset, 1 << 40)]
            )
            out.append(list(found.batches))
        return out

    return with_coordinator(broker, rows)


def known_files(broker: BrokerProcess) -> set[str]:
    return set(with_coordinator(broker, lambda c: c.list_files()))


def stored_objects(broker: BrokerProcess) -> set[str]:
    """Every object key under the store's root (temporary staging files excluded)."""
    storage = ObjectStorage.from_url(broker.backend.storage_url)
    return {o.key for o in asyncio.run(storage.list("")) if "#" not in o.key}


def spark_rows(spark: SparkSession, broker: BrokerProcess, topic: str, *columns: str) -> list[Any]:
    """The topic's records through the Spark source, reading the broker's store and
    coordinator, with the given columns."""
    backend = broker.backend
    return (
        spark.read.format("lakelog")
        .option("subscribe", topic)
        .option("lakelog.storage.url", backend.storage_url)
        .option("lakelog.coordinator.url", backend.coordinator_url)
        .load()
        .select(*columns)
        .collect()
    )
