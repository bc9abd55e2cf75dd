"""`lakelog pipeline merge`: rewrite small or fragmented WAL objects into read-optimized
per-partition segment objects, and swap the coordinates with `commit_merge`.

Segment object format: a plain concatenation of the partition's record batches v2 in
offset order, each with its real base offset written in (the bytes of a Kafka log
segment), so a segment is readable without the coordinator. Adjacent plain batches share
one coordinator row up to merge.row.max.bytes (`planning.join_runs`): the row's byte range
holds them back to back and fetch serves it as it is (see `protocol.batch_runs`), so
merging shrinks the coordinator's metadata as well as the object count.

Consumers reading during a merge see no gap and no duplicate: offsets never change, a
batch's coordinates switch atomically, and the old objects stay readable until they are
marked (once they hold no live batch) and past the file delete grace period.

Inline files (issue 32, small writes kept in the coordinator) are moved first, whoever
wrote them and however young (`inline_move`): the brokers normally do it, and this
finishes the job when they are gone. The moved batches land in a WAL object that later
merges pick up like any other."""

from __future__ import annotations

import functools
import time
from dataclasses import dataclass

import crc32c

from lakelog.coordinator.pipeline_types import BatchMove, FileBatch, FileInfo, MergeCommit
from lakelog.log.protocol.batch_runs import batches_in_range
from lakelog.log.protocol.records import (
    ATTRIBUTES_OFFSET,
    InvalidBatch,
    base_offset_bytes,
    read_header,
)
from lakelog.log.storage.keys import SEGMENT_PREFIX, WAL_PREFIX, offsets_in_headers, segment_key
from lakelog.log.storage.store import ObjectStorage
from lakelog.pipeline.context import JobContext
from lakelog.pipeline.distribute import run_in_waves
from lakelog.pipeline.inline_move import move_inline_files
from lakelog.pipeline.object_io import ByteRange, read_ranges, run_async
from lakelog.pipeline.planning import (
    MergePolicy,
    SegmentPlan,
    chunked,
    is_merge_candidate,
    join_runs,
    plan_segments,
)
from lakelog.pipeline.progress import JobSummary

PAGE = 1000
INLINE_PAGE = 10_000
"""Inline files looked at per round."""
"""Files per coordinator page while looking for candidates and their batches."""
TASK_BYTES = 128 * 1024 * 1024
"""Row bytes one task holds at most (one group of plans)."""


@dataclass(frozen=True, slots=True)
class SegmentOutcome:
    """What one executor wrote for one plan: the commit to make, rows left out because
    their bytes did not match their coordinates (left where they are), and whether a source
    object was gone (retention or DeleteRecords dropped its batches and the cleaner deleted
    it after the plan was made: the plan is dropped, nothing of it moves)."""

    commit: MergeCommit | None
    corrupt: int
    source_gone: bool = False


def run_merge(ctx: JobContext) -> JobSummary:
    summary = JobSummary("merge", dry_run=ctx.dry_run)
    policy = MergePolicy.from_settings(ctx.settings)
    inline_files = ctx.run(ctx.coordinator.inline_files(INLINE_PAGE))
    summary.details["inline files"] = len(inline_files)
    if not ctx.dry_run and inline_files:
        ctx.progress.stage("moving inline files")
        summary.details["inline files moved"] = _move_inline(ctx)
    ctx.progress.stage("finding objects to merge")
    candidates, scanned = _candidates(ctx, policy)
    summary.objects_listed = scanned
    batches: list[FileBatch] = []
    for chunk in chunked([f.object_key for f in candidates], PAGE):
        batches.extend(ctx.run(ctx.coordinator.file_batches(chunk)))
    plans = plan_segments(batches, policy.target_bytes)
    summary.partitions = len({(p.topic_id, p.partition) for p in plans})
    summary.details["objects to merge"] = len(candidates)
    summary.details["segments planned"] = len(plans)
    if ctx.dry_run:
        summary.details["bytes to rewrite"] = sum(p.size for p in plans)
        summary.details["batches to move"] = len(batches)
        return summary.finish()
    if not plans:  # nothing to merge: no Spark session
        summary.nothing_to_do = True
        return summary.finish()

    groups = group_plans(plans, ctx.spark.sparkContext.defaultParallelism)
    ctx.progress.stage("writing segments", total=len(groups))
    work = functools.partial(write_groups, ctx.storage_url, policy.row_max_bytes)
    skipped = corrupt = gone = rows_in = rows_out = 0
    for wave_outcomes in run_in_waves(ctx, groups, work):
        wave = [o for group in wave_outcomes for o in group]
        corrupt += sum(o.corrupt for o in wave)
        gone += sum(o.source_gone for o in wave)
        commits = [o.commit for o in wave if o.commit is not None]
        results = ctx.run(ctx.coordinator.commit_merge(commits))
        for commit, result in zip(commits, results, strict=True):
            summary.objects_written += 1
            if result.moved:
                summary.bytes_rewritten += commit.new_object_size
            if not result.skipped:
                rows_in += sum(len(m.sources) for m in commit.moves)
                rows_out += result.moved
            skipped += result.skipped
    summary.batches_moved = rows_in
    summary.details["rows before"] = rows_in
    summary.details["rows after"] = rows_out
    summary.details["moves skipped (rows changed meanwhile)"] = skipped
    summary.details["rows left (bytes disagree with coordinates)"] = corrupt
    summary.details["segments dropped (a source object was deleted meanwhile)"] = gone
    return summary.finish()


def _move_inline(ctx: JobContext) -> int:
    """Move every inline file into WAL objects of up to produce_buffer_max_bytes each."""
    moved = 0
    while True:
        files = ctx.run(ctx.coordinator.inline_files(INLINE_PAGE))
        keys, size = [], 0
        for f in files:
            if keys and size + f.size > ctx.settings.produce_buffer_max_bytes:
                break
            keys.append(f.object_key)
            size += f.size
        if not keys:
            return moved
        outcome = ctx.run(move_inline_files(ctx.coordinator, ctx.storage, keys))
        if not outcome.moved:
            return moved  # rows changed meanwhile: the next run (or a broker) moves them
        moved += outcome.files


def _candidates(ctx: JobContext, policy: MergePolicy) -> tuple[list[FileInfo], int]:
    """Objects worth merging (at most max_files, oldest first) and how many were scanned."""
    now = int(time.time() * 1000)
    found: list[FileInfo] = []
    scanned = 0
    for prefix in (f"{WAL_PREFIX}/", f"{SEGMENT_PREFIX}/"):
        after = ""
        while len(found) < policy.max_files:
            page = ctx.run(ctx.coordinator.list_file_infos(prefix, after, PAGE))
            scanned += len(page)
            found.extend(f for f in page if is_merge_candidate(f, now, policy))
            if len(page) < PAGE:
                break
            after = page[-1].object_key
    return found[: policy.max_files], scanned


def group_plans(plans: list[SegmentPlan], slots: int) -> list[list[SegmentPlan]]:
    """Plans in consecutive groups, one Spark task each: a task reads every source object
    its plans need once (one coalesced request for all their rows), and a WAL object
    mixes many partitions, so grouping the plans of one topic saves requests (time, and
    money on S3). Groups stay under TASK_BYTES (a task's memory) and small enough to give
    every executor core work."""
    total = sum(p.size for p in plans)
    limit = max(min(TASK_BYTES, total // max(slots, 1)), 1)
    groups: list[list[SegmentPlan]] = []
    size = 0
    for plan in plans:
        if groups and size + plan.size <= limit:
            groups[-1].append(plan)
            size += plan.size
        else:
            groups.append([plan])
            size = plan.size
    return groups


def write_groups(
    storage_url: str, row_max_bytes: int, groups: list[list[SegmentPlan]]
) -> list[list[SegmentOutcome]]:
    """Spark task: for each group, read its rows (each object once), write its segments."""
    storage = ObjectStorage.from_url(storage_url)

    async def write_all() -> list[list[SegmentOutcome]]:
        out = []
        for plans in groups:
            try:
                outcomes = await write_plans(plans)
            except FileNotFoundError:  # one plan at a time, so only the gone ones drop
                outcomes = []
                for plan in plans:
                    try:
                        outcomes += await write_plans([plan])
                    except FileNotFoundError:
                        outcomes.append(SegmentOutcome(None, 0, source_gone=True))
            out.append(outcomes)
        return out

    async def write_plans(plans: list[SegmentPlan]) -> list[SegmentOutcome]:
        rows = [row for plan in plans for row in plan.batches]
        views = await read_ranges(
            storage, [ByteRange(r.object_key, r.byte_offset, r.byte_size) for r in rows]
        )
        data = iter(views)
        outcomes = []
        for plan in plans:
            checked = [(row, _checked(row, next(data))) for row in plan.batches]
            outcomes.append(await write_segment(storage, plan, checked, row_max_bytes))
        return outcomes

    return run_async(write_all())


def _checked(row: FileBatch, view: memoryview) -> bytes | None:
    """The row's bytes with every batch's real base offset written in, or None when they
    do not hold the row's batches intact."""
    batches = _batches(row, view)
    return None if batches is None else _with_offsets(batches)


async def write_segment(
    storage: ObjectStorage,
    plan: SegmentPlan,
    rows: list[tuple[FileBatch, bytes | None]],
    row_max_bytes: int,
) -> SegmentOutcome:
    """Write the plan's intact rows (bytes not None) back to back as a new segment object;
    the commit points each run of joined rows at its place there."""
    bytes_of = {id(row): data for row, data in rows if data is not None}
    intact = [row for row, data in rows if data is not None]
    corrupt = len(rows) - len(intact)
    parts: list[bytes | memoryview] = []
    moves: list[BatchMove] = []
    position = 0
    for run in join_runs(intact, row_max_bytes):
        size = sum(row.byte_size for row in run)
        parts.extend(bytes_of[id(row)] for row in run)
        moves.append(
            BatchMove(plan.topic_id, plan.partition, tuple(r.source for r in run), position, size)
        )
        position += size
    if not moves:
        return SegmentOutcome(None, corrupt)
    key = segment_key(plan.topic_id, plan.partition, moves[0].base_offset)
    await storage.put(key, parts)
    return SegmentOutcome(MergeCommit(key, position, moves), corrupt)


def _with_offsets(batches: list[tuple[int, memoryview]]) -> bytes:
    """The row's batches back to back, each with its real base offset written in."""
    out = bytearray()
    for base_offset, batch in batches:
        out += base_offset_bytes(base_offset)
        out += batch[8:]
    return bytes(out)


def _batches(row: FileBatch, view: memoryview) -> list[tuple[int, memoryview]] | None:
    """(real base offset, bytes) of a row's batches if they are intact (CRC) and end at
    the row's last offset; None otherwise."""
    try:
        batches = list(
            batches_in_range(
                view, row.base_offset, offsets_in_headers=offsets_in_headers(row.object_key)
            )
        )
    except InvalidBatch:
        return None
    if not batches:
        return None
    for _, batch in batches:
        # Not `validate`: compacted batches hold fewer records than their offset span.
        if crc32c.crc32c(batch[ATTRIBUTES_OFFSET:]) != read_header(batch).crc:
            return None
    last_base, last = batches[-1]
    if last_base + read_header(last).last_offset_delta != row.last_offset:
        return None
    return batches
