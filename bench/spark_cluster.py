#!/usr/bin/env python3
"""The pipeline on a Spark standalone cluster beside local Spark, in one run: merge MiB/s
(`pipeline_jobs.py`) and Spark-source read MiB/s (`spark_source.py`) with `--master
local[2]`, then with `--master spark://...` on a cluster this bench starts and stops (a
master and `--workers` one-core workers from the pip-installed pyspark, on loopback:
`scripts/spark-cluster.sh`).

On one machine the cluster has the same two cores as local[2], so the comparison shows
what the cluster's own costs are (executor JVMs, task scheduling over RPC, results over
the network), not more parallelism.

Run: `.venv/bin/python bench/spark_cluster.py [--objects 2000] [--mib 128] [--json out.json]`
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from common import log
from report import render

REPO = Path(__file__).resolve().parents[1]
BENCH = REPO / "bench"


def run_child(script: str, args: list[str], out: Path) -> Any:
    command = [sys.executable, str(BENCH / script), *args, "--json", str(out)]
    log("running " + " ".join(command[1:]))
    subprocess.run(command, check=True, cwd=REPO, timeout=3600)
    return json.loads(out.read_text())


def measure(master: str, args: argparse.Namespace, tmp: Path) -> dict[str, float]:
    tag = "cluster" if master.startswith("spark://") else "local"
    jobs = run_child(
        "pipeline_jobs.py",
        ["--objects", str(args.objects), "--master", master, "--warm-up"],
        tmp / f"jobs-{tag}.json",
    )
    merge = next(row for row in jobs if row["job"] == "merge")
    source = run_child(
        "spark_source.py",
        ["--mib", str(args.mib), "--runs", "2", "--master", master],
        tmp / f"source-{tag}.json",
    )
    best_read = max(r["mib_s"] for r in source["reads"])
    return {
        "merge MiB/s": float(merge["MiB/s"]),
        "merge objects/s": float(merge["objects/s"]),
        "source read MiB/s (best of 2)": round(best_read, 1),
        "export MiB/s": round(float(source["export"]["mib_s"]), 1),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--objects", type=int, default=2000, help="WAL objects to merge")
    parser.add_argument("--mib", type=int, default=128, help="MiB the source reads")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    results: dict[str, dict[str, float]] = {}
    with tempfile.TemporaryDirectory(prefix="lakelog-spark-cluster-bench.") as name:
        tmp = Path(name)
        results["local[2]"] = measure("local[2]", args, tmp)
        cluster_dir = tmp / "cluster"
        env = {**os.environ, "PYTHON": sys.executable}
        started = subprocess.run(
            ["bash", "scripts/spark-cluster.sh", "start", str(cluster_dir), str(args.workers)],
            cwd=REPO,
            env=env,
            capture_output=True,
            text=True,
            timeout=600,
            check=True,
        )
        master = started.stdout.strip().splitlines()[-1]
        try:
            results[f"standalone ({args.workers} workers)"] = measure(master, args, tmp)
        finally:
            subprocess.run(
                ["bash", "scripts/spark-cluster.sh", "stop", str(cluster_dir)],
                cwd=REPO,
                timeout=120,
                check=False,
            )
    figures = list(next(iter(results.values())))
    rows = [[name, *(str(values[f]) for f in figures)] for name, values in results.items()]
    print("\n".join(render(["master", *figures], rows)))
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
