"""A Spark Python worker daemon that imports lakelog's reading code once, before it forks.

Spark starts one daemon per executor (`python -m <daemon module>`) and forks a worker from
it for each Python task slot; a fresh worker then imports pyspark's worker and, when it
unpickles the task, pyarrow, numpy, obstore, the coordinator client and the record decoder.
That is ~0.5 s per worker, paid on the first read or pipeline job while both cores are
busy with it. With this daemon (Spark conf `spark.python.daemon.module`, see
`lakelog.spark.SPARK_CONF`) the imports happen once, in the daemon, and every forked worker
starts with them loaded.

Only task workers use it: Spark starts its planning processes (the source's schema and
partitions) with pyspark's own daemon whatever the conf says.
"""

from __future__ import annotations

import contextlib
import importlib
import sys

PRELOAD = (
    "pyspark.worker",
    "pyspark.sql.worker.plan_data_source_read",
    "pyarrow",
    "pyarrow.compute",  # the decoder's binary-view cast loads it
    "numpy",
    "lakelog.spark.source",
    "lakelog.spark.range_reader",
    "lakelog.coordinator.sqlite",
    "lakelog.pipeline.merge",
)
"""What a reading or pipeline task imports anyway. Not export's pyarrow.parquet: every
first task would pay for it, and only export needs it."""


def preload(modules: tuple[str, ...] = PRELOAD) -> list[str]:
    """Import `modules`; returns those that failed. A failure here is not fatal: the task
    that needs the module imports it again and reports the error where it belongs."""
    failed = []
    # The daemon tells Spark its port on stdout: nothing imported may write there.
    with contextlib.redirect_stdout(sys.stderr):
        for name in modules:
            try:
                importlib.import_module(name)
            except Exception:  # see the docstring
                failed.append(name)
    return failed


def main() -> None:
    preload()
    from pyspark.daemon import manager

    manager()


if __name__ == "__main__":
    main()
