"""Table maintenance on the pass's backend (SQLite + files, or PostgreSQL + S3 on moto):
after expiry, the small-file rewrite and orphan cleanup, the table read through the
broker's REST catalog (pyiceberg and DuckDB) holds the same rows in one data file, and the
object store holds exactly the files the table references."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Iterator

import pyarrow as pa
import pytest
from e2e_fixtures import FAST_COMMITS, warn_tracebacks
from e2e_harness import BrokerProcess
from iceberg_support import SCHEMA, duckdb_connection, duckdb_rows, sorted_rows, sql_catalog
from pyiceberg.catalog import load_catalog

from lakelog.log.storage.store import ObjectStorage
from lakelog.tables.locations import StoreLocations
from lakelog.tables.maintenance import MaintenanceSettings, maintain, referenced_files

NEXT = "lakelog.next-offsets"


@pytest.fixture
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    proc = BrokerProcess(
        tmp_path_factory.mktemp("iceberg-maint") / "data",
        env=FAST_COMMITS,
        registry=True,
        name="iceberg-maint",
    )
    proc.start()
    try:
        yield proc
    finally:
        proc.close()
        warn_tracebacks(proc)


def stored_keys(proc: BrokerProcess, prefix: str) -> set[str]:
    """The files under `prefix`, without the empty directory markers pyarrow's S3
    filesystem leaves for a folder it emptied."""
    storage = ObjectStorage.from_url(proc.backend.storage_url)
    return {o.key for o in asyncio.run(storage.list(prefix)) if o.size > 0}


def test_maintenance_leaves_the_same_rows_and_only_referenced_files(broker: BrokerProcess) -> None:
    catalog = sql_catalog(broker)
    catalog.create_namespace("lakelog")
    table = catalog.create_table("lakelog.events", schema=SCHEMA)
    rows = []
    for b in range(4):
        batch = [{"offset": o, "key": f"k{o}", "value": b"v"} for o in range(b * 5, b * 5 + 5)]
        table.append(
            pa.Table.from_pylist(batch, schema=SCHEMA),
            snapshot_properties={NEXT: json.dumps({"0": b * 5 + 5})},
        )
        rows += batch
    locations = StoreLocations.from_storage_url(broker.backend.storage_url)
    table_key = locations.key_of(catalog.load_table("lakelog.events").metadata.location)
    assert table_key is not None
    stray = f"{table_key}/data/killed-run-00000.parquet"
    storage = ObjectStorage.from_url(broker.backend.storage_url)
    asyncio.run(storage.put(stray, [b"PAR1 never committed"]))

    # A clock an hour ahead: every snapshot is old and no file is within the grace.
    later = int(time.time() * 1000) + 3600_000
    settings = MaintenanceSettings(keep_last_snapshots=1, orphan_grace_ms=0)
    figures = maintain(catalog, "lakelog.events", settings, older_than_ms=later, now_ms=later)
    assert (figures["snapshots_expired"], figures["files_rewritten"]) == (3, 4)
    assert stray not in stored_keys(broker, table_key)
    # The rewrite's input files stay referenced by the newest append's snapshot; a second
    # pass expires that snapshot and deletes them.
    figures = maintain(catalog, "lakelog.events", settings, older_than_ms=later, now_ms=later)
    assert figures["snapshots_expired"] == 1 and figures["orphans_deleted"] >= 4
    table = catalog.load_table("lakelog.events")
    wanted = {locations.key_of(location) for location in referenced_files(table)}
    assert stored_keys(broker, table_key) == wanted
    assert len(table.metadata.snapshots) == 1
    assert table.current_snapshot().summary[NEXT] == json.dumps({"0": 20})

    uri = broker.registry_url + "/iceberg"
    served = load_catalog("after-maintenance", type="rest", uri=uri).load_table("lakelog.events")
    assert len(list(served.scan().plan_files())) == 1
    assert sorted_rows(served.scan().to_arrow().to_pylist()) == sorted_rows(rows)
    con = duckdb_connection()
    con.execute(
        f"ATTACH 'lakelog' AS lake (TYPE iceberg, ENDPOINT '{uri}', AUTHORIZATION_TYPE 'none')"
    )
    assert sorted_rows(duckdb_rows(con, "lake", "events")) == sorted_rows(rows)
    con.close()
