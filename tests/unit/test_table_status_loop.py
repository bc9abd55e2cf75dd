"""The broker's table gauges loop against a real SQLite coordinator and a local object
store: figures from a catalog row and its metadata JSON, lag from committed records, a
table whose metadata is gone logged once and its gauges removed."""

from __future__ import annotations

import json
import logging
import sqlite3
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from lakelog.config import Settings
from lakelog.coordinator import CommitBatch, CreateTopicRequest, TimestampType, open_coordinator
from lakelog.coordinator.interface import BatchCoordinator
from lakelog.coordinator.topic_types import TopicInfo
from lakelog.log.storage.store import ObjectStorage
from lakelog.server.background.table_status import TableStatusLoop
from lakelog.tables.locations import StoreLocations
from lakelog.util import metrics


@dataclass
class Host:
    settings: Settings
    coordinator: BatchCoordinator
    storage: ObjectStorage


@pytest.fixture
async def host(tmp_path: Path) -> AsyncIterator[Host]:
    settings = Settings(data_dir=tmp_path / "data")
    coordinator = open_coordinator(settings.resolved_coordinator_url)
    await coordinator.start()
    storage = ObjectStorage.from_url(settings.resolved_storage_url)
    yield Host(settings, coordinator, storage)
    await coordinator.close()


async def _table_topic(host: Host, name: str, records: int) -> TopicInfo:
    request = CreateTopicRequest(name, 1, 1, {"lakelog.iceberg.mode": "key_value"})
    [created] = await host.coordinator.create_topics([request])
    assert created.topic_id is not None
    batch = CommitBatch(created.topic_id, 0, 0, 10, records, 0, 0, TimestampType.CREATE_TIME)
    await host.coordinator.commit_file(f"inline/{name}", 1, -1, 10, [batch], inline=bytes(10))
    [info] = await host.coordinator.get_topics([name])
    return info


async def _write_table(
    host: Host, info: TopicInfo, metadata: dict | None, version: int = 1
) -> None:
    """A catalog row for `lakelog.<topic>` pointing at metadata file `version`, written
    unless `metadata` is None (files are never overwritten, as Iceberg's are not)."""
    locations = StoreLocations.from_storage_url(host.settings.resolved_storage_url)
    location = f"{locations.warehouse}/lakelog/{info.name}/metadata/{version:05d}.metadata.json"
    if metadata is not None:
        key = locations.key_of(location)
        assert key is not None
        await host.storage.put(key, [json.dumps(metadata).encode()])
    path = host.settings.resolved_coordinator_url.removeprefix("sqlite://")
    with sqlite3.connect(path) as conn:
        conn.execute(
            # The coordinator's migration made pyiceberg's SqlCatalog table.
            "INSERT OR REPLACE INTO iceberg_tables (catalog_name, table_namespace, table_name, "
            "metadata_location) VALUES ('lakelog', 'lakelog', ?, ?)",
            (info.name, location),
        )
    conn.close()


def _metadata(info: TopicInfo, next_offset: int, commit_ms: int) -> dict:
    nexts = json.dumps({"topic_id": str(info.topic_id), "next": {"0": next_offset}})
    return {
        "current-snapshot-id": 2,
        "snapshots": [
            {"snapshot-id": 1, "timestamp-ms": commit_ms - 10, "summary": {"total-records": "4"}},
            {"snapshot-id": 2, "timestamp-ms": commit_ms, "summary": {"total-records": "6"}},
        ],
        "properties": {"lakelog.next-offsets": nexts},
    }


def _gauge(gauge: object, topic: str) -> float | None:
    return metrics.REGISTRY.get_sample_value(gauge._name, {"topic": topic})  # type: ignore[attr-defined]


async def test_figures_from_the_catalog_metadata_and_offsets(host: Host) -> None:
    name = f"t{time.monotonic_ns()}"
    info = await _table_topic(host, name, 9)
    loop = TableStatusLoop(host)

    [before] = await loop.run_once()  # no table yet: the whole topic waits
    assert (before.rows, before.snapshots, before.lag_records, before.lag_seconds) == (
        0,
        0,
        9,
        None,
    )
    await _write_table(host, info, _metadata(info, 6, int(time.time() * 1000) - 5_000))
    [after] = await loop.run_once()
    assert (after.rows, after.snapshots, after.lag_records) == (6, 2, 3)
    assert after.lag_seconds is not None and after.lag_seconds >= 5
    assert _gauge(metrics.table_rows, name) == 6
    assert _gauge(metrics.table_lag_records, name) == 3

    await _write_table(host, info, _metadata(info, 9, int(time.time() * 1000)), version=2)
    [caught_up] = await loop.run_once()
    assert (caught_up.lag_records, caught_up.lag_seconds) == (0, 0.0)


async def test_an_unreadable_table_is_logged_once_and_loses_its_gauges(
    host: Host, caplog: pytest.LogCaptureFixture
) -> None:
    name = f"t{time.monotonic_ns()}"
    info = await _table_topic(host, name, 2)
    loop = TableStatusLoop(host)
    await _write_table(host, info, _metadata(info, 2, int(time.time() * 1000)))
    assert len(await loop.run_once()) == 1
    assert _gauge(metrics.table_rows, name) == 6

    await _write_table(host, info, None, version=2)  # the row now points at a missing file
    with caplog.at_level(logging.WARNING, logger="lakelog.server.background.table_status"):
        assert await loop.run_once() == []
        assert await loop.run_once() == []
    warnings = [r for r in caplog.records if name in r.getMessage()]
    assert len(warnings) == 1 and "missing" in warnings[0].getMessage()
    assert _gauge(metrics.table_rows, name) is None
    assert _gauge(metrics.table_lag_records, name) is None
