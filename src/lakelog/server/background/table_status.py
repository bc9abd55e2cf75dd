"""The table topics' gauges (`lakelog_table_lag_records`, `_lag_seconds`, `_rows`,
`_snapshots`, by topic): every `table_status_interval_ms` the broker reads each table
topic's catalog row and current metadata JSON the way its REST catalog does (`CatalogRows`,
`rest_catalog.read_metadata`: no pyiceberg in the broker) and the partitions' offsets
from the coordinator, and applies `tables.lag`'s rule.

Every broker runs it: a pass is one topic listing, one offsets call, and per table one
indexed SELECT and one small object GET, so scraping any broker gives the figures, at a
cost that stays small. At most MAX_TABLES_PER_PASS tables per pass (further ones on the
next passes, in name order); a table that cannot be read is logged once until it can
again, and keeps no stale gauges; a pass that fails is logged and the next one retries."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from dataclasses import dataclass
from typing import Protocol

from prometheus_client import Gauge

from lakelog.coordinator import PartitionKey
from lakelog.coordinator.topic_types import TopicInfo
from lakelog.server.background.hosts import StorageHost
from lakelog.server.cluster.outage import log_failure
from lakelog.tables.catalog_rows import CatalogRows
from lakelog.tables.lag import next_offsets, snapshot_of, table_lag
from lakelog.tables.locations import StoreLocations
from lakelog.tables.rest_catalog import CATALOG_NAME, NAMESPACE, read_metadata
from lakelog.tables.table_config import MODE
from lakelog.util import metrics
from lakelog.util.errors import ErrorCode

log = logging.getLogger(__name__)

MAX_TABLES_PER_PASS = 200
"""Tables read per pass; with more table topics, the passes take turns over them."""
GAUGES = (
    metrics.table_lag_records,
    metrics.table_lag_seconds,
    metrics.table_rows,
    metrics.table_snapshots,
)


class TableStatusHost(StorageHost, Protocol):
    """What the table gauges use of the broker (the Broker is one)."""


@dataclass(frozen=True, slots=True)
class TableFigures:
    topic: str
    rows: int
    snapshots: int
    lag_records: int
    lag_seconds: float | None


def table_topics(topics: list[TopicInfo]) -> list[TopicInfo]:
    """Topics whose `lakelog.iceberg.mode` is set to something else than `disabled`, by name."""
    chosen = [t for t in topics if t.configs.get(MODE, "disabled").strip() != "disabled"]
    return sorted(chosen, key=lambda t: t.name)


class TableStatusLoop:
    def __init__(self, host: TableStatusHost) -> None:
        self.host = host
        self.rows = CatalogRows(host.settings.resolved_coordinator_url, CATALOG_NAME)
        self.locations = StoreLocations.from_storage_url(host.settings.resolved_storage_url)
        self._after = ""
        """The last table topic of the previous pass, when it had to stop early."""
        self._published: set[str] = set()
        self._failing: set[str] = set()

    async def run(self) -> None:
        interval = self.host.settings.table_status_interval_ms / 1000
        if interval <= 0:
            return
        while True:
            try:
                await self.run_once()
            except Exception:
                log_failure(log, "table status pass failed")
            await asyncio.sleep(interval)

    async def run_once(self) -> list[TableFigures]:
        """One pass: the figures published (also returned, for tests)."""
        everything = table_topics(await self.host.coordinator.get_topics(None))
        names = {t.name for t in everything}
        for gone in self._published - names:
            self._forget(gone)
        self._failing &= names
        chosen = [t for t in everything if t.name > self._after][:MAX_TABLES_PER_PASS]
        if len(chosen) < MAX_TABLES_PER_PASS:
            chosen += [t for t in everything if t.name <= self._after][
                : MAX_TABLES_PER_PASS - len(chosen)
            ]
        self._after = chosen[-1].name if len(everything) > MAX_TABLES_PER_PASS else ""
        bounds = await self._bounds(chosen)
        figures = []
        for topic in chosen:
            try:
                found = await self._figures(topic, bounds.get(topic.name, []))
            except Exception as exc:
                self._forget(topic.name)
                if topic.name not in self._failing:
                    self._failing.add(topic.name)
                    log.warning("cannot read table topic %s's table: %s", topic.name, exc)
                continue
            if topic.name in self._failing:
                self._failing.discard(topic.name)
                log.info("table topic %s's table is readable again", topic.name)
            self._publish(found)
            figures.append(found)
        return figures

    async def _bounds(self, topics: list[TopicInfo]) -> dict[str, list[tuple[int, int, int]]]:
        """Per topic, (partition, log start, last stable offset) of its partitions."""
        keys = [
            (t.name, PartitionKey(t.topic_id, p)) for t in topics for p in range(t.num_partitions)
        ]
        infos = await self.host.coordinator.log_info([k for _, k in keys]) if keys else []
        out: dict[str, list[tuple[int, int, int]]] = {}
        for (name, key), info in zip(keys, infos, strict=True):
            if info.error != ErrorCode.none:
                continue
            end = info.high_watermark
            if info.last_stable_offset >= 0:
                end = min(end, info.last_stable_offset)
            out.setdefault(name, []).append((key.partition, info.log_start_offset, end))
        return out

    async def _figures(self, topic: TopicInfo, bounds: list[tuple[int, int, int]]) -> TableFigures:
        location = await self.rows.metadata_location(NAMESPACE, topic.name)
        if location is None:  # no table yet: the whole topic waits
            lag = table_lag(bounds, {}, None, 0)
            return TableFigures(topic.name, 0, 0, lag.records, None)
        snap = snapshot_of(await read_metadata(self.host.storage, self.locations, location))
        nexts = next_offsets(snap.next_offsets, str(topic.topic_id))
        lag = table_lag(bounds, nexts, snap.last_commit_ms, int(time.time() * 1000))
        return TableFigures(topic.name, snap.rows, snap.snapshots, lag.records, lag.seconds)

    def _publish(self, f: TableFigures) -> None:
        metrics.table_rows.labels(f.topic).set(f.rows)
        metrics.table_snapshots.labels(f.topic).set(f.snapshots)
        metrics.table_lag_records.labels(f.topic).set(f.lag_records)
        if f.lag_seconds is None:
            _remove(metrics.table_lag_seconds, f.topic)
        else:
            metrics.table_lag_seconds.labels(f.topic).set(f.lag_seconds)
        self._published.add(f.topic)

    def _forget(self, topic: str) -> None:
        for gauge in GAUGES:
            _remove(gauge, topic)
        self._published.discard(topic)


def _remove(gauge: Gauge, topic: str) -> None:
    with contextlib.suppress(KeyError):
        gauge.remove(topic)
