"""Compact the partitions of `cleanup.policy=compact` topics in the broker, with no Spark
and no scheduler: Kafka's log cleaner, for a diskless log.

Every `compaction_interval_ms` each broker walks the compacted partitions. For each it
takes the partition's lease in the coordinator (one broker at a time; a dead broker's
lease expires after `compaction_lease_ms`), reads its batch coordinates, keeps what
Kafka would clean (closed segments, older than min.compaction.lag.ms: see
`planning.first_uncleanable_offset`), and compacts when the dirty ratio reaches
min.cleanable.dirty.ratio, a dirty record waited max.compaction.lag.ms, or a kept
tombstone's delete.retention.ms passed. The pass is `pipeline.compaction.compact_partition`
(the code `lakelog pipeline compact` runs on Spark), swapped in with one all-or-nothing
`commit_merge`; the cleaned offset it reached goes back with the lease, so the next pass
maps only the keys written since.

Bounded per pass: one partition at a time, at most `compaction_max_keys_per_pass` keys
and `compaction_max_bytes_per_pass` dirty bytes mapped, reads in 8 MiB chunks, paced to
`compaction_max_bytes_per_second`, yielding to requests after every batch row."""

from __future__ import annotations

import asyncio
import logging
import time
from typing import TYPE_CHECKING, Protocol
from uuid import UUID

from lakelog.coordinator.pipeline_types import CompactionLease
from lakelog.pipeline.compaction import (
    PartitionJob,
    PartitionOutcome,
    collect_partition,
    compact_partition,
)
from lakelog.pipeline.planning import (
    CompactionTopic,
    cleanable,
    compacted_topics,
    compaction_range,
    dirtiness,
    first_uncleanable_offset,
    needs_compaction,
)
from lakelog.pipeline.record_decode import RecordDecodeError
from lakelog.server.background.hosts import BrokerWorkHost
from lakelog.server.cluster.outage import log_failure
from lakelog.util import metrics
from lakelog.util.errors import ErrorCode

if TYPE_CHECKING:
    pass

log = logging.getLogger(__name__)

READ_CHUNK_BYTES = 8 * 1024 * 1024
"""Batch bytes the broker holds at once while it compacts (the Spark job reads 32 MiB)."""
MAX_ROWS_PER_PASS = 100_000
"""Batch coordinates one pass holds (a few hundred bytes each): a longer partition is
compacted a prefix at a time."""


class LeaseLost(Exception):
    """Another broker took the partition's lease while this one compacted it (this one
    stalled past `compaction_lease_ms`): the pass stops, committing nothing."""


class CompactionHost(BrokerWorkHost, Protocol):
    """What the compaction loop uses of the broker (the Broker is one)."""


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


class _Pacer:
    """The pass's pause after each batch row: keep to the byte rate, let requests run,
    renew the lease well before it expires."""

    def __init__(self, loop: CompactionLoop, topic_id: UUID, partition: int) -> None:
        self._loop = loop
        self._topic_id = topic_id
        self._partition = partition
        self._started = time.monotonic()
        self._renewed = self._started
        self.bytes_read = 0

    async def __call__(self, size: int) -> None:
        settings = self._loop.host.settings
        self.bytes_read += size
        rate = settings.compaction_max_bytes_per_second
        ahead = self.bytes_read / rate - (time.monotonic() - self._started) if rate else 0.0
        await asyncio.sleep(max(ahead, 0.0))
        if (time.monotonic() - self._renewed) * 1000 >= settings.compaction_lease_ms / 3:
            await self.renew()

    async def renew(self) -> None:
        host = self._loop.host
        lease = await host.coordinator.claim_compaction(
            self._topic_id,
            self._partition,
            host.broker_id,
            _now_ms(),
            host.settings.compaction_lease_ms,
        )
        if lease is None:
            raise LeaseLost
        self._renewed = time.monotonic()


class CompactionLoop:
    def __init__(self, host: CompactionHost) -> None:
        self.host = host

    async def run(self) -> None:
        interval = self.host.settings.compaction_interval_ms / 1000
        if interval <= 0:
            return
        while True:
            await asyncio.sleep(interval)
            try:
                await self.run_once()
            except Exception:
                log_failure(log, "compaction pass failed")

    async def run_once(self) -> int:
        """One round over every compacted partition; how many this broker compacted."""
        topics = await self.host.coordinator.get_topics(None)
        compacted = 0
        for choice in compacted_topics(topics, self.host.settings):
            for partition in range(choice.topic.num_partitions):
                if await self.compact(choice, partition):
                    compacted += 1
        return compacted

    async def compact(self, choice: CompactionTopic, partition: int) -> bool:
        """Compact one partition if this broker gets its lease and it needs it."""
        host, topic_id = self.host, choice.topic.topic_id
        lease = await host.coordinator.claim_compaction(
            topic_id, partition, host.broker_id, _now_ms(), host.settings.compaction_lease_ms
        )
        if lease is None:
            return False
        state = lease
        try:
            state = await self._pass(choice, partition, lease)
        except LeaseLost:
            metrics.compaction_passes_total.labels("lost_lease").inc()
            log.warning(
                "compaction of %s-%d stopped: another broker took its lease",
                choice.topic.name,
                partition,
            )
            return False
        except RecordDecodeError as exc:
            log.error("compaction of %s-%d failed: %s", choice.topic.name, partition, exc)
        finally:
            await host.coordinator.release_compaction(topic_id, partition, host.broker_id, state)
        return state is not lease

    async def _pass(
        self, choice: CompactionTopic, partition: int, lease: CompactionLease
    ) -> CompactionLease:
        host, config, topic = self.host, choice.config, choice.topic
        found = await collect_partition(
            host.coordinator, topic.topic_id, partition, max_rows=MAX_ROWS_PER_PASS
        )
        if found is None:
            return lease
        now = _now_ms()
        data = [c for c in found.batches if c.control_type < 0]
        uncleanable = first_uncleanable_offset(data, now, config)
        plan = compaction_range(found.batches, found.aborted, found.last_stable_offset)
        plan = cleanable(plan, uncleanable)
        dirt = dirtiness(plan, lease.cleaned_offset)
        if not needs_compaction(dirt, config, now, lease.tombstones_due_ms):
            return lease
        settings = host.settings
        job = PartitionJob(
            topic.topic_id,
            partition,
            tuple(plan.rewrite),
            tuple(plan.kept),
            tuple(plan.aborted),
            now - config.delete_retention_ms,
            settings.merge_target_bytes,
            True,
            map_from=lease.cleaned_offset,
            max_keys=settings.compaction_max_keys_per_pass,
            max_map_bytes=settings.compaction_max_bytes_per_pass,
            read_chunk_bytes=READ_CHUNK_BYTES,
            rewrite_kept=True,
        )
        log.info(
            "compaction of %s-%d started: dirty ratio %.2f of %d bytes, cleaned to offset %d",
            topic.name,
            partition,
            dirt.ratio,
            dirt.total_bytes,
            lease.cleaned_offset,
        )
        pacer = _Pacer(self, topic.topic_id, partition)
        started = time.monotonic()
        try:
            outcome = await compact_partition(host.storage, job, pacer)
        finally:
            metrics.compaction_seconds_total.inc(time.monotonic() - started)
            metrics.compaction_bytes_total.labels("read").inc(pacer.bytes_read)
        if outcome.commits:
            await pacer.renew()  # commit only while still holding the lease
            results = await host.coordinator.commit_merge(outcome.commits, True)
            if any(r.skipped or r.error != ErrorCode.none for r in results):
                metrics.compaction_passes_total.labels("changed_meanwhile").inc()
                log.info(
                    "compaction of %s-%d found its batches changed meanwhile; next pass redoes it",
                    topic.name,
                    partition,
                )
                return lease
        metrics.compaction_passes_total.labels("committed").inc()
        covered = (*job.rewrite, *job.kept, *job.aborted)
        metrics.compaction_bytes_total.labels("compacted").inc(
            sum(c.byte_size for c in covered if c.base_offset < outcome.covered_to)
        )
        metrics.compaction_bytes_total.labels("removed").inc(
            outcome.bytes_before - outcome.bytes_after
        )
        _log_done(topic.name, outcome)
        due = 0
        if outcome.oldest_kept_tombstone_ms >= 0:
            due = outcome.oldest_kept_tombstone_ms + config.delete_retention_ms + 1
        return CompactionLease(outcome.covered_to, due)


def _log_done(name: str, outcome: PartitionOutcome) -> None:
    log.info(
        "compaction of %s-%d done: %d records read, %d dropped (%d tombstones), "
        "%d -> %d bytes, cleaned to offset %d",
        name,
        outcome.partition,
        outcome.records_read,
        outcome.records_dropped,
        outcome.tombstones_dropped,
        outcome.bytes_before,
        outcome.bytes_after,
        outcome.covered_to,
    )
