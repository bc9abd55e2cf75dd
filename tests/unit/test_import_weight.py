"""What importing lakelog loads: kio tries to import Hypothesis (to register strategies for
its types), which would bring Hypothesis, pytest and trio into every broker, CLI command and
Spark worker of an environment that has Hypothesis installed, as this one does."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import hypothesis.strategies as st
from hypothesis import given
from kio.schema.types import TopicName


def _fresh(code: str) -> str:
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    ).stdout


def test_a_lakelog_process_loads_neither_hypothesis_nor_pytest() -> None:
    out = _fresh(
        """
        import sys
        import lakelog.cli.main, lakelog.coordinator, lakelog.spark.range_reader
        print(sorted(m for m in ("hypothesis", "pytest", "trio") if m in sys.modules))
        import hypothesis.strategies  # still importable afterwards, by code that wants it
        print("importable")
        """
    )
    assert out.split() == ["[]", "importable"]


@given(st.from_type(TopicName))
def test_a_test_process_keeps_kios_strategies(name: str) -> None:
    # pytest is imported before lakelog here, so kio registered its Hypothesis strategies.
    assert isinstance(name, str)


SPARK_EXTRA = ("pyspark", "numpy", "pandas", "pyarrow", "py4j", "pyiceberg", "sqlalchemy")
"""What the `spark` extra brings: the broker installs without it (`pip install lakelog`)."""


def test_the_broker_and_the_cli_load_nothing_of_the_spark_extra() -> None:
    """The broker compacts with the Spark-free core (`pipeline.compaction`) and decodes
    records in plain Python (`pipeline.record_decode`): nothing of the `spark` extra loads
    with it or with the `lakelog` command (tests/cli/test_install_without_spark.py serves
    from a venv without it)."""
    out = _fresh(
        f"""
        import sys
        import lakelog.server.broker, lakelog.server.background.compaction, lakelog.cli.main
        import lakelog.cli.serve_registry  # with the Iceberg REST catalog (issue 33)
        print(sorted(m for m in sys.modules if m.split(".")[0] in {SPARK_EXTRA!r}))
        """
    )
    assert out.split() == ["[]"]
