"""Enforce retention.ms / retention.bytes by advancing log start offsets."""

from __future__ import annotations

import asyncio
import logging
import time
from typing import TYPE_CHECKING

from lakelog import metrics
from lakelog.config import Settings
from lakelog.coordinator.interface import RetentionPolicy, TopicInfo
from lakelog.topic_config import effective

if TYPE_CHECKING:
    from lakelog.broker import Broker

log = logging.getLogger(__name__)


def retention_policies(topics: list[TopicInfo], settings: Settings) -> list[RetentionPolicy]:
    """One policy per partition of every topic with a limit and a delete cleanup policy."""
    policies = []
    for topic in topics:
        config = effective(topic, settings)
        if "delete" not in config.cleanup_policy.split(","):
            continue
        if config.retention_ms < 0 and config.retention_bytes < 0:
            continue
        policies.extend(
            RetentionPolicy(topic.topic_id, p, config.retention_ms, config.retention_bytes)
            for p in range(topic.num_partitions)
        )
    return policies


class RetentionLoop:
    def __init__(self, broker: Broker) -> None:
        self._broker = broker

    async def run_once(self) -> int:
        broker = self._broker
        topics = await broker.coordinator.get_topics(None)
        policies = retention_policies(topics, broker.settings)
        if not policies:
            return 0
        results = await broker.coordinator.enforce_retention(policies, int(time.time() * 1000))
        dropped = sum(r.batches_deleted for r in results)
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
                log.exception("retention pass failed")
