"""Table maintenance (`lakelog.tables.maintenance`) on a real pyiceberg SqlCatalog (SQLite)
with its warehouse on local files: expiry keeps the newest snapshots, the rewrite makes
fewer files with the same rows and the tables job's resume point, orphan cleanup deletes
only old unreferenced files."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pyarrow as pa
import pytest
from pyiceberg.catalog.sql import SqlCatalog
from pyiceberg.table import Table

from lakelog.tables.maintenance import MaintenanceSettings, maintain, referenced_files

SCHEMA = pa.schema([pa.field("offset", pa.int64(), nullable=False), pa.field("value", pa.string())])
NEXT = "lakelog.next-offsets"
NO_GRACE = MaintenanceSettings(keep_last_snapshots=1, orphan_grace_ms=0)


@pytest.fixture
def catalog(tmp_path: Path) -> SqlCatalog:
    warehouse = tmp_path / "objects" / "tables"
    warehouse.mkdir(parents=True)
    return SqlCatalog(
        "lakelog",
        uri=f"sqlite:///{tmp_path / 'coordinator.sqlite3'}",
        warehouse=warehouse.as_uri(),
    )


def appended(catalog: SqlCatalog, batches: int, per_batch: int = 3) -> Table:
    """`lakelog.t` after `batches` appends (one small file and one snapshot each), each
    recording the next offset as the tables job does."""
    catalog.create_namespace("lakelog")
    table = catalog.create_table("lakelog.t", schema=SCHEMA)
    for b in range(batches):
        offsets = range(b * per_batch, (b + 1) * per_batch)
        rows = pa.Table.from_pylist([{"offset": o, "value": f"v{o}"} for o in offsets], SCHEMA)
        table.append(rows, snapshot_properties={NEXT: json.dumps({"0": (b + 1) * per_batch})})
    return catalog.load_table("lakelog.t")


def offsets(table: Table) -> list[int]:
    return sorted(table.scan().to_arrow().column("offset").to_pylist())


def data_files(table: Table) -> list[str]:
    return [task.file.file_path for task in table.scan().plan_files()]


def test_expiry_keeps_the_newest_snapshots_and_removes_older_ones(catalog: SqlCatalog) -> None:
    table = appended(catalog, 4)
    snapshots = [s.snapshot_id for s in table.metadata.snapshots]
    settings = MaintenanceSettings(keep_last_snapshots=2)
    figures = maintain(
        catalog, "lakelog.t", settings, older_than_ms=int(time.time() * 1000) + 60_000,
        rewrite=False, orphans=False,
    )  # fmt: skip
    table = catalog.load_table("lakelog.t")
    assert figures["snapshots_expired"] == 2
    assert [s.snapshot_id for s in table.metadata.snapshots] == snapshots[-2:]
    assert table.current_snapshot().snapshot_id == snapshots[-1]
    assert offsets(table) == list(range(12))
    # Snapshots younger than the cutoff stay, however many there are.
    figures = maintain(
        catalog, "lakelog.t", settings, older_than_ms=0, rewrite=False, orphans=False
    )
    assert figures["snapshots_expired"] == 0
    assert len(catalog.load_table("lakelog.t").metadata.snapshots) == 2


def test_rewrite_makes_fewer_files_with_the_same_rows_and_resume_point(
    catalog: SqlCatalog,
) -> None:
    table = appended(catalog, 5)
    assert len(data_files(table)) == 5
    resume = table.current_snapshot().summary[NEXT]
    figures = maintain(catalog, "lakelog.t", older_than_ms=0, expire=False, orphans=False)
    table = catalog.load_table("lakelog.t")
    assert (figures["files_rewritten"], figures["files_written"]) == (5, 1)
    assert figures["rows_rewritten"] == 15
    assert len(data_files(table)) == 1
    assert offsets(table) == list(range(15))
    assert table.current_snapshot().summary[NEXT] == resume == json.dumps({"0": 15})
    # Nothing small enough left to combine: a second run changes nothing.
    again = maintain(catalog, "lakelog.t", older_than_ms=0, expire=False, orphans=False)
    assert again["files_rewritten"] == 0
    assert catalog.load_table("lakelog.t").current_snapshot().snapshot_id == (
        table.current_snapshot().snapshot_id
    )


def test_rewrite_keeps_deleted_rows_deleted(catalog: SqlCatalog) -> None:
    table = appended(catalog, 3)
    from pyiceberg.expressions import EqualTo

    table.delete(EqualTo("offset", 4))
    maintain(catalog, "lakelog.t", older_than_ms=0, expire=False, orphans=False)
    assert offsets(catalog.load_table("lakelog.t")) == [o for o in range(9) if o != 4]


def test_orphan_cleanup_deletes_old_unreferenced_files_only(
    catalog: SqlCatalog, tmp_path: Path
) -> None:
    table = appended(catalog, 3)
    root = Path(table.metadata.location.removeprefix("file://"))
    old_stray = root / "data" / "killed-run.parquet"
    new_stray = root / "data" / "being-written.parquet"
    for stray in (old_stray, new_stray):
        stray.write_bytes(b"PAR1 not committed")
    long_ago = time.time() - 7 * 24 * 3600
    os.utime(old_stray, (long_ago, long_ago))
    now_ms = int(time.time() * 1000)
    grace = MaintenanceSettings(orphan_grace_ms=3600_000)
    figures = maintain(catalog, "lakelog.t", grace, older_than_ms=0, now_ms=now_ms,
                       expire=False, rewrite=False)  # fmt: skip
    assert figures["orphans_deleted"] == 1
    assert not old_stray.exists() and new_stray.exists()
    table = catalog.load_table("lakelog.t")
    for location in referenced_files(table):
        assert Path(location.removeprefix("file://")).exists(), location
    assert offsets(table) == list(range(9))


def test_all_three_leave_one_snapshot_one_file_and_no_orphans(catalog: SqlCatalog) -> None:
    table = appended(catalog, 4)
    root = Path(table.metadata.location.removeprefix("file://"))
    future = int(time.time() * 1000) + 60_000
    figures = maintain(catalog, "lakelog.t", NO_GRACE, older_than_ms=future, now_ms=future)
    table = catalog.load_table("lakelog.t")
    assert figures["snapshots_expired"] == 3 and figures["files_rewritten"] == 4
    assert figures["orphans_deleted"] > 0
    # The newest append's snapshot (kept) and the rewrite's remain; the files on disk are
    # exactly the ones they reference.
    assert len(table.metadata.snapshots) == 2
    on_disk = {str(p) for p in root.rglob("*") if p.is_file()}
    wanted = {loc.removeprefix("file://") for loc in referenced_files(table)}
    assert on_disk == wanted
    assert len(data_files(table)) == 1
    assert offsets(table) == list(range(12))
    assert table.current_snapshot().summary[NEXT] == json.dumps({"0": 12})
