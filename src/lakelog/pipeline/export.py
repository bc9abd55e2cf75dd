"""`lakelog pipeline export`: topics to Parquet, partitioned by topic and date, incrementally.

Layout under the output directory (Hive-style):

    <output>/topic=<name>/date=<YYYY-MM-DD>/part-<partition>-<from>-<to>.parquet
    <output>/_lakelog_export_state.json

Columns in the files: partition, offset, timestamp (UTC), key, value, headers. `topic` and
`date` are not in the files: they are the Hive partition folders, and readers take them
from there (`spark.read.parquet(output)`, `pandas.read_parquet(output)` and DuckDB's
`read_parquet('<output>/**/*.parquet', hive_partitioning=true)` all add both columns).
Why not a `topic` column as well: a column that is also a partition folder name is what
made pyarrow refuse the directory ("Unable to merge: Field topic has incompatible types"),
Spark warn COLUMN_ALREADY_EXISTS and DuckDB conflict. Leaving partition columns out of the
files is what Spark's own `partitionBy` and pyarrow's `write_dataset` do, so it is the
layout every engine expects; renaming the folder keys instead would have kept the
duplicate column under a second name. Dates are the records' UTC dates. Each file holds
the committed records (read_committed: no markers, no aborted transactions) of offsets
[from, to) of one partition, at most `max_offsets_per_file` offsets, that fall on that date.

Incremental: the state file records, per topic (and topic id) and partition, the next
offset to export. It is written after the data, atomically. A crash between the two leaves
files the state does not know about; the next run deletes every file of a partition whose
`from` is at or past the recorded offset before it writes, and then writes the same range
again, so a crash re-exports one run's ranges and never duplicates a record. A Spark task
retried within a run rewrites the same file names (a temporary name, `_tmp-...parquet.tmp`,
which no reader's glob or listing picks up, renamed when whole). One export per output
directory at a time.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.fs as pafs
import pyarrow.parquet as pq

from lakelog.pipeline.progress import JobSummary, NullProgress, Progress
from lakelog.pipeline.records import HEADER_TYPE, RecordColumns
from lakelog.spark.log_access import LogSession, partition_bounds
from lakelog.spark.offsets import OffsetRange, PartitionBounds
from lakelog.spark.options import Connection
from lakelog.spark.range_reader import ReadSettings, iter_range_batches

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from lakelog.config import Settings

__all__ = ["EXPORT_SCHEMA", "STATE_FILE", "ExportSummary", "plan_chunks", "run_export"]

STATE_FILE = "_lakelog_export_state.json"
STATE_VERSION = 2
"""2: files without the `topic` column. A version 1 directory is upgraded in place."""
DEFAULT_MAX_OFFSETS_PER_FILE = 1_000_000
MAX_OPEN_WRITERS = 32
"""Dates one task writes at once; a range spanning more rolls over to numbered files."""
MS_PER_DAY = 86_400_000
_PART_RE = re.compile(r"^_?(?:tmp-)?part-(\d+)-(\d+)-(\d+)(?:-\d+)?\.parquet(?:\.tmp)?$")

EXPORT_SCHEMA = pa.schema(
    [
        pa.field("partition", pa.int32()),
        pa.field("offset", pa.int64()),
        pa.field("timestamp", pa.timestamp("us", tz="UTC")),
        pa.field("key", pa.binary()),
        pa.field("value", pa.binary()),
        pa.field("headers", HEADER_TYPE),
    ]
)
"""The columns of every file; `topic` and `date` come from the folders (see module doc)."""


@dataclass
class ExportSummary(JobSummary):
    """What one export run did (`rows()` feeds the CLI's summary table)."""

    topics: int = 0
    ranges: int = 0
    records: int = 0
    files: int = 0
    bytes_written: int = 0
    offsets_lost: int = 0
    """Offsets deleted by retention before any export read them (skipped)."""
    next_offsets: dict[str, dict[str, int]] = field(default_factory=dict)

    def rows(self) -> list[tuple[str, str]]:
        return [
            ("topics", f"{self.topics:,}"),
            ("partitions", f"{self.partitions:,}"),
            ("offset ranges", f"{self.ranges:,}"),
            ("records exported", f"{self.records:,}"),
            ("files written", f"{self.files:,}"),
            ("bytes written", f"{self.bytes_written:,}"),
            ("offsets lost before export", f"{self.offsets_lost:,}"),
            *self.timing_rows(),
        ]


@dataclass(frozen=True, slots=True)
class ExportTask:
    """One Spark task: one chunk of one partition (pickled to executors)."""

    range: OffsetRange
    output: str
    read: ReadSettings


@dataclass(frozen=True, slots=True)
class TaskResult:
    records: int
    files: int
    bytes_written: int


# ------------------------------------------------------------------ planning (pure)


def plan_chunks(start: int, end: int, max_offsets: int) -> list[tuple[int, int]]:
    """[start, end) cut into ranges of at most `max_offsets` offsets, aligned on `start`."""
    return [(lo, min(lo + max_offsets, end)) for lo in range(start, end, max_offsets)]


def part_name(partition: int, start: int, end: int, roll: int = 0) -> str:
    suffix = f"-{roll}" if roll else ""
    return f"part-{partition}-{start}-{end}{suffix}.parquet"


def unrecorded(names: Sequence[str], next_offsets: dict[int, int]) -> list[str]:
    """Names of files (or leftover temporaries) of partitions in `next_offsets` whose range
    starts at or after the recorded next offset: a run that crashed before its state."""
    out = []
    for name in names:
        match = _PART_RE.match(name.rsplit("/", 1)[-1])
        if match is None:
            continue
        partition, start = int(match.group(1)), int(match.group(2))
        if partition in next_offsets and start >= next_offsets[partition]:
            out.append(name)
    return out


# ------------------------------------------------------------------ state file


def _filesystem(output: str) -> tuple[pafs.FileSystem, str]:
    if "://" in output:
        return pafs.FileSystem.from_uri(output)
    return pafs.LocalFileSystem(), os.path.abspath(output)


def read_state(fs: pafs.FileSystem, root: str) -> dict[str, Any]:
    path = f"{root}/{STATE_FILE}"
    if fs.get_file_info(path).type == pafs.FileType.NotFound:
        return {"version": STATE_VERSION, "topics": {}}
    with fs.open_input_stream(path) as stream:
        state = json.loads(stream.read())
    if not isinstance(state, dict) or state.get("version") not in (1, STATE_VERSION):
        raise ValueError(f"{path}: not a version {STATE_VERSION} export state file")
    return state


def upgrade_v1_files(fs: pafs.FileSystem, root: str) -> int:
    """Rewrite the files of a version 1 export (which had a `topic` column) without it, each
    to a temporary name renamed over the old file. A file already without the column is
    left alone, so a run that crashes part-way through simply continues on the next run
    (the state stays version 1 until the run that finishes writes it). Returns the number
    of files rewritten."""
    infos = fs.get_file_info(pafs.FileSelector(root, recursive=True, allow_not_found=True))
    rewritten = 0
    for info in infos:
        name = info.path.rsplit("/", 1)[-1]
        if info.type != pafs.FileType.File or not name.startswith("part-"):
            continue
        if (
            _PART_RE.match(name) is None
            or "topic" not in pq.read_schema(info.path, filesystem=fs).names
        ):
            continue
        table = pq.read_table(info.path, filesystem=fs, partitioning=None).drop_columns(["topic"])
        tmp = f"{info.path.rsplit('/', 1)[0]}/_tmp-{name}.tmp"
        pq.write_table(table, tmp, filesystem=fs, compression="zstd")
        fs.move(tmp, info.path)
        rewritten += 1
    return rewritten


def write_state(fs: pafs.FileSystem, root: str, state: dict[str, Any]) -> None:
    """Write the whole state to a temporary file, then rename it over the old one."""
    tmp = f"{root}/{STATE_FILE}.tmp"
    with fs.open_output_stream(tmp) as stream:
        stream.write(json.dumps(state, indent=1, sort_keys=True).encode())
    fs.move(tmp, f"{root}/{STATE_FILE}")


# ------------------------------------------------------------------ executor side


def _export_rows(columns: RecordColumns, partition: int) -> tuple[pa.RecordBatch, pa.Array]:
    """The records in EXPORT_SCHEMA, and their timestamps in ms."""
    rec = columns.to_arrow()
    rows = rec.num_rows
    millis = rec.column("timestamp")
    micros = pc.multiply(millis, pa.scalar(1000, pa.int64()))
    batch = pa.RecordBatch.from_arrays(
        [
            pa.array([partition] * rows, pa.int32()),
            rec.column("offset"),
            micros.cast(pa.timestamp("us", tz="UTC")),
            rec.column("key"),
            rec.column("value"),
            rec.column("headers"),
        ],
        schema=EXPORT_SCHEMA,
    )
    return batch, millis


def _by_date(
    batch: pa.RecordBatch, timestamps_ms: pa.Array
) -> Iterator[tuple[str, pa.RecordBatch]]:
    days = pc.floor(pc.divide(pc.cast(timestamps_ms, pa.float64()), MS_PER_DAY)).cast(pa.int64())
    for day in sorted(pc.unique(days).to_pylist()):
        date = time.strftime("%Y-%m-%d", time.gmtime(day * 86_400))
        yield date, batch.filter(pc.equal(days, day))


class _DateWriters:
    """Open Parquet writers of one task, one per date, at most MAX_OPEN_WRITERS."""

    def __init__(self, fs: pafs.FileSystem, base: str, rng: OffsetRange) -> None:
        self.fs = fs
        self.base = base
        self.rng = rng
        self.open: dict[str, tuple[pq.ParquetWriter, str, str]] = {}
        self.rolls: dict[str, int] = {}
        self.files = 0
        self.bytes = 0

    def write(self, date: str, rows: pa.RecordBatch) -> None:
        if date not in self.open:
            if len(self.open) >= MAX_OPEN_WRITERS:
                self.close()
            roll = self.rolls.get(date, 0)
            self.rolls[date] = roll + 1
            directory = f"{self.base}/date={date}"
            self.fs.create_dir(directory, recursive=True)
            name = part_name(self.rng.partition, self.rng.start, self.rng.end, roll)
            final, tmp = f"{directory}/{name}", f"{directory}/_tmp-{name}.tmp"
            writer = pq.ParquetWriter(tmp, EXPORT_SCHEMA, filesystem=self.fs, compression="zstd")
            self.open[date] = (writer, tmp, final)
        self.open[date][0].write_batch(rows)

    def close(self) -> None:
        for writer, tmp, final in self.open.values():
            writer.close()
            self.fs.move(tmp, final)
            self.files += 1
            self.bytes += self.fs.get_file_info(final).size or 0
        self.open.clear()


def export_task(task: ExportTask) -> TaskResult:
    """Write one chunk's records, per date, to their deterministic file names."""
    fs, root = _filesystem(task.output)
    rng = task.range
    writers = _DateWriters(fs, f"{root}/topic={rng.topic}", rng)
    records = 0
    try:
        for columns in iter_range_batches(rng, task.read):
            rows, millis = _export_rows(columns, rng.partition)
            records += rows.num_rows
            for date, part in _by_date(rows, millis):
                writers.write(date, part)
    finally:
        writers.close()
    return TaskResult(records, writers.files, writers.bytes)


# ------------------------------------------------------------------ driver


def _connection(settings: Settings) -> Connection:
    return Connection(settings.resolved_storage_url, settings.resolved_coordinator_url)


async def _bounds(connection: Connection, topics: Sequence[str]) -> list[PartitionBounds]:
    async with LogSession(connection) as log:
        return await partition_bounds(log.coordinator, topics, read_committed=True)


def run_export(
    settings: Settings,
    topics: Sequence[str],
    output: str,
    progress: Progress | None = None,
    *,
    spark: SparkSession | None = None,
    spark_factory: Callable[[], SparkSession] | None = None,
    max_offsets_per_file: int = DEFAULT_MAX_OFFSETS_PER_FILE,
) -> ExportSummary:
    """Export the topics' committed records written since the last run to `output`.

    Unknown topics raise ValueError (nothing is written, no directory created). `spark`:
    the session to run on, or `spark_factory` to build one only when there are new records
    (default: the pipeline's, built or reused by `lakelog.pipeline.session`); with nothing
    new, no session is started."""
    progress = progress or NullProgress()
    summary = ExportSummary("export")
    if not topics:
        raise ValueError("name at least one topic to export")
    if max_offsets_per_file < 1:
        raise ValueError("max_offsets_per_file must be >= 1")
    connection = _connection(settings)
    if connection.storage_url.startswith("memory:"):
        raise ValueError("export needs a shared object store: memory:// is per process")
    fs, root = _filesystem(output)
    state = read_state(fs, root)

    progress.stage("planning")
    bounds = asyncio.run(_bounds(connection, topics))
    found = {b.topic for b in bounds}
    missing = [t for t in topics if t not in found]
    if missing:
        raise ValueError(f"unknown topics: {', '.join(missing)}")
    tasks, starts, next_offsets = _plan(bounds, state, summary, progress, output, connection)
    tasks = _chunked(tasks, max_offsets_per_file)
    summary.topics = len(set(topics))
    summary.partitions = len(bounds)
    summary.ranges = len(tasks)

    if state["version"] == 1:
        upgraded = upgrade_v1_files(fs, root)
        progress.log(f"upgraded {upgraded} files of a version 1 export (no topic column)")
        state["version"] = STATE_VERSION
    _remove_unrecorded(fs, root, starts)
    summary.nothing_to_do = not tasks
    if tasks:
        if spark is None and spark_factory is not None:
            spark = spark_factory()
        if spark is None:
            from lakelog.pipeline.session import build_session

            spark = build_session()
        progress.stage(f"exporting {len(tasks)} offset ranges", total=len(tasks))
        results: list[TaskResult] = (
            spark.sparkContext.parallelize(tasks, len(tasks)).map(export_task).collect()
        )
        progress.advance(len(tasks))
        summary.records = sum(r.records for r in results)
        summary.files = sum(r.files for r in results)
        summary.bytes_written = sum(r.bytes_written for r in results)
        summary.objects_written = summary.files
    state["topics"] = {**state["topics"], **next_offsets}
    fs.create_dir(root, recursive=True)
    write_state(fs, root, state)
    summary.next_offsets = {t: dict(v["next"]) for t, v in next_offsets.items()}
    return summary.finish()  # type: ignore[return-value]


def _plan(
    bounds: Sequence[PartitionBounds],
    state: dict[str, Any],
    summary: ExportSummary,
    progress: Progress,
    output: str,
    connection: Connection,
) -> tuple[list[ExportTask], dict[tuple[str, int], int], dict[str, dict[str, Any]]]:
    """One task per partition with new records, where each partition's export starts, and
    the state each topic will have after."""
    read = ReadSettings(connection, read_committed=True, fail_on_data_loss=False)
    tasks: list[ExportTask] = []
    starts: dict[tuple[str, int], int] = {}
    next_offsets: dict[str, dict[str, Any]] = {}
    for b in bounds:
        recorded = state["topics"].get(b.topic)
        if recorded is not None and recorded.get("topic_id") != b.topic_id:
            raise ValueError(
                f"topic {b.topic} was deleted and recreated since it was last exported to "
                f"{output}: move topic={b.topic} and its state entry away, or export elsewhere"
            )
        topic_state = next_offsets.setdefault(b.topic, {"topic_id": b.topic_id, "next": {}})
        start = b.log_start
        if recorded is not None and str(b.partition) in recorded.get("next", {}):
            start = int(recorded["next"][str(b.partition)])
            if start < b.log_start:
                summary.offsets_lost += b.log_start - start
                progress.log(
                    f"{b.topic}-{b.partition}: offsets {start}..{b.log_start - 1} were deleted "
                    "before export read them"
                )
                start = b.log_start
        end = max(start, b.end)
        starts[(b.topic, b.partition)] = start
        topic_state["next"][str(b.partition)] = end
        if start < end:
            tasks.append(
                ExportTask(OffsetRange(b.topic, b.topic_id, b.partition, start, end), output, read)
            )
    return tasks, starts, next_offsets


def _chunked(tasks: Sequence[ExportTask], max_offsets: int) -> list[ExportTask]:
    out = []
    for task in tasks:
        rng = task.range
        for lo, hi in plan_chunks(rng.start, rng.end, max_offsets):
            chunk = OffsetRange(rng.topic, rng.topic_id, rng.partition, lo, hi)
            out.append(ExportTask(chunk, task.output, task.read))
    return out


def _remove_unrecorded(fs: pafs.FileSystem, root: str, starts: dict[tuple[str, int], int]) -> None:
    """Delete files of ranges a crashed run wrote but never recorded (see module doc): every
    file of a partition whose range begins at or after where this run begins."""
    for topic in sorted({t for t, _ in starts}):
        directory = f"{root}/topic={topic}"
        if fs.get_file_info(directory).type != pafs.FileType.Directory:
            continue
        nexts = {p: start for (t, p), start in starts.items() if t == topic}
        infos = fs.get_file_info(pafs.FileSelector(directory, recursive=True))
        names = [i.path for i in infos if i.type == pafs.FileType.File]
        for path in unrecorded(names, nexts):
            fs.delete_file(path)
