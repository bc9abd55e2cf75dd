"""A plain SparkSession started from a virtual environment's python without activating it
runs its Python workers with `python3` from PATH, which has no lakelog: `register(spark)`
says so in one line with the fixes, and `get_or_create` is one of them."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

pytestmark = pytest.mark.timeout(600)

SCRIPT = """
import json
from pyspark.sql import SparkSession
import lakelog.spark

report = {}
spark = SparkSession.builder.master("local[1]").config("spark.ui.enabled", "false").getOrCreate()
try:
    lakelog.spark.register(spark)
    report["plain"] = "registered"
except lakelog.spark.WorkersCannotImportLakelog as exc:
    report["plain"] = str(exc)
spark.stop()
print(json.dumps(report))
"""

FIXED = """
import json
from pyspark.sql import SparkSession
import lakelog.spark

builder = SparkSession.builder.master("local[1]").config("spark.ui.enabled", "false")
spark = lakelog.spark.get_or_create(builder)
lakelog.spark.register(spark)
print(json.dumps({"get_or_create": spark.range(3).rdd.map(lambda row: row.id).sum()}))
spark.stop()
"""


def run(script: str) -> dict[str, object]:
    """`script` in a fresh .venv/bin/python whose PATH has only the system's python3."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYSPARK_", "VIRTUAL_ENV"))}
    env["PATH"] = "/usr/bin:/bin"  # the system's python3, as when .venv is not activated
    env["SPARK_LOCAL_IP"] = "127.0.0.1"
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(script)],
        capture_output=True,
        text=True,
        timeout=270,
        env=env,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-4000:]
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


def test_register_says_in_one_line_that_the_workers_lack_lakelog() -> None:
    plain = str(run(SCRIPT)["plain"])
    assert "\n" not in plain
    assert plain.startswith("Spark's Python workers run python3, which cannot import lakelog")
    for fix in ("activate the virtual environment", "PYSPARK_PYTHON=", "get_or_create"):
        assert fix in plain, plain
    assert run(FIXED)["get_or_create"] == 3
