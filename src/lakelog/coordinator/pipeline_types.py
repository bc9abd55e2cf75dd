"""The pipeline part of the batch coordinator contract: what gc, merge and compaction read
about files and batches, and `commit_merge`, which moves batches to rewritten objects.

A move names the batch by its partition and offsets *and* by where it lives now (object
key and byte offset): `commit_merge` applies it only if the batch still lives there, so a
batch deleted (retention, DeleteRecords) or moved by another job while the pipeline copied
it stays as it is, and the copied bytes become dead bytes of the new object."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from uuid import UUID

from lakelog.util.errors import ErrorCode


@dataclass(frozen=True, slots=True)
class FileInfo:
    """One object the coordinator knows."""

    object_key: str
    state: str
    """'committed' or 'deleting'."""
    size: int
    live_bytes: int
    committed_at: int
    """ms since the epoch (for merged objects: when the merge committed)."""
    marked_at: int | None
    """When the file lost its last live batch (state 'deleting'), else None."""


@dataclass(frozen=True, slots=True)
class FileBatch:
    """A batch row and where it lives (markers have no file, so never appear here). One
    row may cover a run of batches (see `protocol.batch_runs`)."""

    object_key: str
    topic_id: UUID
    partition: int
    base_offset: int
    last_offset: int
    byte_offset: int
    byte_size: int
    timestamp_type: int = 0
    is_transactional: bool = False

    @property
    def source(self) -> BatchSource:
        return BatchSource(self.base_offset, self.last_offset, self.object_key, self.byte_offset)


@dataclass(frozen=True, slots=True)
class FileReference:
    """What the coordinator knows of one object key, for GC's last check."""

    object_key: str
    known: bool
    """A files row exists (any state)."""
    state: str | None = None
    batch_count: int = 0
    """Batches that point into the object; GC must never delete it while this is > 0."""


@dataclass(frozen=True, slots=True)
class BatchSource:
    """An existing batch row, named by its offsets and by where it lives now."""

    base_offset: int
    last_offset: int
    object_key: str
    byte_offset: int


@dataclass(frozen=True, slots=True)
class BatchMove:
    """Replace one partition's consecutive batch rows (`sources`, in offset order) with one
    row at a place in the new object, or drop them.

    Merge moves one row as it is, or joins a run of rows whose offsets follow each other
    into one row (fewer rows for the coordinator; the bytes are the batches back to back).
    Compaction moves one row with smaller bytes; when it dropped the row's first or last
    batches, `new_base_offset` / `new_last_offset` say which offsets the bytes now span."""

    topic_id: UUID
    partition: int
    sources: tuple[BatchSource, ...]
    new_byte_offset: int = -1
    new_byte_size: int = 0
    new_base_offset: int = -1
    """-1: the first source's base offset."""
    new_last_offset: int = -1
    """-1: the last source's last offset."""
    drop: bool = False
    """True: every record of the rows was compacted away; the rows go."""

    @property
    def base_offset(self) -> int:
        return self.new_base_offset if self.new_base_offset >= 0 else self.sources[0].base_offset

    @property
    def last_offset(self) -> int:
        return self.new_last_offset if self.new_last_offset >= 0 else self.sources[-1].last_offset


@dataclass(frozen=True, slots=True)
class MergeCommit:
    """One rewritten object and the batches it takes over."""

    new_object_key: str | None
    """None when every move is a drop (nothing was written)."""
    new_object_size: int
    moves: Sequence[BatchMove]


@dataclass(frozen=True, slots=True)
class MergeCommitResult:
    error: ErrorCode
    """NONE, or INVALID_REQUEST when the new object key is already known (nothing done)."""
    moved: int = 0
    dropped: int = 0
    skipped: int = 0
    """Moves whose batch no longer lives where the move says (or is gone)."""


@dataclass(frozen=True, slots=True)
class PipelineRun:
    """One run of a pipeline job, as `lakelog pipeline` records it when it ends."""

    run_id: str
    job: str
    started_at: int
    """ms since the epoch."""
    seconds: float
    outcome: str
    """"ok" or "failed"."""
    figures: str
    """The job summary's figures (and the error of a failed run), JSON."""


@dataclass(frozen=True, slots=True)
class CompactionLease:
    """A partition's compaction state, answered to the broker that holds its lease."""

    cleaned_offset: int
    """Below this the log is compacted (no key has two records there); 0 at first."""
    tombstones_due_ms: int
    """When the oldest tombstone the last pass kept passes delete.retention.ms, so the
    partition needs a pass even with nothing new written (0: no tombstone kept)."""
