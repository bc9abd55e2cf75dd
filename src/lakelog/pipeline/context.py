"""What a job's driver holds while it runs: the settings, the coordinator and storage it
commits through, an event loop to await them from Spark's synchronous world, and the Spark
session (built on first use, so jobs that need none never start a JVM)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Coroutine
from typing import TYPE_CHECKING, Any, TypeVar

from lakelog.config import Settings
from lakelog.coordinator import BatchCoordinator, open_coordinator
from lakelog.log.storage.inline_store import InlineAwareStorage
from lakelog.log.storage.store import ObjectStorage
from lakelog.pipeline.progress import NullProgress, Progress

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

T = TypeVar("T")


class PipelineError(Exception):
    """A job cannot run as asked (bad storage URL, unreachable coordinator...)."""


class JobContext:
    """Use as a context manager; `run` awaits a coroutine on the driver's loop."""

    def __init__(
        self,
        settings: Settings,
        *,
        master: str | None = None,
        dry_run: bool = False,
        progress: Progress | None = None,
        spark: SparkSession | None = None,
    ) -> None:
        self.settings = settings
        self.master = master
        self.dry_run = dry_run
        self.progress: Progress = progress or NullProgress()
        self.storage_url = settings.resolved_storage_url
        self.coordinator_url = settings.resolved_coordinator_url
        """Executors open the coordinator from it to read inline files (issue 32)."""
        self._spark = spark
        self._own_spark = False
        self._runner: asyncio.Runner | None = None
        self._coordinator: BatchCoordinator | None = None
        self._storage: ObjectStorage | None = None
        self.spark_seconds: float | None = None
        """How long this job waited for its Spark session (None: it needed none)."""

    def __enter__(self) -> JobContext:
        self._runner = asyncio.Runner()
        coordinator = open_coordinator(self.settings.resolved_coordinator_url)
        self._runner.run(coordinator.start())
        self._coordinator = coordinator
        self._storage = InlineAwareStorage(ObjectStorage.from_url(self.storage_url), coordinator)
        return self

    def __exit__(self, *exc: object) -> None:
        runner, self._runner = self._runner, None
        try:
            if runner is not None and self._coordinator is not None:
                runner.run(self._coordinator.close())
        finally:
            if runner is not None:
                runner.close()
            if self._own_spark and self._spark is not None:
                self._spark.stop()
                self._spark = None

    def run(self, coro: Coroutine[Any, Any, T]) -> T:
        if self._runner is None:
            raise RuntimeError("JobContext is not entered")
        return self._runner.run(coro)

    @property
    def coordinator(self) -> BatchCoordinator:
        if self._coordinator is None:
            raise RuntimeError("JobContext is not entered")
        return self._coordinator

    @property
    def storage(self) -> ObjectStorage:
        if self._storage is None:
            raise RuntimeError("JobContext is not entered")
        return self._storage

    @property
    def spark(self) -> SparkSession:
        """The session, built on first use. Executors are other processes, so the store
        must be one they can reach too (not memory://)."""
        if self._spark is None:
            if self.storage_url.startswith("memory:"):
                raise PipelineError("Spark jobs need a shared store: memory:// is per process")
            from pyspark.sql import SparkSession

            from lakelog.pipeline.session import build_session

            active = SparkSession.getActiveSession()
            if active is not None:  # e.g. a notebook's: use it, and leave it running
                self._spark = active
                self.spark_seconds = 0.0
                return active
            self.progress.stage("starting Spark")
            started = time.monotonic()
            from lakelog.spark.worker_check import WorkersCannotImportLakelog

            try:
                self._spark = build_session(self.master, ship=self.settings.pipeline_ship_lakelog)
            except WorkersCannotImportLakelog as exc:
                raise PipelineError(str(exc)) from None
            self.spark_seconds = time.monotonic() - started
            self._own_spark = True
        return self._spark
