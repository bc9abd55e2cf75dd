"""Can Spark's Python workers import lakelog? Asked before the first read or job, so that a
session whose workers cannot gets one line saying what to do instead of a JVM stack.

Two ways it goes wrong. A plain local session started from `.venv/bin/python` without the
venv activated: Spark starts its workers with `python3` from PATH (or `PYSPARK_PYTHON`),
which has no lakelog. And a cluster whose executors have no lakelog: on other machines,
nothing is installed unless the job ships it (`lakelog.pipeline.pack_env`).

Local masters are checked by running the workers' interpreter once (`-c "import lakelog"`,
no Spark job); any other master by one tiny task on the executors.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

DEFAULT_WORKER_PYTHON = "python3"
"""What PySpark runs when neither spark.pyspark.python nor PYSPARK_PYTHON says."""
NEEDED = ("lakelog", "obstore", "crc32c", "numpy", "pyarrow")
"""What a task of the pipeline or the source imports: pure Python and native modules, so
a worker on another Python version or platform fails here too, not mid-job."""
_MISSING = re.compile(r"(ModuleNotFoundError: No module named '[^']+'|ImportError: [^\n]+)")


class WorkersCannotImportLakelog(RuntimeError):
    """Spark's Python workers lack lakelog; the message is one line saying what to do."""


def worker_python(spark: SparkSession) -> str:
    """The interpreter Spark starts for this session's Python workers, as PySpark picks it."""
    context = spark.sparkContext
    chosen = getattr(context, "pythonExec", None)
    if chosen:
        return str(chosen)
    return (
        context.getConf().get("spark.pyspark.python")
        or os.environ.get("PYSPARK_PYTHON")
        or DEFAULT_WORKER_PYTHON
    )


def _local_problem(python: str) -> str | None:
    """Why `python` cannot import what tasks need, or None."""
    found = shutil.which(python) or python
    try:
        done = subprocess.run(
            [found, "-c", "import " + ", ".join(NEEDED)],
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
    except (OSError, subprocess.SubprocessError) as exc:
        return f"{python} cannot be started ({exc})"
    if done.returncode == 0:
        return None
    lines = [line for line in done.stderr.strip().splitlines() if line.strip()]
    return f"{python} ({found}) fails: {lines[-1] if lines else 'exit ' + str(done.returncode)}"


def local_fix(python: str) -> str:
    return (
        f"Spark's Python workers run {python}, which cannot import lakelog: activate the "
        "virtual environment lakelog is installed in before starting Python, or set "
        f"PYSPARK_PYTHON={sys.executable}, or start the session with "
        "lakelog.spark.get_or_create(builder)"
    )


CLUSTER_FIX = (
    "ship lakelog with `lakelog pipeline pack` and spark.archives (lakelog pipeline "
    "--master spark://... does it by itself), or install lakelog[spark] with the same "
    "Python on every worker; see docs/pipeline.md"
)


def _probe(_: int) -> str:
    """Executor side: import what tasks need; the answer is the worker's Python."""
    for name in NEEDED:
        __import__(name)
    return f"{sys.version_info.major}.{sys.version_info.minor}"


@contextlib.contextmanager
def _task_failures_unlogged(spark: SparkSession) -> Iterator[None]:
    """Spark logs each failed attempt of the probe at ERROR (with the worker's traceback):
    the one line this module raises says it instead."""
    loggers = ("org.apache.spark.scheduler.TaskSetManager", "org.apache.spark.executor.Executor")
    try:
        jvm = spark.sparkContext._jvm
        configurator = jvm.org.apache.logging.log4j.core.config.Configurator
        level = jvm.org.apache.logging.log4j.Level
        manager = jvm.org.apache.logging.log4j.LogManager
        before = {name: manager.getLogger(name).getLevel() for name in loggers}
        for name in loggers:
            configurator.setLevel(name, level.OFF)
    except Exception:  # no JVM gateway here (Spark Connect): logs stay as they are
        yield
        return
    try:
        yield
    finally:
        for name, was in before.items():
            configurator.setLevel(name, was)


def check_workers(spark: SparkSession) -> None:
    """Raise WorkersCannotImportLakelog (one line) unless the workers import lakelog."""
    master = spark.sparkContext.master or ""
    python = worker_python(spark)
    if master.startswith("local"):
        problem = _local_problem(python)
        if problem is not None:
            raise WorkersCannotImportLakelog(f"{local_fix(python)} ({problem})")
        return
    try:
        with _task_failures_unlogged(spark):
            versions = spark.sparkContext.parallelize([0], 1).map(_probe).collect()
    except Exception as exc:  # Py4JJavaError carrying the worker's traceback
        text = str(exc)
        found = _MISSING.search(text)
        why = found.group(1) if found else text.strip().splitlines()[0][:300]
        raise WorkersCannotImportLakelog(
            f"Spark's executors cannot import lakelog ({why}): {CLUSTER_FIX}"
        ) from None
    mine = f"{sys.version_info.major}.{sys.version_info.minor}"
    if versions and versions[0] != mine:
        raise WorkersCannotImportLakelog(
            f"Spark's executors run Python {versions[0]} and this driver {mine}: "
            "PySpark needs the same minor version on both"
        )
