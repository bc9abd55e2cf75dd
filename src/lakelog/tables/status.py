"""A table topic's table as `lakelog topics describe` shows it: its name, snapshots, rows
and how far it lags behind the topic.

Cheap on purpose: rows are the current snapshot summary's `total-records` (no scan);
lag is `tables.lag`'s rule, shared with the broker's table gauges.
Needs the pipeline's pyiceberg (`lakelog[spark]`) and the cluster's coordinator and store.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

from lakelog.tables.catalog import NAMESPACE, open_catalog
from lakelog.tables.lag import NEXT_OFFSETS, next_offsets, table_lag

if TYPE_CHECKING:
    from lakelog.config import Settings
    from lakelog.spark.offsets import PartitionBounds


@dataclass(frozen=True, slots=True)
class TableStatus:
    table: str
    snapshots: int
    rows: int
    lag_records: int
    lag_seconds: float | None
    """None: the table has no commit yet."""

    def line(self) -> str:
        seconds = "-" if self.lag_seconds is None else f"{self.lag_seconds:.0f}"
        return (
            f"Table: {self.table}\tSnapshots: {self.snapshots}\tRows: {self.rows}\t"
            f"LagRecords: {self.lag_records}\tLagSeconds: {seconds}"
        )


def table_status(settings: Settings, topic: str) -> TableStatus:
    """The topic's table status (a table not created yet shows zeros and the whole topic
    as lag). Raises on an unreachable catalog or coordinator."""
    from pyiceberg.exceptions import NoSuchTableError

    catalog = open_catalog(settings)
    name = f"{NAMESPACE}.{topic}"
    try:
        table = catalog.load_table((NAMESPACE, topic))
    except NoSuchTableError:
        table = None
    raw: str | None = None
    snapshots = rows = 0
    last_commit_ms: int | None = None
    if table is not None:
        raw = table.properties.get(NEXT_OFFSETS)
        snapshots = len(table.metadata.snapshots)
        current = table.current_snapshot()
        if current is not None:
            rows = int(current.summary.additional_properties.get("total-records", 0))
            last_commit_ms = current.timestamp_ms
    bounds = asyncio.run(_bounds(settings, topic))
    topic_id = bounds[0].topic_id if bounds else None
    lag = table_lag(
        [(b.partition, b.log_start, b.end) for b in bounds],
        next_offsets(raw, topic_id),
        last_commit_ms,
        int(time.time() * 1000),
    )
    return TableStatus(name, snapshots, rows, lag.records, lag.seconds)


async def _bounds(settings: Settings, topic: str) -> list[PartitionBounds]:
    from lakelog.coordinator import open_coordinator
    from lakelog.spark.log_access import partition_bounds

    coordinator = open_coordinator(settings.resolved_coordinator_url)
    await coordinator.start()
    try:
        return await partition_bounds(coordinator, [topic], read_committed=True)
    finally:
        await coordinator.close()
