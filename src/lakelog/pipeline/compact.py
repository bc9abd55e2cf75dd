"""`lakelog pipeline compact`: log compaction for topics with cleanup.policy `compact` (and
`compact,delete`), one Spark task per partition, for topics too big for the broker's own
compaction loop (`server.background.compaction`).

The driver collects each partition's committed batches below the last stable offset
(find_batches with read_committed, which stops there and names the aborted transactions);
a task compacts the partition with `pipeline.compaction.compact_partition` (the same code
the broker runs: see there for the passes and rules), mapping every key from the log
start; the driver swaps each partition with one all-or-nothing `commit_merge`.
Transaction markers and the partition's last batch are never touched. Offsets never
change, so consumers from offset 0 simply see fewer records."""

from __future__ import annotations

import functools
import time
from collections.abc import Sequence
from uuid import UUID

from lakelog.pipeline.compaction import (
    PartitionJob,
    PartitionOutcome,
    collect_partition,
    compact_partition,
)
from lakelog.pipeline.context import JobContext, PipelineError
from lakelog.pipeline.distribute import run_in_waves
from lakelog.pipeline.object_io import close_task_storage, run_async, task_storage
from lakelog.pipeline.planning import compacted_topics, compaction_range
from lakelog.pipeline.progress import JobSummary
from lakelog.pipeline.record_decode import RecordDecodeError
from lakelog.util.errors import ErrorCode

__all__ = ["PartitionJob", "PartitionOutcome", "compact_partition", "run_compact"]


def run_compact(ctx: JobContext, names: Sequence[str] | None) -> JobSummary:
    summary = JobSummary("compact", dry_run=ctx.dry_run)
    ctx.progress.stage("reading partitions")
    topics = ctx.run(ctx.coordinator.get_topics(list(names) if names else None))
    if names:
        missing = set(names) - {t.name for t in topics}
        if missing:
            raise PipelineError(f"unknown topics: {', '.join(sorted(missing))}")
    chosen = compacted_topics(topics, ctx.settings)
    if names and len(chosen) < len(topics):
        plain = sorted({t.name for t in topics} - {c.topic.name for c in chosen})
        raise PipelineError(f"cleanup.policy has no compact on: {', '.join(plain)}")
    now = int(time.time() * 1000)
    jobs: list[PartitionJob] = []
    for choice in chosen:
        for partition in range(choice.topic.num_partitions):
            job = _partition_job(
                ctx, choice.topic.topic_id, partition, now - choice.delete_retention_ms
            )
            if job is not None:
                jobs.append(job)
    summary.partitions = len(jobs)
    summary.nothing_to_do = not jobs  # run_in_waves starts no Spark session for no work
    summary.details["topics"] = len(chosen)
    ctx.progress.stage("compacting partitions", total=len(jobs))
    totals: dict[str, int] = {
        "records read": 0,
        "records dropped": 0,
        "tombstones dropped": 0,
        "batches dropped": 0,
        "bytes before": 0,
        "bytes after": 0,
        "partitions changed meanwhile": 0,
        "partitions failed": 0,
    }
    work = functools.partial(
        compact_partitions, ctx.storage_url, coordinator_url=ctx.coordinator_url
    )
    for wave in run_in_waves(ctx, jobs, work, items_per_wave=16):
        for outcome in wave:
            if outcome.error is not None:
                totals["partitions failed"] += 1
                ctx.progress.log(
                    f"topic {outcome.topic_id} partition {outcome.partition}: {outcome.error}"
                )
                continue
            if outcome.commits and not ctx.dry_run:
                results = ctx.run(ctx.coordinator.commit_merge(outcome.commits, True))
                if any(r.skipped or r.error != ErrorCode.none for r in results):
                    totals["partitions changed meanwhile"] += 1
                    continue
            summary.objects_written += outcome.objects_written
            summary.bytes_rewritten += outcome.bytes_after
            summary.batches_moved += outcome.batches_rewritten + outcome.batches_dropped
            totals["records read"] += outcome.records_read
            totals["records dropped"] += outcome.records_dropped
            totals["tombstones dropped"] += outcome.tombstones_dropped
            totals["batches dropped"] += outcome.batches_dropped
            totals["bytes before"] += outcome.bytes_before
            totals["bytes after"] += outcome.bytes_after
    summary.details.update(totals)
    return summary.finish()


def _partition_job(
    ctx: JobContext, topic_id: UUID, partition: int, horizon: int
) -> PartitionJob | None:
    """The partition's work from its committed batches below the last stable offset."""
    found = ctx.run(collect_partition(ctx.coordinator, topic_id, partition))
    if found is None:
        return None
    plan = compaction_range(found.batches, found.aborted, found.last_stable_offset)
    if not plan.rewrite and not plan.aborted:
        return None
    return PartitionJob(
        topic_id,
        partition,
        tuple(plan.rewrite),
        tuple(plan.kept),
        tuple(plan.aborted),
        horizon,
        ctx.settings.merge_target_bytes,
        not ctx.dry_run,
    )


# ---------------------------------------------------------------- executor side


def compact_partitions(
    storage_url: str, jobs: list[PartitionJob], coordinator_url: str | None = None
) -> list[PartitionOutcome]:
    """Spark task: compact each partition; errors stay the partition's own. With the
    coordinator's URL, rows in inline files are read too (issue 32)."""
    storage = task_storage(storage_url, coordinator_url)

    async def run_all() -> list[PartitionOutcome]:
        outcomes = []
        try:
            for job in jobs:
                try:
                    outcomes.append(await compact_partition(storage, job))
                except (RecordDecodeError, ValueError) as exc:
                    outcomes.append(PartitionOutcome(job.topic_id, job.partition, error=str(exc)))
        finally:
            await close_task_storage(storage)
        return outcomes

    return run_async(run_all())
