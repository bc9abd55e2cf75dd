"""`lakelog pipeline gc`: delete orphaned objects and files marked for deletion.

1. Read the coordinator's known files and broadcast them to the executors.
2. List the store in parallel (Spark tasks over key ranges, see `listing`); each task
   keeps only the objects the coordinator does not know (a broadcast hash anti-join:
   no shuffle, and the driver receives only the unknown objects).
3. Orphans: unknown objects of our layout older than gc.orphan.grace.ms (a broker died
   between upload and commit, or its commit was refused). An object uploaded after step
   1 and committed since looks unknown, but it is younger than the grace period, and the
   last check (6) would see it known anyway.
4. Files marked for deletion whose marking is older than the file delete grace period.
5. Table topics' files under `tables/` that no Iceberg table references, older than the
   same grace (a tables job killed before its commit): `tables_gc`.
6. Just before deleting, every candidate is checked against the coordinator again
   (`planning.deletable`): an object any batch points into is never deleted. Deletes run
   on the executors, 1000 keys per request.
"""

from __future__ import annotations

import functools
import time
from typing import TYPE_CHECKING

from lakelog.log.storage.store import ObjectStorage
from lakelog.pipeline.context import JobContext
from lakelog.pipeline.distribute import run_in_waves
from lakelog.pipeline.listing import ListRange, is_local, list_range, list_ranges, plan_listing
from lakelog.pipeline.object_io import run_async
from lakelog.pipeline.planning import (
    ListedObject,
    chunked,
    deletable,
    file_delete_cutoff,
    find_orphans,
)
from lakelog.pipeline.progress import JobSummary

if TYPE_CHECKING:
    from pyspark import Broadcast

DELETE_CHUNK = 1000
"""Keys per last check and per delete request."""


def run_gc(ctx: JobContext) -> JobSummary:
    summary = JobSummary("gc", dry_run=ctx.dry_run)
    settings = ctx.settings
    ctx.progress.stage("reading the coordinator's files")
    known = ctx.run(ctx.coordinator.list_files())
    listed, unknown = _list_unknown(ctx, known)
    summary.objects_listed = listed
    now = int(time.time() * 1000)
    orphans = find_orphans(unknown, frozenset(), now, settings.gc_orphan_grace_ms)
    marked = ctx.run(
        ctx.coordinator.files_to_delete(file_delete_cutoff(now, settings.file_delete_grace_ms))
    )
    summary.details["orphans found"] = len(orphans)
    summary.details["marked files due"] = len(marked)
    summary.details["unknown but young"] = len(unknown) - len(orphans)
    tables_found, tables_deleted, tables_bytes = _table_orphans(ctx)
    summary.details["table orphans found"] = tables_found
    summary.nothing_to_do = not orphans and not marked and not tables_found
    if ctx.dry_run:
        summary.details["bytes to delete"] = sum(o.size for o in orphans) + sum(
            f.size for f in marked
        )
        return summary.finish()

    sizes = {o.key: o.size for o in orphans} | {f.object_key: f.size for f in marked}
    deleted_orphans = _delete_checked(ctx, [o.key for o in orphans], True, "deleting orphans")
    deleted_marked = _delete_checked(
        ctx, [f.object_key for f in marked], False, "deleting marked files"
    )
    if deleted_marked:
        ctx.run(ctx.coordinator.delete_files(deleted_marked))
    deleted = deleted_orphans + deleted_marked
    summary.objects_deleted = len(deleted) + tables_deleted
    summary.bytes_deleted = sum(sizes[key] for key in deleted) + tables_bytes
    summary.details["table orphans deleted"] = tables_deleted
    summary.details["orphans deleted"] = len(deleted_orphans)
    summary.details["kept at last check"] = len(orphans) + len(marked) - len(deleted)
    return summary.finish()


def _table_orphans(ctx: JobContext) -> tuple[int, int, int]:
    """Table topics' orphan files (`tables_gc`): only where the pipeline's pyiceberg is."""
    from lakelog.pipeline.tables_gc import delete_table_orphans

    return delete_table_orphans(ctx, ctx.settings.gc_orphan_grace_ms)


def _list_unknown(ctx: JobContext, known: list[str]) -> tuple[int, list[ListedObject]]:
    """(objects listed, those the coordinator does not know). A local store is listed on
    the driver (one directory walk, as one Spark task would do it), so a gc that finds
    nothing to delete starts no Spark session; remote stores are listed by Spark tasks
    over key ranges."""
    if is_local(ctx.storage_url):
        return _list_unknown_here(ctx, frozenset(known))
    context = ctx.spark.sparkContext
    ranges = plan_listing(
        ctx.storage, ctx.storage_url, int(time.time() * 1000), context.defaultParallelism
    )
    ctx.progress.stage("listing objects", total=len(ranges))
    shared = context.broadcast(frozenset(known))
    try:
        work = functools.partial(list_unknown, ctx.storage_url, shared)
        listed, unknown = 0, []
        for wave in run_in_waves(ctx, ranges, work):
            for count, objects in wave:
                listed += count
                unknown.extend(objects)
        return listed, unknown
    finally:
        shared.unpersist()


def _list_unknown_here(ctx: JobContext, known: frozenset[str]) -> tuple[int, list[ListedObject]]:
    ranges = plan_listing(ctx.storage, ctx.storage_url, int(time.time() * 1000), 1)
    ctx.progress.stage("listing objects", total=len(ranges))
    listed, unknown = 0, []
    for key_range in ranges:
        objects = list_range(ctx.storage, key_range)
        listed += len(objects)
        unknown.extend(o for o in objects if o.key not in known)
        ctx.progress.advance()
    return listed, unknown


def list_unknown(
    storage_url: str, known: Broadcast[frozenset[str]], ranges: list[ListRange]
) -> list[tuple[int, list[ListedObject]]]:
    """Spark task: list the ranges; per range (objects listed, objects not known)."""
    keys = known.value
    out = []
    for key_range in ranges:
        objects = list_ranges(storage_url, [key_range])
        out.append((len(objects), [o for o in objects if o.key not in keys]))
    return out


def _delete_checked(ctx: JobContext, keys: list[str], orphans: bool, stage: str) -> list[str]:
    """Check each chunk against the coordinator, then delete what passed on the executors."""
    ctx.progress.stage(f"{stage}: last check", total=len(keys))
    passed: list[str] = []
    for chunk in chunked(keys, DELETE_CHUNK):
        refs = ctx.run(ctx.coordinator.file_references(list(chunk)))
        passed.extend(deletable(refs, orphans))
        ctx.progress.advance(len(chunk))
    if passed:
        chunks = [list(c) for c in chunked(passed, DELETE_CHUNK)]
        ctx.progress.stage(stage, total=len(chunks))
        work = functools.partial(delete_objects, ctx.storage_url)
        for _ in run_in_waves(ctx, chunks, work):
            pass
    return passed


def delete_objects(storage_url: str, chunks: list[list[str]]) -> list[int]:
    """Spark task: delete the keys (missing ones are fine: another cleaner was first)."""
    storage = ObjectStorage.from_url(storage_url)

    async def delete_all() -> list[int]:
        for keys in chunks:
            await storage.delete_many(keys)
        return [len(keys) for keys in chunks]

    return run_async(delete_all())
