"""`lakelog cluster status` with a broker the cluster still names but that no longer
answers (SIGKILLed, its session not yet expired): the table keeps its shape (EPOCH '-') and
the reason is a line on stderr under it, never a cell of the table."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from cluster_support import cluster_status, start_cluster
from e2e_fixtures import BrokerFactory

LAKELOG = Path(sys.executable).with_name("lakelog")
LONG_SESSION = {"BROKER_SESSION_TIMEOUT_MS": 120_000}
"""The killed broker stays registered (so named by Metadata) for the whole test."""


@pytest.mark.timeout(180)
def test_an_unreachable_broker_is_reported_under_the_table(
    broker_factory: BrokerFactory, tmp_path: Path
) -> None:
    first, second = start_cluster(
        broker_factory, tmp_path / "cluster", ("z1", "z2"), env=LONG_SESSION
    )
    second.kill()
    env = {k: v for k, v in os.environ.items() if not k.startswith("LAKELOG_")}
    done = subprocess.run(
        [str(LAKELOG), "cluster", "status", "-b", first.bootstrap],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )
    assert done.returncode == 0, done.stderr
    header, *rows = [line.split() for line in done.stdout.splitlines()]
    assert header == ["BROKER", "ENDPOINT", "ZONE", "EPOCH", "CONTROLLER"]
    by_id = {row[0]: row for row in rows}
    assert set(by_id) == {"1", "2"}, done.stdout
    assert all(len(row) in (4, 5) for row in rows), done.stdout  # CONTROLLER may be empty
    assert by_id["1"][3].isdigit() and by_id["2"][3] == "-", done.stdout
    assert "unreachable" not in done.stdout
    assert done.stderr.splitlines() == [
        f"broker 2 ({second.bootstrap}) is unreachable: "
        + done.stderr.split("unreachable: ", 1)[1].strip()
    ], done.stderr

    rows_json = {r["broker_id"]: r for r in cluster_status(first.bootstrap)}
    assert rows_json[1]["error"] is None and isinstance(rows_json[1]["epoch"], int)
    assert rows_json[2]["epoch"] is None and rows_json[2]["error"].startswith("unreachable: ")
