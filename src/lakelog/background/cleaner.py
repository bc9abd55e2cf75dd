"""Delete objects the coordinator marked for deletion, after a grace period longer than
any in-flight fetch."""

from __future__ import annotations

import asyncio
import logging
import time
from typing import TYPE_CHECKING

from lakelog import metrics

if TYPE_CHECKING:
    from lakelog.broker import Broker

log = logging.getLogger(__name__)


class FileCleaner:
    def __init__(self, broker: Broker) -> None:
        self._broker = broker

    async def run_once(self) -> int:
        broker = self._broker
        cutoff = int(time.time() * 1000) - broker.settings.file_delete_grace_ms
        files = await broker.coordinator.files_to_delete(cutoff)
        if not files:
            return 0
        keys = [f.object_key for f in files]
        await broker.storage.delete_many(keys)
        for key in keys:
            broker.cache.discard_object(key)
        await broker.coordinator.delete_files(keys)
        metrics.files_deleted_total.inc(len(keys))
        log.info("deleted %d objects", len(keys))
        return len(keys)

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
                log.exception("file cleaner pass failed")
