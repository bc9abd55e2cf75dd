"""Orphan files of table topics, for `lakelog pipeline gc`.

A tables job killed before or during its commit leaves data files (and maybe a metadata
file) that no table references: the rerun writes the range again under new names, so
they would stay forever. Here: every object under `tables/` that no table of the catalog
references (the metadata file and its log, every snapshot's manifest list, manifests and
the data and delete files they list, statistics files) and that is older than
gc.orphan.grace.ms is deleted. The grace covers a job that is writing or committing right
now: its files are young. The listing and the deletes run on the driver: one table's
files are few compared with the WAL objects the rest of gc handles.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from lakelog.log.storage.store import ObjectStorage
from lakelog.pipeline.context import JobContext
from lakelog.tables.catalog import DLQ_NAMESPACE, NAMESPACE, TABLES_PREFIX, open_catalog

if TYPE_CHECKING:
    from pyiceberg.table import Table

DELETE_CHUNK = 1000


def referenced_paths(table: Table) -> set[str]:
    """Every file the table's metadata references, as full URIs."""
    io = table.io
    metadata = table.metadata
    paths = {table.metadata_location}
    paths |= {entry.metadata_file for entry in metadata.metadata_log}
    paths |= {s.statistics_path for s in metadata.statistics}
    paths |= {s.statistics_path for s in metadata.partition_statistics}
    manifests: set[str] = set()
    for snapshot in metadata.snapshots:
        paths.add(snapshot.manifest_list)
        for manifest in snapshot.manifests(io):
            if manifest.manifest_path in manifests:
                continue
            manifests.add(manifest.manifest_path)
            for entry in manifest.fetch_manifest_entry(io, discard_deleted=False):
                paths.add(entry.data_file.file_path)
    return paths | manifests


def _catalog_tables(ctx: JobContext) -> list[Table]:
    catalog = open_catalog(ctx.settings)
    tables = []
    for namespace in (NAMESPACE, DLQ_NAMESPACE):
        if (namespace,) not in catalog.list_namespaces():
            continue
        for identifier in catalog.list_tables(namespace):
            tables.append(catalog.load_table(identifier))
    return tables


def table_orphans(ctx: JobContext, now_ms: int, grace_ms: int) -> list[tuple[str, int]]:
    """(key, size) of objects under tables/ that no table references, older than the grace."""
    storage = ObjectStorage.from_url(ctx.storage_url)
    listed = ctx.run(storage.list(TABLES_PREFIX))
    if not listed:
        return []
    root = ctx.settings.resolved_storage_url.split("?")[0].rstrip("/")
    referenced: set[str] = set()
    for table in _catalog_tables(ctx):
        referenced |= {p.removeprefix(root + "/") for p in referenced_paths(table)}
    return [
        (o.key, o.size)
        for o in listed
        if o.key not in referenced and now_ms - o.last_modified_ms >= grace_ms
    ]


def delete_table_orphans(ctx: JobContext, grace_ms: int) -> tuple[int, int, int]:
    """(orphans found, deleted, bytes deleted); nothing is deleted on a dry run."""
    orphans = table_orphans(ctx, int(time.time() * 1000), grace_ms)
    if ctx.dry_run or not orphans:
        return len(orphans), 0, 0
    keys = [key for key, _ in orphans]
    storage = ObjectStorage.from_url(ctx.storage_url)
    for start in range(0, len(keys), DELETE_CHUNK):
        ctx.run(storage.delete_many(keys[start : start + DELETE_CHUNK]))
    return len(orphans), len(keys), sum(size for _, size in orphans)
