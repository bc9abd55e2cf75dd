"""`lakelog pipeline compact`: log compaction for topics with cleanup.policy `compact` (and
`compact,delete`), one Spark task per partition.

Per partition, below the last stable offset (the driver asks find_batches with
read_committed, which stops there and names the aborted transactions):
1. Pass one reads the batches and folds their records into the latest record per key
   (16-byte BLAKE2b digests of the keys, at most `MAX_KEYS` per pass: past that, the rest
   waits for the next run; compacting a prefix of the log is still exact).
2. Pass two reads them again and keeps each key's latest record; a tombstone (null value)
   goes too once older than delete.retention.ms (nothing older of its key is left).
   A batch that keeps every record stays where it is; one that keeps some is rebuilt
   (same base offset, lastOffsetDelta, timestamps, producer fields, attributes and codec;
   records keep their offset and timestamp deltas; new count, length and CRC32C) into a
   new segment object; one that keeps none, and every batch of an aborted transaction, is
   dropped. Transaction markers and the partition's last batch are never touched.
3. The driver swaps each partition with one all-or-nothing `commit_merge`: if retention,
   a merge or DeleteRecords changed any of its batches meanwhile, nothing of it applies
   (a half swap could drop a tombstone and keep an older value of its key) and the next
   run starts over.
Offsets never change, so consumers from offset 0 simply see fewer records.
"""

from __future__ import annotations

import functools
import hashlib
import time
from collections.abc import AsyncIterator, Iterator, Sequence
from dataclasses import dataclass, field
from uuid import UUID

from lakelog.coordinator.log_types import (
    BatchCoordinate,
    FindBatchesRequest,
    PartitionKey,
    TimestampType,
)
from lakelog.coordinator.pipeline_types import BatchMove, BatchSource, MergeCommit
from lakelog.log.protocol.batch_runs import batches_in_range
from lakelog.log.protocol.records import InvalidBatch, base_offset_bytes, read_header
from lakelog.log.storage.keys import offsets_in_headers, segment_key
from lakelog.log.storage.store import ObjectStorage
from lakelog.pipeline.batch_writer import encode_record, rebuild_batch
from lakelog.pipeline.context import JobContext, PipelineError
from lakelog.pipeline.distribute import run_in_waves
from lakelog.pipeline.object_io import (
    ByteRange,
    close_task_storage,
    read_ranges,
    run_async,
    task_storage,
)
from lakelog.pipeline.planning import (
    KeyState,
    compacted_topics,
    compaction_range,
    keep_record,
)
from lakelog.pipeline.progress import JobSummary
from lakelog.pipeline.records import Record, RecordDecodeError, decode_batch
from lakelog.util.errors import ErrorCode

MAX_KEYS = 2_000_000
"""Keys tracked per partition per run (~150 bytes each): bounds a task's memory."""
READ_CHUNK_BYTES = 32 * 1024 * 1024
"""Batch bytes read at once by a task."""
FIND_PAGE_BYTES = 256 * 1024 * 1024
"""Batch bytes per find_batches page while the driver collects a partition's batches."""


@dataclass(frozen=True, slots=True)
class PartitionJob:
    topic_id: UUID
    partition: int
    rewrite: tuple[BatchCoordinate, ...]
    kept: tuple[BatchCoordinate, ...]
    aborted: tuple[BatchCoordinate, ...]
    tombstone_horizon_ms: int
    target_bytes: int
    write: bool


@dataclass
class PartitionOutcome:
    topic_id: UUID
    partition: int
    commits: list[MergeCommit] = field(default_factory=list)
    error: str | None = None
    records_read: int = 0
    records_dropped: int = 0
    tombstones_dropped: int = 0
    batches_rewritten: int = 0
    batches_dropped: int = 0
    bytes_before: int = 0
    bytes_after: int = 0
    objects_written: int = 0


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
    [info] = ctx.run(ctx.coordinator.log_info([PartitionKey(topic_id, partition)]))
    if info.error != ErrorCode.none:
        return None
    coords: list[BatchCoordinate] = []
    aborted: dict[tuple[int, int], None] = {}
    offset, stable = info.log_start_offset, info.high_watermark
    while True:
        [found] = ctx.run(
            ctx.coordinator.find_batches(
                [FindBatchesRequest(topic_id, partition, offset, FIND_PAGE_BYTES, True)]
            )
        )
        if found.error != ErrorCode.none:
            return None
        stable = found.last_stable_offset
        coords.extend(found.batches)
        aborted.update(((a.producer_id, a.first_offset), None) for a in found.aborted)
        if not found.batches:
            break
        offset = found.batches[-1].last_offset + 1
    plan = compaction_range(coords, list(aborted), stable)
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


def _digest(key: bytes) -> bytes:
    return hashlib.blake2b(key, digest_size=16).digest()


async def _chunks(
    storage: ObjectStorage, coords: Sequence[BatchCoordinate]
) -> AsyncIterator[list[tuple[BatchCoordinate, memoryview]]]:
    """The batches' bytes in offset order, about READ_CHUNK_BYTES at a time."""
    start = 0
    while start < len(coords):
        end, size = start, 0
        while end < len(coords) and (
            end == start or size + coords[end].byte_size <= READ_CHUNK_BYTES
        ):
            size += coords[end].byte_size
            end += 1
        part = coords[start:end]
        views = await read_ranges(
            storage, [ByteRange(c.object_key, c.byte_offset, c.byte_size) for c in part]
        )
        yield list(zip(part, views, strict=True))
        start = end


def _in_range(coord: BatchCoordinate, view: memoryview) -> Iterator[tuple[int, memoryview]]:
    return batches_in_range(
        view, coord.base_offset, offsets_in_headers=offsets_in_headers(coord.object_key)
    )


def _batches(coord: BatchCoordinate, view: memoryview) -> list[tuple[int, list[Record]]]:
    """The row's batches as (real base offset, records); records carry their stored offset
    and timestamp deltas (decoded against base offset 0), as re-encoding needs them."""
    try:
        return [
            (base, decode_batch(batch, base_offset=0)) for base, batch in _in_range(coord, view)
        ]
    except InvalidBatch as exc:
        raise RecordDecodeError(f"row at offset {coord.base_offset}: {exc}") from exc


def _timestamp(coord: BatchCoordinate, record: Record) -> int:
    if coord.timestamp_type == TimestampType.LOG_APPEND_TIME:
        return coord.log_append_time
    return record.timestamp


async def compact_partition(storage: ObjectStorage, job: PartitionJob) -> PartitionOutcome:
    outcome = PartitionOutcome(job.topic_id, job.partition)
    ordered = sorted((*job.rewrite, *job.kept), key=lambda c: c.base_offset)
    latest: dict[bytes, KeyState] = {}
    cut = None  # the first base offset not covered by `latest`
    async for chunk in _chunks(storage, ordered):
        for coord, view in chunk:
            if len(latest) >= MAX_KEYS:
                cut = coord.base_offset
                break
            for base, records in _batches(coord, view):
                for r in records:
                    if r.key is not None:
                        latest[_digest(r.key)] = KeyState(
                            base + r.offset, r.value is None, _timestamp(coord, r)
                        )
        if cut is not None:
            break
    rewrite = [c for c in job.rewrite if cut is None or c.base_offset < cut]
    writer = _SegmentWriter(storage, job, outcome)
    async for chunk in _chunks(storage, rewrite):
        for coord, view in chunk:
            await writer.add(coord, view, latest)
    await writer.flush()
    drops = [_drop(job, c) for c in job.aborted] + writer.drops
    outcome.batches_dropped = len(drops)
    outcome.bytes_before += sum(c.byte_size for c in job.aborted)
    if drops:
        outcome.commits.append(MergeCommit(None, 0, drops))
    return outcome


class _SegmentWriter:
    """Rebuilds rows and gathers them into segment objects of about target_bytes."""

    def __init__(self, storage: ObjectStorage, job: PartitionJob, outcome: PartitionOutcome):
        self._storage = storage
        self._job = job
        self._outcome = outcome
        self._parts: list[bytes | memoryview] = []
        self._moves: list[BatchMove] = []
        self._size = 0
        self.drops: list[BatchMove] = []

    def _kept(
        self, base: int, records: list[Record], latest: dict[bytes, KeyState]
    ) -> list[Record]:
        outcome, horizon = self._outcome, self._job.tombstone_horizon_ms
        kept: list[Record] = []
        for r in records:
            offset = base + r.offset
            digest = None if r.key is None else _digest(r.key)
            if keep_record(offset, digest, latest, horizon):
                kept.append(r)
            elif r.value is None and digest is not None and latest[digest].offset == offset:
                outcome.tombstones_dropped += 1
        outcome.records_read += len(records)
        outcome.records_dropped += len(records) - len(kept)
        return kept

    async def add(
        self, coord: BatchCoordinate, view: memoryview, latest: dict[bytes, KeyState]
    ) -> None:
        """Compact one row: unchanged when every record stays, dropped when none does,
        else rebuilt from its remaining batches (each with its real base offset)."""
        job, outcome = self._job, self._outcome
        out: list[tuple[int, int, bytes | memoryview]] = []  # (base, last, bytes)
        changed = False
        for (base, records), (_, batch) in zip(
            _batches(coord, view), _in_range(coord, view), strict=True
        ):
            header = read_header(batch)
            kept = self._kept(base, records, latest)
            last = base + header.last_offset_delta
            if len(kept) == len(records):
                out.append((base, last, base_offset_bytes(base) + bytes(batch[8:])))
                continue
            changed = True
            if kept:
                encoded = [
                    encode_record(
                        r.offset, r.timestamp - header.base_timestamp, r.key, r.value, r.headers
                    )
                    for r in kept
                ]
                out.append((base, last, rebuild_batch(header, base, encoded)))
        if not changed:
            return
        outcome.bytes_before += coord.byte_size
        if not out:
            self.drops.append(_drop(job, coord))
            return
        size = sum(len(data) for _, _, data in out)
        if self._moves and self._size + size > job.target_bytes:
            await self.flush()
        self._moves.append(
            BatchMove(
                job.topic_id,
                job.partition,
                (_source(coord),),
                self._size,
                size,
                new_base_offset=out[0][0],
                new_last_offset=out[-1][1],
            )
        )
        self._parts.extend(data for _, _, data in out)
        self._size += size
        outcome.batches_rewritten += 1
        outcome.bytes_after += size

    async def flush(self) -> None:
        if not self._moves:
            return
        job = self._job
        key = segment_key(job.topic_id, job.partition, self._moves[0].base_offset)
        if job.write:
            await self._storage.put(key, self._parts)
            self._outcome.objects_written += 1
        self._outcome.commits.append(MergeCommit(key, self._size, self._moves))
        self._parts, self._moves, self._size = [], [], 0


def _source(coord: BatchCoordinate) -> BatchSource:
    return BatchSource(coord.base_offset, coord.last_offset, coord.object_key, coord.byte_offset)


def _drop(job: PartitionJob, coord: BatchCoordinate) -> BatchMove:
    return BatchMove(job.topic_id, job.partition, (_source(coord),), drop=True)
