"""Enforce retention.ms / retention.bytes by advancing log start offsets: the broker's light
loop, so a single node without scheduled pipeline jobs stays bounded. Which partitions and
limits apply is `pipeline.planning.retention_policies`, shared with `lakelog pipeline
retention`."""

from __future__ import annotations

import asyncio
import logging
import time
from typing import TYPE_CHECKING, Protocol

from lakelog.pipeline.planning import chunked, retention_policies
from lakelog.server.background.hosts import CoordinatorHost
from lakelog.server.cluster.outage import log_failure
from lakelog.util import metrics

if TYPE_CHECKING:
    pass

__all__ = ["RetentionLoop", "retention_policies"]

log = logging.getLogger(__name__)

POLICIES_PER_CALL = 1000
"""Partitions per coordinator call: bounds one transaction's size and lock time."""


class RetentionHost(CoordinatorHost, Protocol):
    """What the retention loop uses of the broker (the Broker is one)."""


class RetentionLoop:
    def __init__(self, broker: RetentionHost) -> None:
        self._broker = broker

    async def run_once(self) -> int:
        broker = self._broker
        topics = await broker.coordinator.get_topics(None)
        policies = retention_policies(topics, broker.settings)
        dropped = 0
        for chunk in chunked(policies, POLICIES_PER_CALL):
            results = await broker.coordinator.enforce_retention(chunk, int(time.time() * 1000))
            dropped += sum(r.batches_deleted for r in results)
        if dropped:
            metrics.retention_deleted_batches_total.inc(dropped)
            log.info("retention dropped %d batches", dropped)
        return dropped

    async def run(self) -> None:
        interval = self._broker.settings.retention_check_interval_ms / 1000
        while True:
            await asyncio.sleep(interval)
            try:
                await self.run_once()
            except Exception:
                log_failure(log, "retention pass failed")
