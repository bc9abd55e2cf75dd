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


def test_the_broker_loads_no_spark() -> None:
    """The broker compacts with the Spark-free core (`pipeline.compaction`): nothing of
    Spark loads with it (pyspark becomes an optional extra)."""
    out = _fresh(
        """
        import sys
        import lakelog.server.broker, lakelog.server.background.compaction
        print(sorted(m for m in sys.modules if "spark" in m.lower()))
        """
    )
    assert out.split() == ["[]"]
