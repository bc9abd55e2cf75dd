"""Delete objects the coordinator marked for deletion, after a grace period longer than
any in-flight fetch: the broker's light loop, so a single node without scheduled `lakelog
pipeline gc` runs stays bounded. The rules (cutoff, the last check that no batch points
into an object) are `pipeline.planning`'s, shared with the gc job."""

from __future__ import annotations

import asyncio
import logging
import time
from typing import TYPE_CHECKING, Protocol

from lakelog.pipeline.planning import chunked, deletable, file_delete_cutoff
from lakelog.server.background.hosts import StorageHost
from lakelog.server.cluster.outage import log_failure
from lakelog.util import metrics

if TYPE_CHECKING:
    from lakelog.log.fetch.cache import BatchCache

log = logging.getLogger(__name__)

FILES_PER_ROUND = 1000
"""Objects checked and deleted per round (S3 deletes up to 1000 keys per request)."""


class CleanerHost(StorageHost, Protocol):
    """What the file cleaner uses of the broker (the Broker is one)."""

    @property
    def cache(self) -> BatchCache: ...


class FileCleaner:
    def __init__(self, broker: CleanerHost) -> None:
        self._broker = broker

    async def run_once(self) -> int:
        broker = self._broker
        now = int(time.time() * 1000)
        cutoff = file_delete_cutoff(now, broker.settings.file_delete_grace_ms)
        files = await broker.coordinator.files_to_delete(cutoff)
        deleted = 0
        for chunk in chunked([f.object_key for f in files], FILES_PER_ROUND):
            refs = await broker.coordinator.file_references(chunk)
            keys = deletable(refs, orphans=False)
            if not keys:
                continue
            await broker.storage.delete_many(keys)
            for key in keys:
                broker.cache.discard_object(key)
            await broker.coordinator.delete_files(keys)
            deleted += len(keys)
        if deleted:
            metrics.files_deleted_total.inc(deleted)
            log.info("deleted %d objects", deleted)
        return deleted

    async def run(self) -> None:
        interval = (
            min(
                self._broker.settings.retention_check_interval_ms,
                self._broker.settings.file_delete_grace_ms,
            )
            / 1000
        )
        while True:
            await asyncio.sleep(max(interval, 0.05))
            try:
                await self.run_once()
            except Exception:
                log_failure(log, "file cleaner pass failed")
