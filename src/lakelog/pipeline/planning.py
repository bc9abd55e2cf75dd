"""What the pipeline jobs and the broker's light background loops decide, as pure functions:
what is an orphan, which objects may be deleted now, which partitions retention applies
to, which objects to merge and how to group their batches, and which batches compaction
may touch. No I/O here, so the broker (in its event loop) and the Spark jobs (on the
driver) share one implementation and tests check the rules directly."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import TypeVar
from uuid import UUID

from lakelog.config import Settings
from lakelog.coordinator.log_types import BatchCoordinate, RetentionPolicy, TimestampType
from lakelog.coordinator.pipeline_types import FileBatch, FileInfo, FileReference
from lakelog.coordinator.topic_types import TopicInfo
from lakelog.log.storage.keys import InvalidKeyError, KeyKind, parse_key
from lakelog.log.topic_config import CompactionConfig, compaction_config, effective

T = TypeVar("T")

DELETING = "deleting"
COMMITTED = "committed"


def chunked(items: Sequence[T], size: int) -> Iterator[Sequence[T]]:
    """`items` in consecutive slices of at most `size` (>= 1)."""
    step = max(size, 1)
    for start in range(0, len(items), step):
        yield items[start : start + step]


# ---------------------------------------------------------------- deleting objects


@dataclass(frozen=True, slots=True)
class ListedObject:
    """One object from a listing of the store."""

    key: str
    size: int
    last_modified_ms: int


def file_delete_cutoff(now_ms: int, grace_ms: int) -> int:
    """Files marked for deletion before this time may go: the grace period outlasts any
    fetch that read their coordinates before they were marked."""
    return now_ms - max(grace_ms, 0)


def object_age_ms(obj: ListedObject, now_ms: int) -> int | None:
    """How old an object of our layout is: the younger of its listing time and the time in
    its UUIDv7 (a clock that ran ahead cannot make an object look old). None for keys
    that are not ours: GC never touches those."""
    try:
        created = parse_key(obj.key).created_ms
    except InvalidKeyError:
        return None
    return now_ms - max(created, obj.last_modified_ms)


def find_orphans(
    listing: Iterable[ListedObject], known: set[str] | frozenset[str], now_ms: int, grace_ms: int
) -> list[ListedObject]:
    """Objects of our layout that the coordinator does not know and that are older than
    the grace period (far longer than any upload-to-commit time), in key order."""
    found = []
    for obj in listing:
        if obj.key in known:
            continue
        age = object_age_ms(obj, now_ms)
        if age is not None and age >= grace_ms:
            found.append(obj)
    found.sort(key=lambda o: o.key)
    return found


def deletable(references: Iterable[FileReference], orphans: bool) -> list[str]:
    """The last check before deleting objects, against what the coordinator says now.

    Never an object any batch points into. Orphan candidates: only keys still unknown (a
    late commit makes an object known, and then it is no orphan). Files marked for
    deletion: those still marked, or already forgotten by another cleaner."""
    keys = []
    for ref in references:
        if ref.batch_count > 0:
            continue
        if orphans and ref.known:
            continue
        if not orphans and ref.known and ref.state != DELETING:
            continue
        keys.append(ref.object_key)
    return keys


# ---------------------------------------------------------------- retention


def retention_policies(topics: Iterable[TopicInfo], settings: Settings) -> list[RetentionPolicy]:
    """One policy per partition of every topic with a limit and a delete cleanup policy."""
    policies = []
    for topic in topics:
        config = effective(topic, settings)
        if "delete" not in config.cleanup_policy.split(","):
            continue
        if config.retention_ms < 0 and config.retention_bytes < 0:
            continue
        policies.extend(
            RetentionPolicy(topic.topic_id, p, config.retention_ms, config.retention_bytes)
            for p in range(topic.num_partitions)
        )
    return policies


# ---------------------------------------------------------------- merge


@dataclass(frozen=True, slots=True)
class MergePolicy:
    min_age_ms: int
    small_bytes: int
    min_live_ratio: float
    target_bytes: int
    max_files: int
    row_max_bytes: int

    @classmethod
    def from_settings(cls, settings: Settings) -> MergePolicy:
        return cls(
            min_age_ms=settings.merge_min_age_ms,
            small_bytes=settings.merge_small_bytes,
            min_live_ratio=settings.merge_min_live_ratio,
            target_bytes=settings.merge_target_bytes,
            max_files=settings.merge_max_files,
            row_max_bytes=settings.merge_row_max_bytes,
        )


def is_merge_candidate(file: FileInfo, now_ms: int, policy: MergePolicy) -> bool:
    """A committed object with live batches, old enough, and worth rewriting: a WAL object
    that is small or fragmented (dead bytes), or a segment that became fragmented."""
    if file.state != COMMITTED or file.live_bytes <= 0:
        return False
    if now_ms - file.committed_at < policy.min_age_ms:
        return False
    try:
        kind = parse_key(file.object_key).kind
    except InvalidKeyError:
        return False
    fragmented = file.live_bytes < file.size * policy.min_live_ratio
    if kind == KeyKind.WAL:
        return fragmented or file.live_bytes < policy.small_bytes
    return kind == KeyKind.SEGMENT and fragmented


@dataclass(frozen=True, slots=True)
class SegmentPlan:
    """One merged object to write: a run of one partition's batches in offset order."""

    topic_id: UUID
    partition: int
    batches: tuple[FileBatch, ...]

    @property
    def base_offset(self) -> int:
        return self.batches[0].base_offset

    @property
    def size(self) -> int:
        return sum(b.byte_size for b in self.batches)

    @property
    def source_keys(self) -> set[str]:
        return {b.object_key for b in self.batches}


def plan_segments(batches: Iterable[FileBatch], target_bytes: int) -> list[SegmentPlan]:
    """Group batches per partition in offset order into segments of about `target_bytes`
    (a segment closes once it reaches the target; a bigger batch is a segment alone)."""
    per_partition: dict[tuple[UUID, int], list[FileBatch]] = {}
    for b in batches:
        per_partition.setdefault((b.topic_id, b.partition), []).append(b)
    plans: list[SegmentPlan] = []
    for (topic_id, partition), run in sorted(
        per_partition.items(), key=lambda item: (item[0][0].bytes, item[0][1])
    ):
        run.sort(key=lambda b: b.base_offset)
        current: list[FileBatch] = []
        size = 0
        for b in run:
            if current and size + b.byte_size > target_bytes:
                plans.append(SegmentPlan(topic_id, partition, tuple(current)))
                current, size = [], 0
            current.append(b)
            size += b.byte_size
        if current:
            plans.append(SegmentPlan(topic_id, partition, tuple(current)))
    return plans


def joinable(row: FileBatch) -> bool:
    """Rows that may share one coordinator row with their neighbours: plain CreateTime
    data. Transactional batches keep their own rows (their producer fields matter to
    readers), and LogAppendTime ones too (fetch stamps one append time per row)."""
    return not row.is_transactional and row.timestamp_type == 0


def join_runs(rows: Sequence[FileBatch], max_bytes: int) -> list[list[FileBatch]]:
    """Split a segment's rows (one partition, offset order) into runs that become one row
    each: adjacent offsets, joinable, at most `max_bytes` together (a bigger row alone)."""
    runs: list[list[FileBatch]] = []
    size = 0
    for row in rows:
        if runs:
            prev = runs[-1][-1]
            if (
                joinable(row)
                and joinable(prev)
                and row.base_offset == prev.last_offset + 1
                and size + row.byte_size <= max_bytes
            ):
                runs[-1].append(row)
                size += row.byte_size
                continue
        runs.append([row])
        size = row.byte_size
    return runs


# ---------------------------------------------------------------- compaction


@dataclass(frozen=True, slots=True)
class CompactionTopic:
    topic: TopicInfo
    delete_retention_ms: int
    """Tombstones older than this are dropped (once nothing older of their key is left)."""
    config: CompactionConfig


def compacted_topics(topics: Iterable[TopicInfo], settings: Settings) -> list[CompactionTopic]:
    """The topics whose cleanup.policy holds `compact` (also `compact,delete`)."""
    found = []
    for topic in topics:
        if "compact" not in effective(topic, settings).cleanup_policy.split(","):
            continue
        try:
            config = compaction_config(topic, settings)
        except ValueError:
            continue  # a config stored before it was validated: never guess
        found.append(CompactionTopic(topic, config.delete_retention_ms, config))
    return found


@dataclass
class CompactionRange:
    """What compaction may do in one partition, from its committed coordinates."""

    rewrite: list[BatchCoordinate] = field(default_factory=list)
    """Data batches below the last stable offset, not aborted, not the partition's last:
    their records may be dropped."""
    aborted: list[BatchCoordinate] = field(default_factory=list)
    """Data batches of aborted transactions below the last stable offset: dropped whole."""
    kept: list[BatchCoordinate] = field(default_factory=list)
    """The partition's last batch when it is a stable data batch: its records count as
    the latest of their keys, but it is not rewritten."""


def compaction_range(
    coordinates: Sequence[BatchCoordinate],
    aborted_txns: Iterable[tuple[int, int]],
    last_stable_offset: int,
) -> CompactionRange:
    """Split a partition's batches (in offset order, markers included, as find_batches
    with read_committed gives them) for compaction. `aborted_txns`: (producer id, first
    offset) of the aborted transactions met. Markers are never touched. The partition's
    last batch stays as it is (like Kafka's active segment), so the log never ends in a
    gap that a consumer at its end could not fetch past."""
    result = CompactionRange()
    if not coordinates:
        return result
    last = max(coordinates, key=lambda c: c.last_offset)
    pending = sorted(aborted_txns, key=lambda t: t[1])
    active: set[int] = set()
    for coord in sorted(coordinates, key=lambda c: c.base_offset):
        if coord.last_offset >= last_stable_offset:
            break
        while pending and pending[0][1] <= coord.last_offset:
            active.add(pending.pop(0)[0])
        if coord.control_type >= 0:
            if coord.control_type == 0:
                active.discard(coord.producer_id)
            continue
        if coord.is_transactional and coord.producer_id in active:
            result.aborted.append(coord)
        elif coord is last:
            result.kept.append(coord)
        else:
            result.rewrite.append(coord)
    return result


@dataclass(frozen=True, slots=True)
class KeyState:
    """The latest record of a key seen so far."""

    offset: int
    tombstone: bool
    timestamp: int


def latest_per_key(
    records: Iterable[tuple[int, bytes | None, bool, int]],
    latest: dict[bytes, KeyState] | None = None,
) -> dict[bytes, KeyState]:
    """Fold (offset, key, is tombstone, timestamp) records, in offset order, into the
    latest record per key. Keyless records are not tracked (they are always kept)."""
    state = {} if latest is None else latest
    for offset, key, tombstone, timestamp in records:
        if key is not None:
            state[key] = KeyState(offset, tombstone, timestamp)
    return state


def keep_record(
    offset: int,
    key: bytes | None,
    latest: dict[bytes, KeyState],
    tombstone_horizon_ms: int,
) -> bool:
    """Compaction's rule for one record: keep it if it is its key's latest record, unless
    that is a tombstone older than the horizon (now - delete.retention.ms)."""
    state = None if key is None else latest.get(key)
    if state is None:
        return True  # keyless, or beyond what this pass tracked
    if state.offset != offset:
        return False  # a later record of the key supersedes it
    return not (state.tombstone and state.timestamp < tombstone_horizon_ms)


def _batch_time(coord: BatchCoordinate) -> int:
    """When the batch was appended (its max timestamp when the row has no append time)."""
    return coord.log_append_time if coord.log_append_time > 0 else coord.max_timestamp


def _record_time(coord: BatchCoordinate) -> int:
    """The batch's largest record timestamp, as min/max.compaction.lag.ms measure it."""
    if coord.timestamp_type == TimestampType.LOG_APPEND_TIME:
        return coord.log_append_time
    return coord.max_timestamp


def first_uncleanable_offset(
    data: Sequence[BatchCoordinate], now_ms: int, config: CompactionConfig
) -> int:
    """Where the broker's compaction must stop in a partition's data batches (offset
    order), as Kafka's cleaner stops at its active segment and at min.compaction.lag.ms.

    A diskless log has no segment files, so the active segment is the longest tail of
    batches all appended within the last segment.ms and together under segment.bytes
    (what Kafka would not have rolled yet; Kafka rolls on the next append, Lakelog counts
    a segment closed once segment.ms passed). Then the first batch whose largest
    timestamp is newer than now - min.compaction.lag.ms stops it too."""
    end = data[-1].last_offset + 1 if data else 0
    tail_bytes = 0
    for coord in reversed(data):
        tail_bytes += coord.byte_size
        if _batch_time(coord) > now_ms - config.segment_ms and tail_bytes < config.segment_bytes:
            end = coord.base_offset
        else:
            break
    for coord in data:
        if coord.base_offset >= end:
            break
        if _record_time(coord) > now_ms - config.min_compaction_lag_ms:
            return coord.base_offset
    return end


def cleanable(plan: CompactionRange, uncleanable: int) -> CompactionRange:
    """`plan` without the batches at or past the first uncleanable offset."""
    return CompactionRange(
        [c for c in plan.rewrite if c.last_offset < uncleanable],
        [c for c in plan.aborted if c.last_offset < uncleanable],
        [c for c in plan.kept if c.last_offset < uncleanable],
    )


@dataclass(frozen=True, slots=True)
class Dirtiness:
    """How much of a partition's cleanable log was written since its last compaction."""

    dirty_bytes: int
    total_bytes: int
    oldest_dirty_ms: int
    """The oldest largest-timestamp among the dirty batches (-1: none)."""

    @property
    def ratio(self) -> float:
        return self.dirty_bytes / self.total_bytes if self.total_bytes else 0.0


def dirtiness(plan: CompactionRange, cleaned_offset: int) -> Dirtiness:
    """The dirty ratio of a diskless log: bytes of the batches a pass may rewrite (or
    drop) at or past the partition's cleaned offset, over the bytes of all of them. The
    partition's last row counts too (the broker compacts it, keeping its last batch)."""
    rows = [*plan.rewrite, *plan.aborted, *plan.kept]
    dirty = [c for c in rows if c.last_offset >= cleaned_offset]
    return Dirtiness(
        sum(c.byte_size for c in dirty),
        sum(c.byte_size for c in rows),
        min((_record_time(c) for c in dirty), default=-1),
    )


def needs_compaction(
    dirt: Dirtiness, config: CompactionConfig, now_ms: int, tombstones_due_ms: int
) -> bool:
    """Kafka's cleaner choice: dirty ratio at least min.cleanable.dirty.ratio, or a dirty
    record waiting longer than max.compaction.lag.ms; and, as after Kafka's KIP-534, a
    kept tombstone whose delete.retention.ms has passed."""
    if dirt.total_bytes and 0 < tombstones_due_ms <= now_ms:
        return True
    if not dirt.dirty_bytes:
        return False
    if dirt.ratio >= config.min_cleanable_dirty_ratio:
        return True
    return now_ms - dirt.oldest_dirty_ms > config.max_compaction_lag_ms
