"""How far a table topic's table lags behind the topic, from numbers alone: one rule for
`lakelog topics describe` (through pyiceberg) and the broker's table gauges (through the
metadata JSON), so the two never disagree.

Records: the sum over partitions of the readable end (the last stable offset: a table
only ever holds committed records) minus the table's next offset for that partition, its
log start when the table has none (markers and aborted records count, as in consumer
lag). Seconds: the age of the table's last commit while records wait, 0 when none do.
That is an upper bound of how stale the table is, not the age of the oldest missing
record, chosen because it needs no read of the log (finding the oldest missing record's
timestamp would fetch a batch per partition from the object store on every pass)."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

NEXT_OFFSETS = "lakelog.next-offsets"
"""The table property (and snapshot summary key) each commit of the tables job writes."""


@dataclass(frozen=True, slots=True)
class Lag:
    records: int
    seconds: float | None
    """None: the table has no commit yet (no age to measure)."""


@dataclass(frozen=True, slots=True)
class Snapshot:
    """What the gauges need of a table's current metadata."""

    snapshots: int
    rows: int
    last_commit_ms: int | None
    next_offsets: str | None
    """The raw `lakelog.next-offsets` property, None when absent."""


def next_offsets(raw: str | None, topic_id: str | None = None) -> dict[int, int]:
    """Partition -> next offset from the property's JSON; empty when absent, unreadable,
    or written for another topic of the same name (deleted and created again): that
    table's offsets say nothing about the new topic's log."""
    if not raw:
        return {}
    try:
        doc = json.loads(raw)
        if topic_id is not None and str(doc.get("topic_id")) != topic_id:
            return {}
        return {int(p): int(o) for p, o in doc["next"].items()}
    except (ValueError, TypeError, KeyError, AttributeError):
        return {}


def table_lag(
    bounds: Iterable[tuple[int, int, int]],
    nexts: Mapping[int, int],
    last_commit_ms: int | None,
    now_ms: int,
) -> Lag:
    """`bounds`: (partition, log start, last stable offset) of each partition."""
    records = sum(max(0, end - max(nexts.get(p, start), start)) for p, start, end in bounds)
    if last_commit_ms is None:
        return Lag(records, None)
    seconds = max(0.0, (now_ms - last_commit_ms) / 1000) if records else 0.0
    return Lag(records, seconds)


def snapshot_of(metadata: Mapping[str, Any]) -> Snapshot:
    """Snapshot count, rows (the current snapshot summary's `total-records`: no scan) and
    last commit time from an Iceberg metadata JSON document. Tolerant: a field of the
    wrong shape counts as missing."""
    snapshots = metadata.get("snapshots")
    listed = [s for s in snapshots if isinstance(s, dict)] if isinstance(snapshots, list) else []
    current_id = metadata.get("current-snapshot-id")
    current = next((s for s in listed if s.get("snapshot-id") == current_id), None)
    rows = 0
    last_commit_ms: int | None = None
    if current is not None:
        summary = current.get("summary")
        if isinstance(summary, dict):
            rows = _int(summary.get("total-records"))
        stamp = current.get("timestamp-ms")
        last_commit_ms = stamp if isinstance(stamp, int) else None
    properties = metadata.get("properties")
    raw = properties.get(NEXT_OFFSETS) if isinstance(properties, dict) else None
    return Snapshot(len(listed), rows, last_commit_ms, raw if isinstance(raw, str) else None)


def _int(value: Any) -> int:
    try:
        return int(value)
    except (TypeError, ValueError):
        return 0
