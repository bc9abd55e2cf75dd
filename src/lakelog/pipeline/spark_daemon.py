"""Spark's Python worker daemon, importing the pyspark pip installed rather than the zipped
copy of it that Spark puts first on the workers' path.

Spark starts its task workers with `python -m <daemon module>` and `PYTHONPATH` beginning
with `$SPARK_HOME/python/lib/pyspark.zip`. When pyspark comes from pip, that zip sits inside
the installed package and holds the same sources, but without compiled bytecode: every
daemon, and every worker forked from it, compiles what it imports from source. Importing
pyspark that way takes 0.65 s here against 0.13 s from the installed package, and the first
read of a session waits for it. This daemon drops the zips from `sys.path` when they belong
to the installed pyspark (and py4j) it would import instead, then runs pyspark's own.

Set with the Spark conf `spark.python.daemon.module=lakelog.pipeline.spark_daemon`
(`lakelog.spark.SPARK_CONF`). Spark starts its planning workers (a data source's schema and
partitions) with pyspark's daemon whatever that conf says; those keep the zip.

It sits outside the `lakelog.spark` package because importing that package imports
pyspark, which must wait until the zips are gone from the path.
"""

from __future__ import annotations

import contextlib
import sys
from importlib.machinery import PathFinder
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path


def installed_zips(path: list[str]) -> list[Path]:
    """The zips Spark ships inside the pyspark package that `path` finds (pyspark's, and
    py4j's of the installed py4j version): the copies an installed pyspark makes redundant."""
    spec = PathFinder.find_spec("pyspark", path)
    if spec is None or not spec.submodule_search_locations:
        return []
    lib = Path(next(iter(spec.submodule_search_locations))) / "python" / "lib"
    zips = [lib / "pyspark.zip"]
    with contextlib.suppress(PackageNotFoundError):
        zips.append(lib / f"py4j-{version('py4j')}-src.zip")
    return zips


def redundant_zips(path: list[str]) -> list[str]:
    """The entries of `path` that are zips inside the installed pyspark package, holding
    the pyspark (or the py4j of the installed version) the rest of `path` finds anyway."""
    zips = [entry for entry in path if entry.endswith(".zip")]
    if not zips:
        return []
    same = set(installed_zips([entry for entry in path if entry not in zips]))
    return [entry for entry in zips if Path(entry) in same]


def main() -> None:
    redundant = set(redundant_zips(sys.path))
    sys.path[:] = [entry for entry in sys.path if entry not in redundant]
    from pyspark import daemon

    daemon.manager()


if __name__ == "__main__":
    main()
