"""`lakelog pipeline tables --maintain`: keep table topics' Iceberg tables healthy.

A table the tables job appends to every few seconds gathers one snapshot and a few small
data files per pass. Maintenance, per table (the topic's and its dead-letter table):
expires snapshots older than `--expire-older-than-ms` (keeping the newest few), rewrites
small data files into bigger ones (keeping the `lakelog.next-offsets` resume point), and
deletes files under the table's location that no live snapshot references once they are
older than Iceberg's usual 3-day grace (`tables/maintenance.py` does each step).

It runs in the pipeline job's driver, table after table: each step is one pyiceberg commit
over a bounded amount of data (`MaintenanceSettings.max_rewrite_bytes`), so no executor is
needed. A commit that races the tables job fails cleanly (pyiceberg's optimistic check on
the metadata location) and the next run tries again.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

from lakelog.pipeline.context import JobContext
from lakelog.pipeline.progress import JobSummary
from lakelog.pipeline.tables import table_topics
from lakelog.tables.catalog import DLQ_NAMESPACE, NAMESPACE, open_catalog
from lakelog.tables.maintenance import maintain

DEFAULT_EXPIRE_OLDER_THAN_MS = 5 * 24 * 3600 * 1000
"""Iceberg's own default snapshot age limit (history.expire.max-snapshot-age-ms, 5 days)."""


def run_table_maintenance(
    ctx: JobContext,
    topics: Sequence[str] | None = None,
    *,
    expire_older_than_ms: int = DEFAULT_EXPIRE_OLDER_THAN_MS,
) -> JobSummary:
    summary = JobSummary("tables-maintain")
    ctx.progress.stage("reading the catalog")
    chosen = table_topics(ctx, topics)
    if not chosen:
        summary.nothing_to_do = True
        return summary.finish()
    catalog = open_catalog(ctx.settings)
    now = int(time.time() * 1000)
    tables = 0
    ctx.progress.stage("maintaining tables", total=len(chosen))
    for info, _spec in chosen:
        for namespace in (NAMESPACE, DLQ_NAMESPACE):
            identifier = (namespace, info.name)
            if not catalog.table_exists(identifier):
                continue
            tables += 1
            figures = maintain(
                catalog, identifier, older_than_ms=now - expire_older_than_ms, now_ms=now
            )
            for name, value in figures.items():
                if isinstance(value, int):
                    summary.details[name] = int(summary.details.get(name, 0)) + value
                else:
                    summary.details[name] = value
        ctx.progress.advance()
    summary.details["tables"] = tables
    summary.objects_deleted = int(summary.details.get("orphans_deleted", 0))
    summary.objects_written = int(summary.details.get("files_written", 0))
    summary.bytes_rewritten = int(summary.details.pop("bytes_rewritten", 0))
    return summary.finish()
