"""The console's one background task: every interval, scrape each broker's /metrics and poll
group and topic offsets, and append what the charts draw to the bounded `History`.

Rates come from counter deltas between two scrapes of the same broker (a broker restart
resets its counters; `cost.counter_delta` counts that as Prometheus' `increase()` does).
A failed scrape or admin call is remembered and shown, never raised: a chart with a gap
is better than a console that stops."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import time
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, field

from prometheus_client.parser import text_string_to_metric_families

from lakelog.admin.client import AdminClient
from lakelog.admin.wire import KafkaError
from lakelog.cli import cost_model as cost
from lakelog.cli.common import UserError
from lakelog.cli.console import reads
from lakelog.cli.console.connection import ClusterAccess
from lakelog.cli.console.history import History
from lakelog.cli.console.tables import merge, table_figures
from lakelog.cli.cost import Scrape, metrics_endpoints, metrics_url, scrape

log = logging.getLogger(__name__)

MAX_GROUPS_SAMPLED = 200
MAX_TOPICS_SAMPLED = 500
MAX_PARTITIONS_CHARTED = 32
"""Per group, the partitions whose lag gets its own series."""
COST_WINDOW_S = 600.0
"""The cost page projects from the last ten minutes of counters."""
DISCOVERY_EVERY_S = 60.0
MAX_ERRORS = 20
MAX_TABLES = 1000
"""Table topics whose figures the console keeps (the brokers publish at most one set per
table topic)."""
BACKGROUND_COUNTERS = {
    "lakelog_retention_deleted_batches_total": "retention_batches_per_hour",
    "lakelog_files_deleted_total": "files_deleted_per_hour",
    "lakelog_wal_objects_total": "wal_objects_per_hour",
}
GAUGES = frozenset(
    {
        "lakelog_connections",
        "lakelog_transactions_open",
        "lakelog_mirror_lag_records",
        "lakelog_mirror_lag_seconds",
        "lakelog_cache_bytes",
        "lakelog_wal_buffers_in_flight",
    }
)


@dataclass(frozen=True, slots=True)
class BrokerScrape:
    monotonic: float
    wall: float
    counters: cost.Series


def gauges(text: str) -> cost.Series:
    """The gauge samples the console charts, by (name, sorted labels)."""
    out: cost.Series = {}
    for family in text_string_to_metric_families(text):
        if family.type == "gauge" and family.name in GAUGES:
            for sample in family.samples:
                out[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return out


def total(series: cost.Series, name: str, **match: str) -> float:
    return sum(
        value
        for (n, labels), value in series.items()
        if n == name and all(dict(labels).get(k) == v for k, v in match.items())
    )


def by_label(series: cost.Series, name: str, label: str) -> dict[str, float]:
    out: dict[str, float] = {}
    for (n, labels), value in series.items():
        if n == name:
            key = dict(labels).get(label, "")
            out[key] = out.get(key, 0.0) + value
    return out


@dataclass
class TickTotals:
    """What one tick's scrapes add up to over the brokers."""

    usages: list[cost.Usage] = field(default_factory=list)
    cache_hits: float = 0.0
    cache_misses: float = 0.0
    background_per_hour: dict[str, float] = field(default_factory=dict)
    mirror_bytes_per_s: dict[str, float] = field(default_factory=dict)
    gauges: cost.Series = field(default_factory=dict)
    zone: dict[tuple[str, str, str], float] = field(default_factory=dict)

    def add_delta(self, delta: cost.Series, seconds: float) -> None:
        """One broker's counter increase over `seconds`."""
        self.usages.append(cost.usage_from_series(delta, seconds))
        self.cache_hits += total(delta, "lakelog_cache_hits_total")
        self.cache_misses += total(delta, "lakelog_cache_misses_total")
        for name in BACKGROUND_COUNTERS:
            per_hour = total(delta, name) * 3600 / seconds
            self.background_per_hour[name] = self.background_per_hour.get(name, 0.0) + per_hour
        for mirror, value in by_label(delta, "lakelog_mirror_bytes_total", "mirror").items():
            self.mirror_bytes_per_s[mirror] = self.mirror_bytes_per_s.get(mirror, 0.0) + (
                value / seconds
            )

    def add_gauges(self, series: cost.Series) -> None:
        for key, value in series.items():
            self.gauges[key] = self.gauges.get(key, 0.0) + value

    def add_zones(self, counters: cost.Series) -> None:
        """Bytes since start by (direction, client zone, broker zone)."""
        for (name, labels), value in counters.items():
            if name == "lakelog_zone_bytes_total":
                d = dict(labels)
                key = (d.get("direction", ""), d.get("client_zone", ""), d.get("broker_zone", ""))
                self.zone[key] = self.zone.get(key, 0.0) + value


class Sampler:
    def __init__(
        self,
        access: ClusterAccess,
        history: History,
        interval_s: float,
        metrics: Iterable[str] = (),
    ) -> None:
        self.access = access
        self.history = history
        self.interval_s = interval_s
        self._fixed_urls = [metrics_url(m) for m in metrics]
        self.urls: list[str] = list(self._fixed_urls)
        self.silent_brokers: list[str] = []
        self._discovered_at = -math.inf
        window = max(2, math.ceil(COST_WINDOW_S / interval_s) + 1)
        self._scrapes: dict[str, deque[BrokerScrape]] = {}
        self._window = window
        self._offsets: dict[str, tuple[float, int, int]] = {}
        """topic -> (monotonic, sum of log ends, sum of bytes) at the last tick."""
        self.errors: deque[tuple[float, str]] = deque(maxlen=MAX_ERRORS)
        self.zone_bytes: dict[tuple[str, str, str], float] = {}
        self.tables: dict[str, dict[str, float]] = {}
        """Table topic -> its table's figures from the last scrapes (`console.tables`)."""
        self.ticks = 0
        self._task: asyncio.Task[None] | None = None

    # ------------------------------------------------------------------ lifecycle

    def start(self) -> None:
        self._task = asyncio.create_task(self._run(), name="console-sampler")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    async def _run(self) -> None:
        while True:
            started = time.monotonic()
            try:
                await self.tick()
            except Exception as exc:  # the sampler must outlive any one bad tick
                self._error(f"sampling failed: {exc!r}")
                log.exception("console sampler tick failed")
            await asyncio.sleep(max(0.5, self.interval_s - (time.monotonic() - started)))

    def _error(self, message: str) -> None:
        self.errors.append((time.time(), message))

    # ------------------------------------------------------------------ one tick

    async def tick(self) -> None:
        client: AdminClient | None = None
        try:
            client = await self.access.admin()
        except (KafkaError, OSError, TimeoutError, asyncio.IncompleteReadError) as exc:
            self._error(f"cannot reach {self.access.bootstrap}: {exc}")
        try:
            if client is not None:
                await self._discover(client)
            await self._scrape_metrics()
            if client is not None:
                await self._sample_groups(client)
                await self._sample_topics(client)
        finally:
            if client is not None:
                await client.close()
        self.ticks += 1

    async def _discover(self, client: AdminClient) -> None:
        if self._fixed_urls or time.monotonic() - self._discovered_at < DISCOVERY_EVERY_S:
            return
        try:
            urls, silent = await metrics_endpoints(client)
        except (UserError, KafkaError, OSError, TimeoutError) as exc:
            self._error(f"cannot find the brokers' /metrics: {exc}")
            return
        self.urls, self.silent_brokers = urls, silent
        self._discovered_at = time.monotonic()
        for gone in set(self._scrapes) - set(urls):
            del self._scrapes[gone]

    async def _scrape_metrics(self) -> None:
        if not self.urls:
            return
        results = await asyncio.gather(
            *(asyncio.to_thread(scrape, url) for url in self.urls), return_exceptions=True
        )
        now = time.time()
        totals = TickTotals()
        tables: list[dict[str, dict[str, float]]] = []
        for url, result in zip(self.urls, results, strict=True):
            up = isinstance(result, Scrape)
            self.history.add(f"broker.up/{url}", now, 1 if up else 0)
            if not isinstance(result, Scrape):
                self._error(str(result))
                continue
            try:
                counters = cost.parse_metrics(result.text)
                totals.add_gauges(gauges(result.text))
                tables.append(table_figures(result.text))
            except ValueError as exc:
                self._error(f"{url}: not Prometheus text: {exc}")
                continue
            totals.add_zones(counters)
            current = BrokerScrape(result.monotonic, result.wall, counters)
            scrapes = self._scrapes.setdefault(url, deque(maxlen=self._window))
            if scrapes and current.monotonic > scrapes[-1].monotonic:
                seconds = current.monotonic - scrapes[-1].monotonic
                totals.add_delta(cost.counter_delta(scrapes[-1].counters, counters), seconds)
            scrapes.append(current)
        self.zone_bytes = totals.zone
        if tables:  # no broker answered: keep the last figures rather than none
            self.tables = dict(sorted(merge(tables).items())[:MAX_TABLES])
            for topic, figures in self.tables.items():
                if "lag_records" in figures:
                    self.history.add(f"table.lag_records/{topic}", now, figures["lag_records"])
        self._record(now, totals)

    def _record(self, now: float, totals: TickTotals) -> None:
        """One point per cluster-wide series: rates summed over the brokers."""
        add = self.history.add
        if totals.usages:
            usage = cost.sum_usage(totals.usages)
            add("cluster.bytes_in_per_s", now, usage.bytes_in)
            add("cluster.bytes_out_per_s", now, usage.bytes_out)
            add("cluster.put_bytes_per_s", now, usage.object_put_bytes)
            add("cluster.cross_zone_bytes_per_s", now, usage.cross_zone_bytes)
            add("cluster.puts_per_hour", now, usage.put_class_requests * 3600)
            add("cluster.gets_per_hour", now, usage.get_class_requests * 3600)
            for name, per_hour in totals.background_per_hour.items():
                add(f"cluster.{BACKGROUND_COUNTERS[name]}", now, per_hour)
            if totals.cache_hits + totals.cache_misses > 0:
                lookups = totals.cache_hits + totals.cache_misses
                add("cluster.cache_hit_ratio", now, 100 * totals.cache_hits / lookups)
            for mirror, per_s in totals.mirror_bytes_per_s.items():
                add(f"mirror.bytes_per_s/{mirror}", now, per_s)
        if totals.gauges:
            add("cluster.connections", now, total(totals.gauges, "lakelog_connections"))
            add("cluster.transactions_open", now, total(totals.gauges, "lakelog_transactions_open"))
            lag = by_label(totals.gauges, "lakelog_mirror_lag_records", "mirror")
            for mirror, records in lag.items():
                add(f"mirror.lag_records/{mirror}", now, records)

    async def _sample_groups(self, client: AdminClient) -> None:
        try:
            listed = sorted(await client.list_groups(), key=lambda g: g.group_id)
        except (KafkaError, OSError, TimeoutError) as exc:
            self._error(f"cannot list groups: {exc}")
            return
        now = time.time()
        for g in listed[:MAX_GROUPS_SAMPLED]:
            try:
                lags = await reads.group_lags(client, g.group_id)
            except (KafkaError, OSError, TimeoutError) as exc:
                self._error(f"group {g.group_id}: {exc}")
                continue
            self.history.add(f"group.lag/{g.group_id}", now, sum(lags.values()))
            for (topic, partition), lag in sorted(lags.items())[:MAX_PARTITIONS_CHARTED]:
                self.history.add(f"group.partition_lag/{g.group_id}/{topic}/{partition}", now, lag)

    async def _sample_topics(self, client: AdminClient) -> None:
        try:
            described = (await client.describe_topics(None))[:MAX_TOPICS_SAMPLED]
            parts = [(t.name, p.partition) for t in described for p in t.partitions]
            ends = await reads.log_ends(client, parts)
            sizes = await reads.log_sizes(
                client, {t.name: [p.partition for p in t.partitions] for t in described}
            )
        except (KafkaError, OSError, TimeoutError) as exc:
            self._error(f"cannot read topic offsets: {exc}")
            return
        now, mono = time.time(), time.monotonic()
        seen: dict[str, tuple[float, int, int]] = {}
        for t in described:
            tps = [(t.name, p.partition) for p in t.partitions]
            end = sum(ends.get(tp, 0) for tp in tps)
            size = sum(sizes.get(tp, 0) for tp in tps)
            seen[t.name] = (mono, end, size)
            before = self._offsets.get(t.name)
            if before is not None and mono > before[0]:
                seconds = mono - before[0]
                self.history.add(
                    f"topic.records_per_s/{t.name}", now, max(0, end - before[1]) / seconds
                )
                self.history.add(
                    f"topic.bytes_per_s/{t.name}", now, max(0, size - before[2]) / seconds
                )
        self._offsets = seen

    # ------------------------------------------------------------------ cost

    def usage_window(self) -> tuple[cost.Usage, dict[str, float]] | None:
        """Cluster rates over the oldest and newest scrape each broker has in the window."""
        usages, seconds = [], {}
        for url, scrapes in self._scrapes.items():
            if len(scrapes) < 2:
                continue
            first, last = scrapes[0], scrapes[-1]
            elapsed = last.monotonic - first.monotonic
            if elapsed <= 0:
                continue
            usages.append(
                cost.usage_from_series(cost.counter_delta(first.counters, last.counters), elapsed)
            )
            seconds[url] = elapsed
        if not usages:
            return None
        return cost.sum_usage(usages), seconds
