"""`lakelog pipeline <job>`: the data pipeline's jobs on Spark, with a progress display and
a summary table at the end. Job modules (and PySpark) are imported only when a job runs."""

from __future__ import annotations

import contextlib
import json
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    SpinnerColumn,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
)
from rich.progress import Progress as RichBar

from lakelog.cli.common import UserError, debug_enabled, describe, print_json, print_table, warn
from lakelog.cli.options import (
    CoordinatorUrlOption,
    DataDirOption,
    StorageUrlOption,
    build_settings,
)
from lakelog.config import Settings
from lakelog.coordinator.pipeline_types import PipelineRun
from lakelog.pipeline.context import JobContext, PipelineError
from lakelog.pipeline.progress import JobSummary
from lakelog.pipeline.requirements import missing_requirement

pipeline_app = typer.Typer(
    help=(
        "Run the data pipeline's jobs (gc, merge, retention, compact, export, tables) on "
        "Spark; "
        "pack Lakelog for Spark executors."
    ),
    no_args_is_help=True,
)
console = Console(stderr=True)

MasterOption = Annotated[
    str | None,
    typer.Option(help="Spark master URL (default: local[*]; under spark-submit, its own)."),
]
JsonOption = Annotated[bool, typer.Option("--json", help="Print the summary as JSON.")]
DryRunOption = Annotated[
    bool, typer.Option("--dry-run", help="Plan and report, but change and delete nothing.")
]


class RichProgress:
    """`Progress` drawn with rich: one bar per stage, finished stages stay visible."""

    def __init__(self, bar: RichBar) -> None:
        self._bar = bar
        self._task: TaskID | None = None

    def stage(self, description: str, total: int | None = None) -> None:
        self._end_stage()
        self._task = self._bar.add_task(description, total=total)

    def advance(self, amount: int = 1) -> None:
        if self._task is not None:
            self._bar.advance(self._task, amount)

    def log(self, message: str) -> None:
        self._bar.console.log(message)

    def _end_stage(self) -> None:
        if self._task is None:
            return
        task = next(t for t in self._bar.tasks if t.id == self._task)
        self._bar.update(self._task, total=task.completed if task.total is None else task.total)
        self._bar.update(self._task, completed=task.total or task.completed)

    def close(self) -> None:
        self._end_stage()


def print_summary(summary: JobSummary, as_json: bool = False) -> None:
    """The job's figures: a table (plain padded lines off a terminal) or JSON."""
    if as_json:
        print_json(
            {
                "job": summary.job,
                "dry_run": summary.dry_run,
                "nothing_to_do": summary.nothing_to_do,
                "spark_started": summary.spark_seconds is not None,
                "figures": dict(summary.rows()),
            }
        )
        return
    title = f"lakelog pipeline {summary.job}" + (" (dry run)" if summary.dry_run else "")
    if summary.nothing_to_do:
        title += ": nothing to do" + (
            ", Spark not started" if summary.spark_seconds is None else ""
        )
    print_table(["figure", "value"], summary.rows(), title=title)


def job_settings(
    data_dir: Path | None,
    storage_url: str | None,
    coordinator_url: str | None,
    master: str | None,
    **extra: Any,
) -> Settings:
    """The job's settings, checked before anything is opened: a bad value, an unknown
    Spark master, or a cluster that is not there (no coordinator file at --data-dir) is a
    one-line UserError, and nothing is created."""
    from lakelog.cli.preflight import check_existing_cluster
    from lakelog.pipeline.session import check_master

    try:
        check_master(master)
    except ValueError as exc:
        raise UserError(exc) from exc
    settings = build_settings(
        data_dir=data_dir, storage_url=storage_url, coordinator_url=coordinator_url, **extra
    )
    check_existing_cluster(settings)
    return settings


def run_job(
    settings: Settings,
    master: str | None,
    dry_run: bool,
    job: Callable[[JobContext], JobSummary],
    as_json: bool = False,
    name: str = "",
) -> JobSummary:
    """Run one job (with a live progress display on a terminal) and print its summary,
    whose time counts everything from here on, Spark start-up included (also shown on
    its own). The run is recorded in the coordinator (`pipeline_runs`: the console's job
    history), failed or not. Errors end the command with one `error:` line (UserError)."""
    from lakelog.pipeline import spark_quiet

    spark_quiet.verbose = debug_enabled()
    started = time.monotonic()
    started_ms = int(time.time() * 1000)
    context = JobContext(settings, master=master, dry_run=dry_run)
    try:
        context.__enter__()
    except Exception as exc:
        context.__exit__(None, None, None)
        raise UserError(f"cannot open the cluster's coordinator: {describe(exc)}") from exc
    missing = missing_requirement()
    if missing is not None:  # recorded, so the console's Pipeline page says it too
        _record(context, name, started_ms, 0.0, "failed", {"error": missing})
        context.__exit__(None, None, None)
        raise UserError(missing)
    try:
        with _progress(context):
            summary = job(context)
        summary.seconds = time.monotonic() - started
        summary.spark_seconds = context.spark_seconds
        figures: dict[str, object] = {
            "dry_run": summary.dry_run,
            "nothing_to_do": summary.nothing_to_do,
            **dict(summary.rows()),
        }
        _record(context, name or summary.job, started_ms, summary.seconds, "ok", figures)
    except (PipelineError, OSError, ValueError) as exc:
        why = str(exc) if isinstance(exc, PipelineError) else describe(exc)  # no class names
        _record(context, name, started_ms, time.monotonic() - started, "failed", {"error": why})
        raise UserError(why) from exc
    except BaseException:
        _record(context, name, started_ms, time.monotonic() - started, "failed", {})
        raise
    finally:
        context.__exit__(None, None, None)
    print_summary(summary, as_json)
    return summary


def _record(
    context: JobContext,
    name: str,
    started_ms: int,
    seconds: float,
    outcome: str,
    figures: dict[str, object],
) -> None:
    """Keep the run in the coordinator; a failure to record is a warning, not the job's."""
    run = PipelineRun(
        uuid.uuid4().hex, name or "job", started_ms, seconds, outcome, json.dumps(figures)
    )
    try:
        context.run(context.coordinator.record_pipeline_run(run))
    except Exception as exc:
        warn(f"could not record the run in the coordinator: {describe(exc)}")


@contextlib.contextmanager
def _progress(ctx: JobContext) -> Iterator[None]:
    """A rich progress display (one bar per stage; a spinner while Spark starts) when
    stderr is a terminal; nothing otherwise, so logs and errors stay one line each."""
    if not console.is_terminal:
        yield
        return
    bar = RichBar(
        SpinnerColumn(),
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=console,
        transient=False,
    )
    progress = RichProgress(bar)
    ctx.progress = progress
    with bar:
        yield
        progress.close()


def _settings(
    data_dir: Path | None,
    storage_url: str | None,
    coordinator_url: str | None,
    master: str | None = None,
    **extra: Any,
) -> Settings:
    return job_settings(data_dir, storage_url, coordinator_url, master, **extra)


@pipeline_app.command()
def gc(
    data_dir: DataDirOption = None,
    storage_url: StorageUrlOption = None,
    coordinator_url: CoordinatorUrlOption = None,
    master: MasterOption = None,
    dry_run: DryRunOption = False,
    as_json: JsonOption = False,
    orphan_grace_ms: Annotated[
        int | None,
        typer.Option(
            help="Delete objects the coordinator does not know once they are this old "
            "(default: setting gc.orphan.grace.ms, 1 hour).",
            min=0,
        ),
    ] = None,
) -> None:
    """Delete orphaned objects and files marked for deletion past their grace period."""
    settings = _settings(
        data_dir, storage_url, coordinator_url, master, gc_orphan_grace_ms=orphan_grace_ms
    )

    def job(ctx: JobContext) -> JobSummary:
        from lakelog.pipeline.gc import run_gc

        return run_gc(ctx)

    run_job(settings, master, dry_run, job, as_json, name="gc")


@pipeline_app.command()
def merge(
    data_dir: DataDirOption = None,
    storage_url: StorageUrlOption = None,
    coordinator_url: CoordinatorUrlOption = None,
    master: MasterOption = None,
    dry_run: DryRunOption = False,
    as_json: JsonOption = False,
    min_age_ms: Annotated[
        int | None,
        typer.Option(
            help="Merge only WAL objects at least this old (setting merge.min.age.ms).", min=0
        ),
    ] = None,
    target_bytes: Annotated[
        int | None,
        typer.Option(help="Target size of a merged object (setting merge.target.bytes).", min=1),
    ] = None,
) -> None:
    """Rewrite small or fragmented WAL objects into per-partition segment objects."""
    settings = _settings(
        data_dir,
        storage_url,
        coordinator_url,
        master,
        merge_min_age_ms=min_age_ms,
        merge_target_bytes=target_bytes,
    )

    def job(ctx: JobContext) -> JobSummary:
        from lakelog.pipeline.merge import run_merge

        return run_merge(ctx)

    run_job(settings, master, dry_run, job, as_json, name="merge")


@pipeline_app.command()
def retention(
    data_dir: DataDirOption = None,
    storage_url: StorageUrlOption = None,
    coordinator_url: CoordinatorUrlOption = None,
    master: MasterOption = None,
    dry_run: DryRunOption = False,
    as_json: JsonOption = False,
) -> None:
    """Enforce retention.ms / retention.bytes on every partition (the broker's rules)."""
    settings = _settings(data_dir, storage_url, coordinator_url, master)

    def job(ctx: JobContext) -> JobSummary:
        from lakelog.pipeline.retention import run_retention

        return run_retention(ctx)

    run_job(settings, master, dry_run, job, as_json, name="retention")


@pipeline_app.command()
def compact(
    topics: Annotated[
        list[str] | None,
        typer.Argument(help="Topics to compact (default: every topic with compact cleanup)."),
    ] = None,
    data_dir: DataDirOption = None,
    storage_url: StorageUrlOption = None,
    coordinator_url: CoordinatorUrlOption = None,
    master: MasterOption = None,
    dry_run: DryRunOption = False,
    as_json: JsonOption = False,
) -> None:
    """Keep the latest record per key on compacted topics, at its original offset."""
    settings = _settings(data_dir, storage_url, coordinator_url, master)

    def job(ctx: JobContext) -> JobSummary:
        from lakelog.pipeline.compact import run_compact

        return run_compact(ctx, topics or None)

    run_job(settings, master, dry_run, job, as_json, name="compact")


@pipeline_app.command()
def export(
    topics: Annotated[list[str], typer.Argument(help="Topics to export.")],
    output: Annotated[str, typer.Option(help="Parquet output directory (path or URL).")],
    data_dir: DataDirOption = None,
    storage_url: StorageUrlOption = None,
    coordinator_url: CoordinatorUrlOption = None,
    master: MasterOption = None,
    as_json: JsonOption = False,
) -> None:
    """Export topics to Parquet (by topic and date), from the last exported offsets on."""
    settings = _settings(data_dir, storage_url, coordinator_url, master)

    def job(ctx: JobContext) -> JobSummary:
        from lakelog.pipeline.export import run_export

        return run_export(settings, topics, output, ctx.progress, spark_factory=lambda: ctx.spark)

    run_job(settings, master, False, job, as_json, name="export")


@pipeline_app.command()
def tables(
    topics: Annotated[
        list[str] | None,
        typer.Argument(help="Table topics to write (default: every one).", show_default=False),
    ] = None,
    every: Annotated[
        float | None,
        typer.Option(help="Keep running: one pass every this many seconds.", min=0.1),
    ] = None,
    data_dir: DataDirOption = None,
    storage_url: StorageUrlOption = None,
    coordinator_url: CoordinatorUrlOption = None,
    master: MasterOption = None,
    as_json: JsonOption = False,
    maintain: Annotated[
        bool,
        typer.Option(
            "--maintain",
            help="Maintain the tables instead of writing to them: expire old snapshots, "
            "rewrite small data files, delete orphan files.",
        ),
    ] = False,
    expire_older_than_ms: Annotated[
        int,
        typer.Option(help="With --maintain: expire snapshots older than this.", min=0),
    ] = 5 * 24 * 3600 * 1000,
) -> None:
    """Write table topics' committed records to their Iceberg tables (lakelog.iceberg.mode),
    from where each table stopped; with --maintain, maintain those tables instead."""
    settings = _settings(data_dir, storage_url, coordinator_url, master)
    if maintain:
        if every is not None:
            raise UserError("--every goes with writing the tables, not with --maintain")

        def maintenance(ctx: JobContext) -> JobSummary:
            from lakelog.pipeline.tables_maintain import run_table_maintenance

            return run_table_maintenance(
                ctx, topics or None, expire_older_than_ms=expire_older_than_ms
            )

        run_job(settings, master, False, maintenance, as_json, name="tables-maintain")
        return

    def job(ctx: JobContext) -> JobSummary:
        from lakelog.pipeline.tables import iter_passes, run_tables

        summary: JobSummary | None = None
        try:
            for _ in iter_passes(every):
                if summary is not None:  # every pass but the last (run_job prints that one)
                    print_summary(summary, as_json)
                summary = run_tables(ctx, topics or None)
        except KeyboardInterrupt:
            if summary is None:  # stopped in the first pass: nothing committed to report
                raise
            # Ctrl-C ends --every: a pass it cut short left at most orphans for gc.
        assert summary is not None
        return summary

    run_job(settings, master, False, job, as_json, name="tables")


@pipeline_app.command()
def pack(
    output: Annotated[Path, typer.Option(help="Where to write the archive (.tar.gz).")] = Path(
        "lakelog-env.tar.gz"
    ),
) -> None:
    """Pack Lakelog and what it imports (PySpark and py4j aside: the cluster's own) into an
    archive for Spark executors: pass it as `spark.archives=FILE#lakelog_env` with
    `spark.executorEnv.PYTHONPATH=lakelog_env` (or `--archives` to spark-submit).
    `lakelog pipeline ... --master spark://...` ships one by itself."""
    missing = missing_requirement()
    if missing is not None and "PySpark" in missing:
        raise UserError(missing)
    from lakelog.pipeline.pack_env import ROOT
    from lakelog.pipeline.pack_env import pack as pack_archive

    packed = pack_archive(output)
    console.print(
        f"wrote {packed.path} ({packed.size / (1 << 20):,.1f} MiB, "
        f"{len(packed.distributions)} distributions); give it to Spark as\n"
        f"  --conf spark.archives={packed.path.resolve()}#{ROOT} "
        f"--conf spark.executorEnv.PYTHONPATH={ROOT}"
    )
