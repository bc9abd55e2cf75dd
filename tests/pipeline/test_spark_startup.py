"""What a Spark read pays before it reads: the worker daemon that imports lakelog before it
forks workers, and the source module that Spark's planning processes import staying light."""

from __future__ import annotations

import subprocess
import sys
import textwrap

from pyspark.sql import SparkSession

from lakelog.spark import SPARK_CONF
from lakelog.spark.daemon import PRELOAD, preload


def _fresh_python(code: str) -> str:
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    return done.stdout


def test_conf_names_the_daemon_module() -> None:
    assert SPARK_CONF == {"spark.python.daemon.module": "lakelog.spark.daemon"}


def test_preload_imports_the_reading_code_and_writes_nothing_to_stdout() -> None:
    # A fresh interpreter: this one has imported most of it already.
    out = _fresh_python(
        """
        import sys
        from lakelog.spark.daemon import PRELOAD, preload
        failed = preload()
        missing = [m for m in PRELOAD if m not in sys.modules]
        sys.stderr.write(f"failed={failed} missing={missing}\\n")
        assert not failed and not missing, (failed, missing)
        """
    )
    assert out == ""  # stdout is how the daemon tells Spark its port
    assert {"pyarrow", "lakelog.spark.range_reader", "pyspark.worker"} <= set(PRELOAD)


def test_preload_reports_what_failed_instead_of_raising() -> None:
    assert preload(("lakelog.no_such_module", "json")) == ["lakelog.no_such_module"]


def test_source_module_leaves_reading_and_planning_code_unimported() -> None:
    # Spark's schema step imports lakelog.spark.source in a fresh process just to ask for
    # the schema: it must not pay for pyarrow, the coordinator or object storage.
    out = _fresh_python(
        """
        import sys
        import lakelog.spark
        from lakelog.spark.source import LakelogDataSource
        LakelogDataSource({"subscribe": "t", "lakelog.data.dir": "/nonexistent"}).schema()
        heavy = ("pyarrow", "numpy", "obstore", "lakelog.coordinator", "lakelog.storage")
        print(sorted(m for m in sys.modules if m.split(".")[0] in heavy or m in heavy))
        """
    )
    assert out.strip() == "[]"


def test_session_workers_are_forked_from_the_lakelog_daemon(spark: SparkSession) -> None:
    # The tests' session is built with SPARK_CONF (conftest), as users are told to.
    def worker_facts(_: int) -> tuple[str, bool]:
        # Defined here so cloudpickle ships it by value (workers cannot import this module).
        import os
        import sys

        with open(f"/proc/{os.getppid()}/cmdline", "rb") as f:
            parent = f.read().replace(b"\0", b" ").decode()
        return parent, "lakelog.spark.range_reader" in sys.modules

    facts = spark.sparkContext.parallelize(range(2), 2).map(worker_facts).collect()
    for parent, preloaded in facts:
        assert "-m lakelog.spark.daemon" in parent
        assert preloaded
