"""Compacting one partition, with no Spark: what `lakelog pipeline compact` runs in its
Spark tasks and what the broker's compaction loop runs in its event loop.

1. Pass one reads the batches from `map_from` on and folds their records into the latest
   record per key (16-byte BLAKE2b digests of the keys), at most `max_keys` keys and
   `max_map_bytes` batch bytes: past that, the rest waits for the next pass (compacting a
   prefix of the log is still exact). Below `map_from` the log is already clean (no key
   has two records there), so its keys need no map entry, as in Kafka's cleaner.
2. Pass two reads the batches to rewrite, up to where the map stopped, and keeps each
   key's latest record; a tombstone (null value) goes too once older than
   delete.retention.ms (nothing older of its key is left: a tombstone in the clean part
   whose key is not in the map is its key's only record there). A batch that keeps every
   record stays where it is; one that keeps some is rebuilt (same base offset,
   lastOffsetDelta, timestamps, producer fields, attributes and codec; records keep their
   offset and timestamp deltas; new count, length and CRC32C) into a new segment object;
   one that keeps none, and every batch of an aborted transaction, is dropped.
3. The caller swaps the partition with one all-or-nothing `commit_merge` of the outcome's
   commits: if retention, a merge or DeleteRecords changed any of its batches meanwhile,
   nothing applies (a half swap could drop a tombstone and keep an older value of its
   key) and the next pass starts over. Offsets never change.

Nothing here imports Spark: the broker imports this module (tests check that).
"""

from __future__ import annotations

import hashlib
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Sequence
from dataclasses import dataclass, field
from uuid import UUID

from lakelog.coordinator.interface import BatchCoordinator
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
from lakelog.pipeline.object_io import ByteRange, read_ranges
from lakelog.pipeline.planning import KeyState, keep_record
from lakelog.pipeline.record_decode import Record, RecordDecodeError, decode_batch
from lakelog.util.errors import ErrorCode

MAX_KEYS = 2_000_000
"""Keys tracked per partition per run by default (~150 bytes each): bounds memory."""
READ_CHUNK_BYTES = 32 * 1024 * 1024
"""Batch bytes read at once by default."""

FIND_PAGE_BYTES = 256 * 1024 * 1024
"""Batch bytes per find_batches page while collecting a partition's batches."""

Pause = Callable[[int], Awaitable[None]]
"""Called after each batch row with the row's bytes: the broker yields to its event loop
there, paces its reads and renews its lease."""


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
    map_from: int = 0
    """The cleaned offset: rows ending below it add no keys to the map."""
    max_keys: int = MAX_KEYS
    max_map_bytes: int = 0
    """Batch bytes pass one may map (0: no cap besides `max_keys`)."""
    read_chunk_bytes: int = READ_CHUNK_BYTES
    rewrite_kept: bool = False
    """Compact the `kept` row (the partition's last) too, but never drop its last batch,
    so the log still ends where it did (a rebuilt batch keeps its offset span; one that
    would keep nothing keeps its last record, the latest of its key): the broker sets it,
    as one row can hold a producer's whole burst."""


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
    covered_to: int = -1
    """The first offset this pass did not compact against (where the map stopped, else
    just past the last row it rewrote): the partition's cleaned offset once it commits."""
    oldest_kept_tombstone_ms: int = -1
    """The timestamp of the oldest tombstone this pass kept (too young to go), -1: none."""

    def kept_tombstone(self, timestamp: int) -> None:
        if self.oldest_kept_tombstone_ms < 0 or timestamp < self.oldest_kept_tombstone_ms:
            self.oldest_kept_tombstone_ms = timestamp


@dataclass(frozen=True, slots=True)
class PartitionLog:
    """A partition's committed batches from its log start, markers included."""

    batches: list[BatchCoordinate]
    aborted: list[tuple[int, int]]
    """(producer id, first offset) of the aborted transactions met."""
    last_stable_offset: int


async def collect_partition(
    coordinator: BatchCoordinator, topic_id: UUID, partition: int, max_rows: int = 0
) -> PartitionLog | None:
    """The partition's batches below its last stable offset (find_batches with
    read_committed stops there and names the aborted transactions); with `max_rows`, about
    that many from the log start, the last stable offset lowered to where they end (the
    rest waits for a later pass). None when the partition is gone."""
    [info] = await coordinator.log_info([PartitionKey(topic_id, partition)])
    if info.error != ErrorCode.none:
        return None
    coords: list[BatchCoordinate] = []
    aborted: dict[tuple[int, int], None] = {}
    offset, stable = info.log_start_offset, info.high_watermark
    while True:
        [found] = await coordinator.find_batches(
            [FindBatchesRequest(topic_id, partition, offset, FIND_PAGE_BYTES, True)]
        )
        if found.error != ErrorCode.none:
            return None
        stable = found.last_stable_offset
        coords.extend(found.batches)
        aborted.update(((a.producer_id, a.first_offset), None) for a in found.aborted)
        if not found.batches:
            break
        offset = found.batches[-1].last_offset + 1
        if max_rows and len(coords) >= max_rows:
            stable = min(stable, offset)
            break
    return PartitionLog(coords, list(aborted), stable)


def _digest(key: bytes) -> bytes:
    return hashlib.blake2b(key, digest_size=16).digest()


async def _chunks(
    storage: ObjectStorage, coords: Sequence[BatchCoordinate], chunk_bytes: int
) -> AsyncIterator[list[tuple[BatchCoordinate, memoryview]]]:
    """The batches' bytes in offset order, about `chunk_bytes` at a time."""
    start = 0
    while start < len(coords):
        end, size = start, 0
        while end < len(coords) and (end == start or size + coords[end].byte_size <= chunk_bytes):
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


async def _no_pause(_: int) -> None:
    return None


async def compact_partition(
    storage: ObjectStorage, job: PartitionJob, pause: Pause = _no_pause
) -> PartitionOutcome:
    outcome = PartitionOutcome(job.topic_id, job.partition)
    ordered = sorted((*job.rewrite, *job.kept), key=lambda c: c.base_offset)
    mapped = [c for c in ordered if c.last_offset >= job.map_from]
    latest: dict[bytes, KeyState] = {}
    cut = None  # the first base offset not covered by `latest`
    mapped_bytes = 0
    async for chunk in _chunks(storage, mapped, job.read_chunk_bytes):
        for coord, view in chunk:
            if len(latest) >= job.max_keys or (
                job.max_map_bytes and mapped_bytes and mapped_bytes >= job.max_map_bytes
            ):
                cut = coord.base_offset
                break
            for base, records in _batches(coord, view):
                for r in records:
                    if r.key is not None:
                        latest[_digest(r.key)] = KeyState(
                            base + r.offset, r.value is None, _timestamp(coord, r)
                        )
            mapped_bytes += coord.byte_size
            await pause(coord.byte_size)
        if cut is not None:
            break
    rows = (*job.rewrite, *job.kept) if job.rewrite_kept else job.rewrite
    rewrite = sorted(
        (c for c in rows if cut is None or c.base_offset < cut), key=lambda c: c.base_offset
    )
    aborted = [c for c in job.aborted if cut is None or c.base_offset < cut]
    writer = _SegmentWriter(storage, job, outcome)
    async for chunk in _chunks(storage, rewrite, job.read_chunk_bytes):
        for coord, view in chunk:
            await writer.add(coord, view, latest, keep_last=coord in job.kept)
            await pause(coord.byte_size)
    await writer.flush()
    drops = [_drop(job, c) for c in aborted] + writer.drops
    outcome.batches_dropped = len(drops)
    outcome.bytes_before += sum(c.byte_size for c in aborted)
    if drops:
        outcome.commits.append(MergeCommit(None, 0, drops))
    if cut is not None:
        outcome.covered_to = cut
    else:
        ends = [c.last_offset + 1 for c in (*rewrite, *aborted)]
        outcome.covered_to = max(ends, default=job.map_from)
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
        self,
        coord: BatchCoordinate,
        base: int,
        records: list[Record],
        latest: dict[bytes, KeyState],
    ) -> list[Record]:
        outcome, horizon = self._outcome, self._job.tombstone_horizon_ms
        kept: list[Record] = []
        for r in records:
            offset = base + r.offset
            digest = None if r.key is None else _digest(r.key)
            state = None if digest is None else latest.get(digest)
            if state is None and digest is not None and r.value is None:
                # In the clean part, not in the map: the key's only record left there.
                if _timestamp(coord, r) >= horizon:
                    kept.append(r)
                    outcome.kept_tombstone(_timestamp(coord, r))
                else:
                    outcome.tombstones_dropped += 1
            elif keep_record(offset, digest, latest, horizon):
                kept.append(r)
                if r.value is None and state is not None:
                    outcome.kept_tombstone(state.timestamp)
            elif r.value is None and state is not None and state.offset == offset:
                outcome.tombstones_dropped += 1
        outcome.records_read += len(records)
        outcome.records_dropped += len(records) - len(kept)
        return kept

    async def add(
        self,
        coord: BatchCoordinate,
        view: memoryview,
        latest: dict[bytes, KeyState],
        keep_last: bool = False,
    ) -> None:
        """Compact one row: unchanged when every record stays, dropped when none does,
        else rebuilt from its remaining batches (each with its real base offset).
        `keep_last`: the row's last batch is never dropped (the partition's last)."""
        job, outcome = self._job, self._outcome
        out: list[tuple[int, int, bytes | memoryview]] = []  # (base, last, bytes)
        changed = False
        batches = _batches(coord, view)
        for i, ((base, records), (_, batch)) in enumerate(
            zip(batches, _in_range(coord, view), strict=True)
        ):
            header = read_header(batch)
            kept = self._kept(coord, base, records, latest)
            if not kept and keep_last and i == len(batches) - 1:
                kept = records[-1:]
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
