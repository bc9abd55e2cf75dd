"""`lakelog pipeline tables`: table topics' committed records into their Iceberg tables.

One pass, per table topic (`lakelog.iceberg.mode` not `disabled`):

1. The driver opens the catalog (`lakelog.tables.catalog`), creates the topic's table (and,
   in value_schema mode, its dead-letter table `lakelog_dlq.<topic>`) if missing, adds the
   columns a newer value schema brings (Iceberg schema evolution; incompatible schemas
   were refused at config time), and reads where each table stopped: the table property
   `lakelog.next-offsets` (JSON: topic id and next offset per partition).
2. Spark tasks, one per chunk of a partition from there to its last stable offset, read
   the committed records (read_committed: no markers, no aborted transactions), build the
   rows (`lakelog.tables.rows`) and write Parquet data files with pyarrow, one per time
   bucket of the table's partitioning, under `tables/<topic>/data/` with this run's id in
   their names (so no run ever overwrites a file a table references).
3. The driver commits each table's files in one Iceberg transaction: an append of the files
   (`add_files`, which reads their footers for statistics and partition values) whose
   snapshot summary records `lakelog.next-offsets`, together with the same property on the
   table. The dead-letter table commits first; each table skips the offsets it already has.

Exactly once: a table's rows and its next offsets change in one atomic catalog commit
(a compare-and-swap of the metadata pointer, never retried onto a newer table: see
NO_RETRIES), and a run starts from the committed offsets.
A run killed before or during the commit leaves files no snapshot references (and maybe a
metadata file the pointer never reached): the rerun writes the range again under new
names, and `lakelog pipeline gc` deletes the leftovers after its orphan grace
(`lakelog.pipeline.tables_gc`). Killed after the commit, the rerun starts after it.

`cleanup.policy=compact` topics keep one row per key: their commit is an upsert (the
pass's files are staging, read back by the driver), see `lakelog.pipeline.tables_upsert`.

Fault hook for the kill tests: `LAKELOG_TABLES_PAUSE_AT=<step>:<marker file>` (steps:
`written`, `committing`, `committed`) makes the driver create the marker file and wait
there, so a test can SIGKILL it at exactly that step.
"""

from __future__ import annotations

import json
import os
import time
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from lakelog.pipeline.context import JobContext, PipelineError
from lakelog.pipeline.export import plan_chunks
from lakelog.pipeline.progress import JobSummary
from lakelog.spark.log_access import partition_bounds
from lakelog.spark.offsets import OffsetRange, PartitionBounds
from lakelog.spark.options import Connection
from lakelog.spark.range_reader import ReadSettings, iter_range_batches
from lakelog.tables.catalog import DLQ_NAMESPACE, NAMESPACE, Warehouse, open_catalog, warehouse
from lakelog.tables.decode import RegistryWriters
from lakelog.tables.registry_writers import registry_writers
from lakelog.tables.rows import DLQ_SCHEMA, RowBuilder, table_schema, timestamp_column
from lakelog.tables.table_config import TableConfigError, TableSpec, table_spec

if TYPE_CHECKING:
    from pyiceberg.catalog import Catalog
    from pyiceberg.table import Table

__all__ = ["NEXT_OFFSETS", "TablesSummary", "run_tables"]

NEXT_OFFSETS = "lakelog.next-offsets"
DEFAULT_MAX_OFFSETS_PER_TASK = 1_000_000
MAX_OPEN_WRITERS = 32
"""Time buckets one task writes at once; more roll over to further files."""
NO_RETRIES = {"commit.retry.num-retries": "0"}
"""pyiceberg would rebase a commit that lost a race onto the winner's and retry it: two
passes over the same offsets would then both land. Without retries the loser fails (its
files become orphans) and the next pass starts from the winner's offsets."""
PAUSE_ENV = "LAKELOG_TABLES_PAUSE_AT"
PAUSE_LIMIT_S = 3600.0
_BUCKET_UNITS = {"day(timestamp)": "D", "hour(timestamp)": "h", "month(timestamp)": "M"}
_BUCKET_FORMATS = {"D": "%Y-%m-%d", "h": "%Y-%m-%d-%H", "M": "%Y-%m"}


@dataclass
class TablesSummary(JobSummary):
    """What one pass did (`rows()` feeds the CLI's summary table)."""

    tables: int = 0
    ranges: int = 0
    rows_written: int = 0
    dlq_rows: int = 0
    files: int = 0
    bytes_written: int = 0
    commits: int = 0
    offsets_lost: int = 0
    columns_added: int = 0

    def rows(self) -> list[tuple[str, str]]:
        return [
            ("table topics", f"{self.tables:,}"),
            ("partitions", f"{self.partitions:,}"),
            ("offset ranges", f"{self.ranges:,}"),
            ("rows written", f"{self.rows_written:,}"),
            ("dead-letter rows", f"{self.dlq_rows:,}"),
            ("files written", f"{self.files:,}"),
            ("bytes written", f"{self.bytes_written:,}"),
            ("commits", f"{self.commits:,}"),
            ("columns added", f"{self.columns_added:,}"),
            ("offsets lost before the table read them", f"{self.offsets_lost:,}"),
            *self.timing_rows(),
        ]


@dataclass(frozen=True, slots=True)
class TableTask:
    """One Spark task: one chunk of one partition of one table topic (pickled)."""

    range: OffsetRange
    read: ReadSettings
    spec: TableSpec
    warehouse: Warehouse
    run_id: str
    main_from: int
    """Rows of offsets below this are in the table already."""
    dlq_from: int
    """Dead-letter rows of offsets below this are in the dead-letter table already."""
    writers: RegistryWriters = field(default_factory=RegistryWriters)
    """The registry's schemas of the topic's subjects (value_schema mode)."""


@dataclass(frozen=True, slots=True)
class TaskResult:
    topic: str
    files: list[str]
    dlq_files: list[str]
    rows: int
    dlq_rows: int
    bytes_written: int


@dataclass
class TopicPlan:
    """The driver's view of one table topic during a pass."""

    topic: str
    topic_id: str
    spec: TableSpec
    table: Table
    dlq: Table | None
    main_next: dict[int, int]
    dlq_next: dict[int, int]
    compact: bool = False
    """cleanup.policy includes compact: one row per key (`tables_upsert`)."""
    writers: RegistryWriters = field(default_factory=RegistryWriters)
    ends: dict[int, int] = field(default_factory=dict)


# ------------------------------------------------------------------ executor side


def bucket_names(timestamps: pa.Array, partition: str) -> pa.Array:
    """Each row's time bucket as text (`2026-03-01`), or "" when unpartitioned."""
    unit = _BUCKET_UNITS.get(partition)
    if unit is None:
        return pa.array([""] * len(timestamps), pa.string())
    micros = timestamps.cast(pa.int64()).to_numpy(zero_copy_only=False)
    import numpy as np

    buckets = micros.astype("datetime64[us]").astype(f"datetime64[{unit}]")
    fmt = _BUCKET_FORMATS[unit]
    names = {
        b: time.strftime(fmt, time.gmtime(int(b.astype("datetime64[s]").astype(np.int64))))
        for b in np.unique(buckets)
    }
    return pa.array([names[b] for b in buckets], pa.string())


class _Writers:
    """Open Parquet writers of one task and table, one per time bucket, bounded."""

    def __init__(self, wh: Warehouse, base: str, schema: pa.Schema, stem: str) -> None:
        self.io = wh.file_io()
        self.base = base
        self.schema = schema
        self.stem = stem
        self.open: dict[str, tuple[pq.ParquetWriter, Any, str]] = {}
        self.count = 0
        self.paths: list[str] = []
        self.bytes = 0

    def write(self, bucket: str, rows: pa.RecordBatch, directory: str) -> None:
        if bucket not in self.open:
            if len(self.open) >= MAX_OPEN_WRITERS:
                self.close()
            self.count += 1
            sub = f"{directory}/" if directory else ""
            path = f"{self.base}/data/{sub}{self.stem}-{self.count}.parquet"
            stream = self.io.new_output(path).create(overwrite=True)
            writer = pq.ParquetWriter(stream, self.schema, compression="zstd")
            self.open[bucket] = (writer, stream, path)
        self.open[bucket][0].write_batch(rows)

    def close(self) -> None:
        for writer, stream, path in self.open.values():
            writer.close()
            stream.close()
            self.paths.append(path)
            self.bytes += len(self.io.new_input(path))
        self.open.clear()


def _split(
    writers: _Writers, rows: pa.RecordBatch, column: str, partition: str, prefix: str
) -> None:
    if rows.num_rows == 0:
        return
    if partition == "none":
        writers.write("", rows, "")
        return
    names = bucket_names(rows.column(column), partition)
    for bucket in pc.unique(names).to_pylist():
        writers.write(bucket, rows.filter(pc.equal(names, bucket)), f"{prefix}={bucket}")


def table_task(task: TableTask) -> TaskResult:
    """Write one chunk's table rows and dead-letter rows to new Parquet files."""
    rng = task.range
    builder = RowBuilder(task.spec, rng.partition, task.writers)
    stem = f"{rng.partition}-{rng.start}-{rng.end}-{task.run_id}"
    wh = task.warehouse
    main = _Writers(wh, wh.table_location(rng.topic), builder.schema, stem)
    dlq = _Writers(wh, wh.dlq_location(rng.topic), DLQ_SCHEMA, stem)
    column = timestamp_column(task.spec)
    unit = task.spec.partition.split("(")[0]
    rows = dlq_rows = 0
    try:
        for columns in iter_range_batches(rng, task.read):
            good, bad = builder.build(columns.to_arrow(producer=True))
            good = good.filter(pc.greater_equal(good.column(1), task.main_from))
            bad = bad.filter(pc.greater_equal(bad.column("offset"), task.dlq_from))
            rows += good.num_rows
            dlq_rows += bad.num_rows
            _split(main, good, column, task.spec.partition, f"{column}_{unit}")
            _split(dlq, bad, "timestamp", "none", "")
    finally:
        main.close()
        dlq.close()
    return TaskResult(rng.topic, main.paths, dlq.paths, rows, dlq_rows, main.bytes + dlq.bytes)


# ------------------------------------------------------------------ driver


def pause_at(step: str) -> None:
    """The kill tests' fault hook (see the module doc); nothing unless the env names it."""
    wanted = os.environ.get(PAUSE_ENV, "")
    name, _, marker = wanted.partition(":")
    if name != step or not marker:
        return
    with open(marker, "w") as out:
        out.write(f"{os.getpid()}\n")
    deadline = time.monotonic() + PAUSE_LIMIT_S
    while time.monotonic() < deadline:
        time.sleep(0.2)


def table_topics(ctx: JobContext, names: Sequence[str] | None) -> list[tuple[Any, TableSpec]]:
    """(topic info, table spec) of the named topics, or of every table topic. A named
    topic that does not exist, or is not a table topic, is a PipelineError."""
    infos = ctx.run(ctx.coordinator.get_topics(list(names) if names else None))
    if names:
        found = {i.name for i in infos}
        missing = [n for n in names if n not in found]
        if missing:
            raise PipelineError(f"unknown topics: {', '.join(missing)}")
    out = []
    for info in sorted(infos, key=lambda i: i.name):
        try:
            spec = table_spec(info.configs)
        except TableConfigError as exc:
            raise PipelineError(f"topic {info.name}: {exc}") from None
        if spec.enabled:
            out.append((info, spec))
        elif names:
            raise PipelineError(
                f"topic {info.name} is not a table topic: set lakelog.iceberg.mode "
                "to key_value or value_schema"
            )
    return out


def _partition_spec_fields(spec: TableSpec) -> tuple[str, Any] | None:
    from pyiceberg.transforms import DayTransform, HourTransform, MonthTransform

    transforms = {
        "day(timestamp)": DayTransform(),
        "hour(timestamp)": HourTransform(),
        "month(timestamp)": MonthTransform(),
    }
    if spec.partition not in transforms:
        return None
    return timestamp_column(spec), transforms[spec.partition]


def _ensure_table(
    catalog: Catalog,
    namespace: str,
    topic: str,
    schema: pa.Schema,
    location: str,
    partition: tuple[str, Any] | None,
    topic_id: str,
) -> tuple[Table, int]:
    """The table (created if missing, with new columns added); and how many were added."""
    from pyiceberg.exceptions import NoSuchTableError

    identifier = (namespace, topic)
    catalog.create_namespace_if_not_exists(namespace)
    try:
        table = catalog.load_table(identifier)
    except NoSuchTableError:
        with catalog.create_table_transaction(
            identifier,
            schema=schema,
            location=location,
            properties={"lakelog.topic-id": topic_id, "format-version": "2", **NO_RETRIES},
        ) as tx:
            if partition is not None:
                column, transform = partition
                with tx.update_spec() as update:
                    update.add_field(column, transform, f"{column}_{transform}")
        return catalog.load_table(identifier), 0
    recorded = table.properties.get("lakelog.topic-id")
    if recorded and recorded != topic_id:
        raise PipelineError(
            f"topic {topic} was deleted and recreated since its table was written: "
            f"drop the table {namespace}.{topic} (or rename it) to start a new one"
        )
    if any(table.properties.get(k) != v for k, v in NO_RETRIES.items()):
        with table.transaction() as tx:
            tx.set_properties(NO_RETRIES)
        table = catalog.load_table(identifier)
    # New columns, and int -> long / float -> double widenings (what config validation lets
    # through); when the schema already has everything, nothing is committed.
    have = {f.name for f in table.schema().fields}
    before = table.metadata_location
    with table.update_schema() as update:
        update.union_by_name(schema)
    if table.metadata_location != before:
        table = catalog.load_table(identifier)
    return table, len([f.name for f in schema if f.name not in have])


def _next_offsets(table: Table | None) -> dict[int, int]:
    if table is None:
        return {}
    raw = table.properties.get(NEXT_OFFSETS)
    if not raw:
        return {}
    return {int(p): int(o) for p, o in json.loads(raw)["next"].items()}


def _plan_topic(
    catalog: Catalog, wh: Warehouse, info: Any, spec: TableSpec, summary: TablesSummary
) -> TopicPlan:
    topic, topic_id = info.name, str(info.topic_id)
    table, added = _ensure_table(
        catalog,
        NAMESPACE,
        topic,
        table_schema(spec),
        wh.table_location(topic),
        _partition_spec_fields(spec),
        topic_id,
    )
    dlq = None
    if spec.mode == "value_schema":
        dlq, _ = _ensure_table(
            catalog, DLQ_NAMESPACE, topic, DLQ_SCHEMA, wh.dlq_location(topic), None, topic_id
        )
    summary.columns_added += added
    compact = "compact" in info.configs.get("cleanup.policy", "delete")
    return TopicPlan(
        topic, topic_id, spec, table, dlq, _next_offsets(table), _next_offsets(dlq), compact
    )


def _tasks(
    plans: dict[str, TopicPlan],
    bounds: Sequence[PartitionBounds],
    read: ReadSettings,
    wh: Warehouse,
    run_id: str,
    max_offsets: int,
    summary: TablesSummary,
) -> list[TableTask]:
    tasks = []
    for b in bounds:
        plan = plans[b.topic]
        main_from = plan.main_next.get(b.partition, b.log_start)
        dlq_from = plan.dlq_next.get(b.partition, b.log_start) if plan.dlq else b.end
        start = min(main_from, dlq_from)
        if start < b.log_start:
            summary.offsets_lost += b.log_start - start
            start = b.log_start
        end = max(start, b.end)
        plan.ends[b.partition] = end
        for lo, hi in plan_chunks(start, end, max_offsets):
            rng = OffsetRange(b.topic, b.topic_id, b.partition, lo, hi)
            tasks.append(
                TableTask(rng, read, plan.spec, wh, run_id, main_from, dlq_from, plan.writers)
            )
    return tasks


def _commit(
    table: Table,
    files: list[str],
    next_offsets: dict[int, int],
    topic_id: str,
    upsert_mode: str | None = None,
) -> bool:
    """Append the files (or, `upsert_mode` given, upsert their rows: compacted topics) and
    record the next offsets, in one catalog commit; False when nothing changed."""
    previous = _next_offsets(table)
    merged = {**previous, **next_offsets}
    if not files and merged == previous:
        return False
    offsets = {str(p): o for p, o in sorted(merged.items())}
    value = json.dumps({"topic_id": topic_id, "next": offsets})
    if upsert_mode is not None:
        from lakelog.pipeline.tables_upsert import upsert_commit

        upsert_commit(table, files, upsert_mode, {NEXT_OFFSETS: value})
        for path in files:  # staging only: the upsert wrote the rows anew
            table.io.delete(path)
        return True
    with table.transaction() as tx:
        if files:
            tx.add_files(
                files, snapshot_properties={NEXT_OFFSETS: value}, check_duplicate_files=False
            )
        tx.set_properties({NEXT_OFFSETS: value})
    return True


def _pausing_commits(catalog: Catalog) -> None:
    """`committing` fault hook: pause after the new metadata file is written, before the
    catalog's pointer moves to it."""
    if not os.environ.get(PAUSE_ENV, "").startswith("committing:"):
        return
    original = catalog._write_metadata  # type: ignore[attr-defined]

    def write_then_pause(*args: Any, **kwargs: Any) -> Any:
        result = original(*args, **kwargs)
        pause_at("committing")
        return result

    catalog._write_metadata = write_then_pause  # type: ignore[attr-defined]


def run_tables(
    ctx: JobContext,
    topics: Sequence[str] | None = None,
    *,
    max_offsets_per_task: int = DEFAULT_MAX_OFFSETS_PER_TASK,
) -> TablesSummary:
    """One pass over the table topics (all, or the named ones): see the module doc."""
    summary = TablesSummary("tables")
    settings = ctx.settings
    wh = warehouse(settings.resolved_storage_url)
    ctx.progress.stage("reading the catalog")
    chosen = table_topics(ctx, topics)
    summary.tables = len(chosen)
    if not chosen:
        summary.nothing_to_do = True
        return summary.finish()  # type: ignore[return-value]
    catalog = open_catalog(settings)
    plans = {info.name: _plan_topic(catalog, wh, info, spec, summary) for info, spec in chosen}
    for plan in plans.values():
        if plan.spec.mode == "value_schema":
            plan.writers = ctx.run(registry_writers(ctx.coordinator, plan.topic))
    bounds = ctx.run(partition_bounds(ctx.coordinator, list(plans), read_committed=True))
    summary.partitions = len(bounds)
    connection = Connection(settings.resolved_storage_url, settings.resolved_coordinator_url)
    read = ReadSettings(connection, read_committed=True, fail_on_data_loss=False)
    run_id = uuid.uuid4().hex[:12]
    tasks = _tasks(plans, bounds, read, wh, run_id, max_offsets_per_task, summary)
    summary.ranges = len(tasks)
    results: list[TaskResult] = []
    if tasks:
        ctx.progress.stage(f"writing {len(tasks)} offset ranges", total=len(tasks))
        results = ctx.spark.sparkContext.parallelize(tasks, len(tasks)).map(table_task).collect()
        ctx.progress.advance(len(tasks))
    pause_at("written")
    summary.rows_written = sum(r.rows for r in results)
    summary.dlq_rows = sum(r.dlq_rows for r in results)
    summary.files = sum(len(r.files) + len(r.dlq_files) for r in results)
    summary.bytes_written = sum(r.bytes_written for r in results)
    summary.objects_written = summary.files
    _pausing_commits(catalog)
    ctx.progress.stage("committing", total=len(plans))
    for name, plan in plans.items():
        mine = [r for r in results if r.topic == name]
        if plan.dlq is not None and _commit(
            plan.dlq, [f for r in mine for f in r.dlq_files], plan.ends, plan.topic_id
        ):
            summary.commits += 1
        upsert = plan.spec.mode if plan.compact else None
        main_files = [f for r in mine for f in r.files]
        if _commit(plan.table, main_files, plan.ends, plan.topic_id, upsert):
            summary.commits += 1
        ctx.progress.advance()
    pause_at("committed")
    summary.nothing_to_do = not tasks and summary.commits == 0
    return summary.finish()  # type: ignore[return-value]


def iter_passes(every: float | None) -> Iterator[int]:
    """Pass numbers: one pass, or one every `every` seconds until interrupted."""
    count = 0
    while True:
        yield count
        count += 1
        if every is None:
            return
        time.sleep(every)
