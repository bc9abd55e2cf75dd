"""A Spark standalone cluster for tests (scripts/spark-cluster.sh): a master and workers as
separate JVMs from the pip-installed pyspark, on loopback, always stopped."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "scripts" / "spark-cluster.sh"
START_S = 300.0
"""Generous: three JVMs starting on a busy 2-core machine."""


@dataclass(frozen=True)
class SparkCluster:
    master: str
    directory: Path

    def worker_pid(self, index: int) -> int:
        return int((self.directory / f"worker{index}.pid").read_text())

    def kill_worker(self, index: int) -> None:
        """SIGKILL a worker JVM and the executors it started (they are its children)."""
        pid = self.worker_pid(index)
        children = subprocess.run(
            ["pgrep", "-P", str(pid)], capture_output=True, text=True, check=False
        ).stdout.split()
        for victim in (pid, *map(int, children)):
            with contextlib.suppress(ProcessLookupError):
                os.kill(victim, signal.SIGKILL)

    def executor_logs(self, index: int) -> list[Path]:
        return sorted((self.directory / f"work{index}").glob("app-*/*/stderr"))


@contextlib.contextmanager
def spark_cluster(directory: Path, workers: int = 2) -> Iterator[SparkCluster]:
    env = {**os.environ, "PYTHON": str(REPO / ".venv" / "bin" / "python")}
    env.pop("PYSPARK_PYTHON", None)
    try:
        started = subprocess.run(
            ["bash", str(SCRIPT), "start", str(directory), str(workers)],
            capture_output=True,
            text=True,
            timeout=START_S,
            env=env,
            cwd=REPO,
            check=False,
        )
        assert started.returncode == 0, started.stderr[-3000:]
        yield SparkCluster(started.stdout.strip().splitlines()[-1], directory)
    finally:
        subprocess.run(
            ["bash", str(SCRIPT), "stop", str(directory)], timeout=120, cwd=REPO, check=False
        )
