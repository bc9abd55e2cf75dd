"""The Python that local Spark starts for its workers: this interpreter, without the zipped
copy of pyspark that Spark puts first on their `PYTHONPATH`.

Every Python process Spark starts (the data source planning steps, the task workers' daemon)
gets `PYTHONPATH=$SPARK_HOME/python/lib/py4j-*.zip:$SPARK_HOME/python/lib/pyspark.zip:...`.
With pyspark from pip, those zips lie inside the installed package and hold the same
sources, but no bytecode, so every process compiles pyspark as it imports it: 0.65 s a
process here against 0.13 s from the installed package, paid three times over (schema,
partitions, tasks) before a session's first read returns. `lakelog.pipeline.spark_daemon` fixes the
task workers only, as Spark starts its planning steps with pyspark's own daemon; this
launcher, a small shell script Spark is given as its workers' Python, fixes them all.

Local masters only: on a cluster the executors would need the same file. POSIX only.
"""

from __future__ import annotations

import hashlib
import os
import shlex
import sys
from pathlib import Path

from lakelog.pipeline.spark_daemon import installed_zips
from lakelog.spark.jvm_cache import cache_root

SCRIPT = """#!/bin/sh
# Written by lakelog (lakelog.spark.python_launcher): {python} for Spark's Python workers,
# with pyspark's own zips dropped from PYTHONPATH, as this interpreter has pyspark installed.
set -f
kept=
IFS=:
for entry in $PYTHONPATH; do
  case "$entry" in
    {zips}) ;;
    *) kept="${{kept:+$kept:}}$entry" ;;
  esac
done
unset IFS
PYTHONPATH=$kept
export PYTHONPATH
exec {python} "$@"
"""


def redundant_zips() -> list[str]:
    """The zips Spark puts on its workers' path that this interpreter's installed pyspark
    (and py4j) make redundant: those inside the installed pyspark package."""
    return [str(z) for z in installed_zips(sys.path)]


def launcher(directory: Path | None = None) -> Path | None:
    """The launcher for this interpreter, written if missing; None where it cannot help
    (not POSIX, pyspark not installed here, the directory not writable) or the cache is
    off (`LAKELOG_SPARK_CACHE=off`)."""
    root = cache_root()
    if root is None:
        return None
    zips = redundant_zips()
    if os.name != "posix" or not zips:
        return None
    text = SCRIPT.format(
        python=shlex.quote(sys.executable), zips="|".join(shlex.quote(z) for z in zips)
    )
    directory = directory or root / "spark-python"
    path = directory / f"python-{hashlib.sha256(text.encode()).hexdigest()[:16]}"
    if path.is_file():
        return path
    try:
        directory.mkdir(parents=True, exist_ok=True)
        partial = path.with_name(f"{path.name}.{os.getpid()}.tmp")
        partial.write_text(text)
        partial.chmod(0o755)
        os.replace(partial, path)
    except OSError:
        return None
    return path
