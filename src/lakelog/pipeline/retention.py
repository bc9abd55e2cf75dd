"""`lakelog pipeline retention`: the broker's retention rules (`planning.retention_policies`
and the coordinator's `enforce_retention`) for every partition at once, in bounded calls.

The work is the coordinator's (it moves log start offsets and marks emptied files in its
own transactions), so this job runs on the driver alone and starts no Spark session; the
objects it frees are deleted by gc or the brokers' cleaners after the grace period."""

from __future__ import annotations

import time

from lakelog.coordinator.log_types import PartitionKey
from lakelog.pipeline.context import JobContext
from lakelog.pipeline.planning import chunked, retention_policies
from lakelog.pipeline.progress import JobSummary

POLICIES_PER_CALL = 1000


def run_retention(ctx: JobContext) -> JobSummary:
    summary = JobSummary("retention", dry_run=ctx.dry_run)
    ctx.progress.stage("reading topics")
    topics = ctx.run(ctx.coordinator.get_topics(None))
    policies = retention_policies(topics, ctx.settings)
    summary.partitions = len(policies)
    summary.nothing_to_do = not policies
    summary.details["topics"] = len(topics)
    if ctx.dry_run:
        infos = ctx.run(
            ctx.coordinator.log_info([PartitionKey(p.topic_id, p.partition) for p in policies])
        )
        summary.details["bytes under retention"] = sum(i.byte_size for i in infos)
        return summary.finish()
    ctx.progress.stage("enforcing retention", total=len(policies))
    batches = size = 0
    for chunk in chunked(policies, POLICIES_PER_CALL):
        results = ctx.run(ctx.coordinator.enforce_retention(chunk, int(time.time() * 1000)))
        batches += sum(r.batches_deleted for r in results)
        size += sum(r.bytes_deleted for r in results)
        ctx.progress.advance(len(chunk))
    summary.details["batches dropped"] = batches
    summary.details["bytes dropped"] = size
    return summary.finish()
