"""Running a job's per-object or per-partition work on Spark executors, in waves.

A wave is one Spark job over a bounded slice of the work items; the driver gets each
wave's (small) results back, commits them to the coordinator and reports progress before
the next wave starts. Waves bound both what is uncommitted at any time (written objects
the coordinator does not know yet) and what the driver holds."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, TypeVar

from lakelog.pipeline.planning import chunked

if TYPE_CHECKING:
    from lakelog.pipeline.context import JobContext

T = TypeVar("T")
R = TypeVar("R")

TASKS_PER_SLOT = 2
"""Spark tasks per executor core in a wave (so a slow task does not idle the others)."""
WAVES_MIN_ITEMS = 64


def run_in_waves(
    ctx: JobContext,
    items: Sequence[T],
    work: Callable[[list[T]], list[R]],
    items_per_wave: int | None = None,
) -> Iterator[list[R]]:
    """Apply `work` (a module-level function, run on executors over a list of items) to
    every item; yield each wave's results in item order and count the items done."""
    if not items:
        return
    context = ctx.spark.sparkContext
    slots = max(context.defaultParallelism, 1)
    per_wave = items_per_wave or max(slots * TASKS_PER_SLOT * 4, WAVES_MIN_ITEMS)
    for wave in chunked(items, per_wave):
        tasks = min(len(wave), slots * TASKS_PER_SLOT)
        results = context.parallelize(list(wave), tasks).mapPartitions(_apply(work)).collect()
        ctx.progress.advance(len(wave))
        yield results


def _apply(work: Callable[[list[T]], list[R]]) -> Callable[[Iterator[T]], list[R]]:
    def run(items: Iterator[T]) -> list[R]:
        return work(list(items))

    return run
