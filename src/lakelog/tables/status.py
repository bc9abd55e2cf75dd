"""A table topic's table as `lakelog topics describe` shows it: its name, snapshots, rows
and how far it lags behind the topic.

Cheap on purpose: rows are the current snapshot summary's `total-records` (no scan);
lag in records is the sum over partitions of the last stable offset minus the table's
next offset (markers and aborted records count, as they do in consumer lag); lag in
seconds is the age of the table's last commit while records are waiting (0 when none
are), an upper bound of how stale the table is, not the age of the oldest missing record.
Needs the pipeline's pyiceberg (`lakelog[spark]`) and the cluster's coordinator and store.
"""

from __future__ import annotations

import asyncio
import json
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

from lakelog.tables.catalog import NAMESPACE, open_catalog

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
    nexts: dict[int, int] = {}
    snapshots = rows = 0
    last_commit_ms: int | None = None
    if table is not None:
        raw = table.properties.get("lakelog.next-offsets")
        if raw:
            nexts = {int(p): int(o) for p, o in json.loads(raw)["next"].items()}
        snapshots = len(table.metadata.snapshots)
        current = table.current_snapshot()
        if current is not None:
            rows = int(current.summary.additional_properties.get("total-records", 0))
            last_commit_ms = current.timestamp_ms
    bounds = asyncio.run(_bounds(settings, topic))
    lag = sum(max(0, b.end - nexts.get(b.partition, b.log_start)) for b in bounds)
    seconds = None
    if last_commit_ms is not None:
        seconds = max(0.0, time.time() - last_commit_ms / 1000) if lag else 0.0
    return TableStatus(name, snapshots, rows, lag, seconds)


async def _bounds(settings: Settings, topic: str) -> list[PartitionBounds]:
    from lakelog.coordinator import open_coordinator
    from lakelog.spark.log_access import partition_bounds

    coordinator = open_coordinator(settings.resolved_coordinator_url)
    await coordinator.start()
    try:
        return await partition_bounds(coordinator, [topic], read_committed=True)
    finally:
        await coordinator.close()
