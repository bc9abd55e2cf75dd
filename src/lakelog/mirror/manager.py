"""The broker's mirroring: leases, the fetcher pool, state reports, each mirror's singleton
work (following source topics, group offset sync, finishing failovers), and the read-only
set the produce path checks.

Loops and their intervals:
- leases, every `mirror.lease.renew.ms`: one coordinator call renews this broker's leases,
  takes its fair share of free or expired partitions and gives back any excess; owned
  MIRRORING partitions go to fetchers, PREPARING ones are prepared (start offset or
  failback check), lost ones are dropped. A dead broker's partitions move once its leases
  expire (`mirror.lease.ms`) and its session ends.
- reports, every `mirror.state.report.interval.ms`: lag figures in one batched update
  (state changes are written when they happen, never per fetch).
- mirror tasks, per mirror on the broker holding its task lease: follow source topics
  every `mirror.metadata.refresh.interval.ms`, sync group offsets every
  `mirror.group.sync.interval.ms`, and finish failovers left half done.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Protocol
from uuid import UUID

from lakelog.coordinator.log_types import CommitBatchResult
from lakelog.coordinator.mirror_types import (
    MirrorBatch,
    MirrorDefinition,
    MirrorPartition,
    MirrorPartitionUpdate,
    MirrorState,
)
from lakelog.mirror import follow, group_sync, prepare
from lakelog.mirror.fetcher import Fetcher, MirrorTask, fetcher_index
from lakelog.mirror.flow import ByteBudget, Throttle
from lakelog.mirror.source import SourceCluster, SourceUnavailable
from lakelog.server.cluster.outage import log_failure
from lakelog.util import metrics
from lakelog.util.errors import ErrorCode

if TYPE_CHECKING:
    from lakelog.config import Settings
    from lakelog.coordinator.interface import BatchCoordinator
    from lakelog.coordinator.topic_types import BrokerInfo
    from lakelog.log.fetch.waiter import CommitWaiter
    from lakelog.log.storage.store import ObjectStorage
    from lakelog.server.topics import TopicCache

log = logging.getLogger(__name__)

TASK_TICK_S = 1.0
READ_ONLY_FRESH_S = 0.5
FAILOVER_CHECK_S = 5.0


def now_ms() -> int:
    return int(time.time() * 1000)


class MirrorHost(Protocol):
    """What mirroring uses of the broker (the Broker is one)."""

    @property
    def settings(self) -> Settings: ...
    @property
    def broker_id(self) -> int: ...
    @property
    def broker_epoch(self) -> int: ...
    @property
    def coordinator(self) -> BatchCoordinator: ...
    @property
    def storage(self) -> ObjectStorage: ...
    @property
    def topics(self) -> TopicCache: ...
    @property
    def waiter(self) -> CommitWaiter: ...
    async def live_brokers(self) -> list[BrokerInfo]: ...


class MirrorManager:
    def __init__(self, broker: MirrorHost) -> None:
        self.broker = broker
        self.settings = broker.settings
        self.storage = broker.storage
        self.coordinator = broker.coordinator
        s = self.settings
        self.budget = ByteBudget(max(1, s.mirror_max_inflight_bytes))
        self.request_bytes = max(1, min(s.mirror_fetch_max_bytes, self.budget.capacity // 2))
        self.throttle = Throttle(s.mirror_throttle_bytes_per_sec)
        self.source_timeout = 30.0
        self.sources: dict[str, SourceCluster] = {}
        self._definitions: dict[str, MirrorDefinition] = {}
        self.fetchers = [Fetcher(i, self) for i in range(max(1, s.mirror_num_fetchers))]
        self._tasks: dict[tuple[UUID, int], MirrorTask] = {}
        self._read_only: set[UUID] = set()
        self._read_only_at = 0.0
        self._read_only_refresh: asyncio.Future[None] | None = None
        self._down: set[str] = set()
        self._loops: list[asyncio.Task[None]] = []
        self._preparing: asyncio.Task[None] | None = None
        self._renew_now = asyncio.Event()
        self._due: dict[tuple[str, str], float] = {}
        self._state_gauges: set[tuple[str, str]] = set()

    # ---------------------------------------------------------------- lifecycle
    def start(self) -> None:
        loop = asyncio.get_running_loop()
        self._loops = [
            loop.create_task(
                self._forever(self._renew, self.settings.mirror_lease_renew_ms),
                name="mirror-leases",
            ),
            loop.create_task(
                self._forever(self._report, self.settings.mirror_state_report_interval_ms),
                name="mirror-reports",
            ),
            loop.create_task(
                self._forever(self._mirror_tasks, int(TASK_TICK_S * 1000)), name="mirror-tasks"
            ),
        ]
        self._loops += [
            loop.create_task(f.run(), name=f"mirror-fetcher-{f.index}") for f in self.fetchers
        ]

    async def stop(self) -> None:
        tasks = [*self._loops, *([self._preparing] if self._preparing else [])]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        for fetcher in self.fetchers:
            fetcher.close()
        for source in list(self.sources.values()):
            with contextlib.suppress(Exception):
                await source.close()
        self.sources.clear()

    async def _forever(self, step: Callable[[], Awaitable[object]], interval_ms: int) -> None:
        while True:
            try:
                await step()
            except asyncio.CancelledError:
                raise
            except Exception:
                log_failure(log, "mirror loop %s failed", getattr(step, "__name__", step))
            if step == self._renew:
                self._renew_now.clear()
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._renew_now.wait(), interval_ms / 1000)
            else:
                await asyncio.sleep(interval_ms / 1000)

    # ---------------------------------------------------------------- read-only topics
    async def read_only(self, topic_id: UUID) -> bool:
        """Is the topic held by a mirror? Lets the produce path refuse early (the commit
        refuses anyway). A "yes" older than READ_ONLY_FRESH_S is checked again first, so a
        failover done through another broker makes the topic writable here at once."""
        if topic_id not in self._read_only:
            return False
        if time.monotonic() - self._read_only_at > READ_ONLY_FRESH_S:
            if self._read_only_refresh is None or self._read_only_refresh.done():
                self._read_only_refresh = asyncio.ensure_future(self.refresh_read_only())
            await asyncio.shield(self._read_only_refresh)
        return topic_id in self._read_only

    def forget_read_only(self, topic_ids: Sequence[UUID]) -> None:
        self._read_only.difference_update(topic_ids)

    async def refresh_read_only(self) -> None:
        self._read_only = set(await self.coordinator.mirror_topic_ids())
        self._read_only_at = time.monotonic()

    # ---------------------------------------------------------------- leases
    async def _renew(self) -> None:
        broker = self.broker
        await self.load_mirrors()
        if not self._definitions:
            # No mirror, nothing read-only (deleting a mirror needs all its rows STOPPED):
            # and no write transaction every interval on clusters that do not mirror.
            for key in list(self._tasks):
                self._drop(key)
            self._read_only = set()
            self._read_only_at = time.monotonic()
            return
        live = max(1, len(await broker.live_brokers()))
        owned = await self.coordinator.acquire_mirror_leases(
            broker.broker_id, broker.broker_epoch, live, now_ms(), self.settings.mirror_lease_ms
        )
        await self.refresh_read_only()
        by_key = {(p.topic_id, p.partition): p for p in owned}
        for key in list(self._tasks):
            held = by_key.get(key)
            if held is None or held.state != MirrorState.MIRRORING:
                self._drop(key)
        preparing = []
        for p in owned:
            if p.state == MirrorState.PREPARING:
                preparing.append(p)
            elif p.state == MirrorState.MIRRORING and (p.topic_id, p.partition) not in self._tasks:
                self._start_task(p)
        metrics.mirror_owned_partitions.set(len(owned))
        if preparing and (self._preparing is None or self._preparing.done()):
            self._preparing = asyncio.get_running_loop().create_task(self._prepare(preparing))

    async def load_mirrors(self) -> None:
        """(Re)load the mirror definitions and open or close their sources."""
        definitions = {d.name: d for d in await self.coordinator.list_mirrors()}
        for name in list(self.sources):
            old = self._definitions.get(name)
            new = definitions.get(name)
            if (
                new is None
                or old is None
                or (new.source_bootstrap, dict(new.source_configs))
                != (
                    old.source_bootstrap,
                    dict(old.source_configs),
                )
            ):
                source = self.sources.pop(name)
                await source.close()
        for name, d in definitions.items():
            if name not in self.sources:
                self.sources[name] = SourceCluster(
                    d.source_bootstrap,
                    d.source_configs,
                    f"lakelog-mirror-{name}-{self.broker.broker_id}",
                    self.source_timeout,
                )
        self._definitions = definitions

    def source_for(self, definition: MirrorDefinition) -> SourceCluster:
        """The shared source of a mirror, or a private one for a mirror not loaded yet."""
        known = self.sources.get(definition.name)
        if known is not None and known.bootstrap == definition.source_bootstrap:
            return known
        return SourceCluster(
            definition.source_bootstrap,
            definition.source_configs,
            f"lakelog-mirror-{definition.name}-{self.broker.broker_id}",
            self.source_timeout,
        )

    def _start_task(self, p: MirrorPartition) -> None:
        task = MirrorTask(p.mirror, p.topic, p.topic_id, p.partition, p.high_watermark)
        source = self.sources.get(p.mirror)
        if source is not None:
            source.track([p.topic])
        self._tasks[task.key] = task
        self._fetcher(task.key).assign(task)

    def _fetcher(self, key: tuple[UUID, int]) -> Fetcher:
        return self.fetchers[fetcher_index(key[0], key[1], len(self.fetchers))]

    def _drop(self, key: tuple[UUID, int]) -> None:
        task = self._tasks.pop(key, None)
        if task is None:
            return
        self._fetcher(key).remove(key)
        labels = (task.mirror, task.topic, str(task.partition))
        with contextlib.suppress(KeyError):
            metrics.mirror_lag_records.remove(*labels)
            metrics.mirror_lag_seconds.remove(*labels)

    async def _prepare(self, partitions: Sequence[MirrorPartition]) -> None:
        by_mirror: dict[str, list[MirrorPartition]] = {}
        for p in partitions:
            by_mirror.setdefault(p.mirror, []).append(p)
        for mirror, parts in by_mirror.items():
            source = self.sources.get(mirror)
            if source is None:
                continue
            try:
                verdicts = await prepare.decide(source, parts)
            except SourceUnavailable as exc:
                self.source_down(mirror, exc)
                continue
            except Exception:
                log.exception("mirror %s: preparing %d partitions failed", mirror, len(parts))
                continue
            updates = prepare.updates_for(self.broker.broker_id, parts, verdicts)
            await self.coordinator.update_mirror_partitions(updates, now_ms())
            for u in updates:
                if u.state == MirrorState.FAILED:
                    metrics.mirror_failures_total.labels(cause="diverged").inc()
                    log.warning("mirror %s: partition failed: %s", mirror, u.reason)
        self._renew_now.set()

    # ---------------------------------------------------------------- fetcher callbacks
    async def commit(
        self, key: str, size: int, batches: Sequence[MirrorBatch]
    ) -> list[CommitBatchResult]:
        broker = self.broker
        results = await self.coordinator.commit_mirror(
            key, broker.broker_id, broker.broker_epoch, size, batches
        )
        broker.waiter.notify()
        return results

    async def fail(self, task: MirrorTask, cause: str, reason: str) -> None:
        log.warning("mirror %s: %s-%d FAILED: %s", task.mirror, task.topic, task.partition, reason)
        metrics.mirror_failures_total.labels(cause=cause).inc()
        update = MirrorPartitionUpdate(
            task.topic_id, task.partition, self.broker.broker_id, MirrorState.FAILED, reason
        )
        await self.coordinator.update_mirror_partitions([update], now_ms())
        self._drop(task.key)

    def lost_lease(self, key: tuple[UUID, int]) -> None:
        self._drop(key)

    async def resync(self, keys: set[tuple[UUID, int]]) -> None:
        rows = await self.coordinator.mirror_partitions(topic_ids=sorted({k[0] for k in keys}))
        for p in rows:
            task = self._tasks.get((p.topic_id, p.partition))
            if task is not None and (p.topic_id, p.partition) in keys:
                task.next_offset = p.high_watermark

    def source_down(self, mirror: str, exc: BaseException) -> None:
        if mirror not in self._down:
            self._down.add(mirror)
            log.warning("mirror %s: source unreachable: %s", mirror, exc)

    def source_up(self, mirror: str) -> None:
        if mirror in self._down:
            self._down.discard(mirror)
            log.info("mirror %s: source reachable again", mirror)

    # ---------------------------------------------------------------- reports
    async def _report(self) -> None:
        updates = []
        for task in list(self._tasks.values()):
            figures = (task.source_end_offset, task.source_high_watermark, task.lag_ms)
            labels = (task.mirror, task.topic, str(task.partition))
            metrics.mirror_lag_records.labels(*labels).set(max(0, task.lag_records))
            metrics.mirror_lag_seconds.labels(*labels).set(task.lag_ms / 1000)
            if figures != task.reported and task.source_end_offset >= 0:
                task.reported = figures
                updates.append(
                    MirrorPartitionUpdate(
                        task.topic_id,
                        task.partition,
                        self.broker.broker_id,
                        source_end_offset=task.source_end_offset,
                        source_high_watermark=task.source_high_watermark,
                        lag_ms=task.lag_ms,
                    )
                )
        if updates:
            results = await self.coordinator.update_mirror_partitions(updates, now_ms())
            for u, error in zip(updates, results, strict=True):
                if error != ErrorCode.none:
                    self._drop((u.topic_id, u.partition))

    # ---------------------------------------------------------------- per-mirror tasks
    def _is_due(self, mirror: str, job: str, interval_ms: int) -> bool:
        now = time.monotonic()
        if now < self._due.get((mirror, job), 0.0):
            return False
        self._due[(mirror, job)] = now + interval_ms / 1000
        return True

    async def _mirror_tasks(self) -> None:
        s = self.settings
        for definition in list(self._definitions.values()):
            if not await self.coordinator.claim_mirror_task(
                definition.name, self.broker.broker_id, now_ms(), s.mirror_lease_ms
            ):
                continue
            try:
                if self._is_due(definition.name, "follow", s.mirror_metadata_refresh_interval_ms):
                    await self.follow(definition)
                if self._is_due(definition.name, "groups", s.mirror_group_sync_interval_ms):
                    await self.sync_groups(definition)
                if self._is_due(definition.name, "states", s.mirror_state_report_interval_ms):
                    await self._publish_states(definition.name)
            except SourceUnavailable as exc:
                self.source_down(definition.name, exc)
        if self._definitions and self._is_due("", "failover", int(FAILOVER_CHECK_S * 1000)):
            await self.finish_failovers()

    async def follow(
        self, definition: MirrorDefinition, restart: frozenset[str] = frozenset()
    ) -> follow.FollowReport:
        report = await follow.follow(
            self.coordinator, self.settings, self.source_for(definition), definition, restart
        )
        for problem in report.problems:
            log.warning("mirror %s: %s", definition.name, problem)
        self.broker.topics.invalidate()
        await self.refresh_read_only()
        self._renew_now.set()
        return report

    async def sync_groups(
        self, definition: MirrorDefinition, topics: set[str] | None = None
    ) -> dict[str, int]:
        partitions = await self.coordinator.mirror_partitions(definition.name)
        return await group_sync.sync_groups(
            self.coordinator, self.source_for(definition), partitions, topics
        )

    async def _publish_states(self, mirror: str) -> None:
        counts: dict[str, int] = {str(s): 0 for s in MirrorState}
        for p in await self.coordinator.mirror_partitions(mirror):
            counts[str(p.state)] += 1
        for state, count in counts.items():
            metrics.mirror_partitions.labels(mirror, state).set(count)

    async def finish_failovers(self) -> list[MirrorPartition]:
        done = await self.coordinator.finish_mirror_failover(now_ms())
        if done:
            self.broker.topics.invalidate()
            self.forget_read_only([p.topic_id for p in done])
            await self.refresh_read_only()
        return done
