"""Maintenance of one Iceberg table (issue 33, item 5), with pyiceberg and pyarrow: for the
pipeline (`spark` extra), never the broker. Three steps, in this order, each reported in
the figures `maintain` returns:

1. **Expire snapshots** older than `older_than_ms`, always keeping the newest
   `keep_last_snapshots` and every branch or tag head (pyiceberg's ExpireSnapshots; it
   changes metadata only, the files go in step 3).
2. **Rewrite small data files**: the current snapshot's Parquet files under
   `small_file_bytes` (smallest first, at most `max_rewrite_bytes` of them) are read through
   pyiceberg's ArrowScan (current schema, delete files applied, so no deleted row comes
   back) and written again as few files, in one overwrite commit that removes them. The
   commit carries the latest snapshot's `lakelog.*` summary properties (the tables job's
   resume point `lakelog.next-offsets` among them), so a rewrite never moves the job back.
3. **Delete orphan files**: every file under the table's location that no live snapshot
   (manifest lists, manifests, data and delete files, statistics) nor the metadata log
   references, and older than the grace (`orphan_grace_ms`): a writer's files not yet
   committed are younger than that.

Run it while no tables job commits to the same table (the tables CLI sequences them): a
rewrite that raced a commit would fail pyiceberg's commit check and change nothing."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pyiceberg.catalog import Catalog
    from pyiceberg.table import FileScanTask, Table

LAKELOG_PROPERTY_PREFIX = "lakelog."
"""Snapshot summary properties of the tables job, carried over by a rewrite."""


@dataclass(frozen=True)
class MaintenanceSettings:
    keep_last_snapshots: int = 5
    """Snapshots kept whatever their age (at least 1: the current one)."""
    small_file_bytes: int = 32 * 1024 * 1024
    """Data files below this size are rewritten."""
    min_files_to_rewrite: int = 2
    """Fewer small files than this are left alone (one file cannot get fewer)."""
    max_rewrite_bytes: int = 1024 * 1024 * 1024
    """Bytes of small files read per run at most (they pass through memory)."""
    orphan_grace_ms: int = 3 * 24 * 3600 * 1000
    """Unreferenced files younger than this are kept (Iceberg's own default, 3 days)."""
    max_orphan_deletes: int = 100_000
    """Orphan files deleted per run at most."""


def maintain(
    catalog: Catalog,
    table_identifier: str | tuple[str, ...],
    settings: MaintenanceSettings | None = None,
    *,
    older_than_ms: int,
    now_ms: int | None = None,
    expire: bool = True,
    rewrite: bool = True,
    orphans: bool = True,
) -> dict[str, Any]:
    """Expire, rewrite and clean one table; the figures of each step."""
    settings = settings or MaintenanceSettings()
    now = int(time.time() * 1000) if now_ms is None else now_ms
    figures: dict[str, Any] = {}
    if expire:
        figures.update(
            expire_snapshots(catalog.load_table(table_identifier), settings, older_than_ms)
        )
    if rewrite:
        figures.update(rewrite_small_files(catalog.load_table(table_identifier), settings))
    if orphans:
        cutoff = now - settings.orphan_grace_ms
        figures.update(delete_orphan_files(catalog.load_table(table_identifier), settings, cutoff))
    return figures


def expire_snapshots(
    table: Table, settings: MaintenanceSettings, older_than_ms: int
) -> dict[str, Any]:
    snapshots = sorted(table.metadata.snapshots, key=lambda s: (s.timestamp_ms, s.sequence_number))
    keep = max(1, settings.keep_last_snapshots)
    protected = {ref.snapshot_id for ref in table.metadata.refs.values()}
    expired = [
        s.snapshot_id
        for s in snapshots[:-keep]
        if s.timestamp_ms < older_than_ms and s.snapshot_id not in protected
    ]
    if expired and not hasattr(table, "maintenance"):  # pyiceberg < 0.10: no ExpireSnapshots
        return {"snapshots_expired": 0, "expire_skipped": "pyiceberg has no ExpireSnapshots"}
    if expired:
        table.maintenance.expire_snapshots().by_ids(expired).commit()
    return {"snapshots_expired": len(expired), "snapshots_kept": len(snapshots) - len(expired)}


def _small_tasks(table: Table, settings: MaintenanceSettings) -> list[FileScanTask]:
    from pyiceberg.manifest import FileFormat

    chosen: list[FileScanTask] = []
    total = 0
    tasks = sorted(table.scan().plan_files(), key=lambda t: t.file.file_size_in_bytes)
    for task in tasks:
        size = task.file.file_size_in_bytes
        if task.file.file_format != FileFormat.PARQUET or size >= settings.small_file_bytes:
            continue
        if total + size > settings.max_rewrite_bytes and chosen:
            break
        chosen.append(task)
        total += size
    return chosen


def rewrite_small_files(table: Table, settings: MaintenanceSettings) -> dict[str, Any]:
    from pyiceberg.expressions import AlwaysTrue
    from pyiceberg.io.pyarrow import ArrowScan, _dataframe_to_data_files

    current = table.current_snapshot()
    if current is None:
        return {"files_rewritten": 0, "files_written": 0, "rows_rewritten": 0}
    tasks = _small_tasks(table, settings)
    if len(tasks) < max(2, settings.min_files_to_rewrite):
        return {"files_rewritten": 0, "files_written": 0, "rows_rewritten": 0}
    rows = ArrowScan(table.metadata, table.io, table.schema(), AlwaysTrue()).to_table(tasks)
    carried = {
        key: value
        for key, value in current.summary.additional_properties.items()
        if key.startswith(LAKELOG_PROPERTY_PREFIX)
    }
    transaction = table.transaction()
    written = 0
    with transaction.update_snapshot(snapshot_properties=carried).overwrite() as overwrite:
        for task in tasks:
            overwrite.delete_data_file(task.file)
        if rows.num_rows:
            # pyiceberg's own writer (what Table.append uses): current spec, target size.
            for data_file in _dataframe_to_data_files(
                table_metadata=transaction.table_metadata,
                write_uuid=overwrite.commit_uuid,
                df=rows,
                io=table.io,
            ):
                overwrite.append_data_file(data_file)
                written += 1
    transaction.commit_transaction()
    return {
        "files_rewritten": len(tasks),
        "files_written": written,
        "rows_rewritten": rows.num_rows,
        "bytes_rewritten": sum(t.file.file_size_in_bytes for t in tasks),
    }


def referenced_files(table: Table) -> set[str]:
    """Every file a live snapshot or the metadata log needs, as locations."""
    io = table.io
    metadata = table.metadata
    found: set[str] = {table.metadata_location}
    found.update(entry.metadata_file for entry in metadata.metadata_log)
    found.update(s.statistics_path for s in metadata.statistics)
    found.update(s.statistics_path for s in metadata.partition_statistics)
    seen_manifests: set[str] = set()
    for snapshot in metadata.snapshots:
        found.add(snapshot.manifest_list)
        for manifest in snapshot.manifests(io):
            found.add(manifest.manifest_path)
            if manifest.manifest_path in seen_manifests:
                continue
            seen_manifests.add(manifest.manifest_path)
            for entry in manifest.fetch_manifest_entry(io, discard_deleted=True):
                found.add(entry.data_file.file_path)
    return found


def delete_orphan_files(
    table: Table, settings: MaintenanceSettings, older_than_ms: int
) -> dict[str, Any]:
    from pyarrow.fs import FileSelector, FileType
    from pyiceberg.io.pyarrow import PyArrowFileIO

    io = table.io
    if not isinstance(io, PyArrowFileIO):
        return {"orphans_deleted": 0, "orphans_skipped": "the table's FileIO is not pyarrow's"}
    scheme, netloc, root = PyArrowFileIO.parse_location(table.metadata.location)
    if root.rstrip("/") in ("", netloc):  # never the whole bucket or filesystem
        return {"orphans_deleted": 0, "orphans_skipped": "the table has no location of its own"}
    keep = {PyArrowFileIO.parse_location(loc)[2] for loc in referenced_files(table)}
    fs = io.fs_by_scheme(scheme, netloc)
    listing = fs.get_file_info(FileSelector(root.rstrip("/"), recursive=True, allow_not_found=True))
    deleted = young = 0
    for info in listing:
        if info.type != FileType.File or info.path in keep:
            continue
        mtime = info.mtime
        if mtime is None or int(mtime.timestamp() * 1000) >= older_than_ms:
            young += 1
            continue
        if deleted >= settings.max_orphan_deletes:
            break
        fs.delete_file(info.path)
        deleted += 1
    return {"orphans_deleted": deleted, "orphans_young": young, "files_referenced": len(keep)}
