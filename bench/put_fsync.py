#!/usr/bin/env python3
"""What durability costs on file://: `ObjectStorage.put` with and without its fsyncs.

On a local store `put` fsyncs the file and its directory (and, once, each new directory's
parent) before returning, so a coordinator commit never points at an object an OS crash
could lose (issue 11). This bench measures that cost where the broker pays it: put latency
p50/p99 and MiB/s for 8 MiB objects (the WAL default, 8 parts of 1 MiB like a WAL object)
and 1 MiB objects, one put at a time and 4 at a time (the WAL writer uploads in parallel),
each with fsync (the broker's behaviour) and without (`ObjectStorage(..., fsync=False)`,
obstore's LocalStore alone: page-cache speed).

Each cell writes `--mib` MiB (256) after 4 untimed warm-up puts, into a fresh directory
under `--dir` (a temp dir on /tmp by default: use the broker's data-dir filesystem), then
deletes it; `os.sync()` runs before each cell so one cell's dirty pages are not charged to
the next. Cells run `--repeats` (3) times, interleaved (fsync, no fsync, ...): the table
shows the median MiB/s and latency percentiles over all repeats' puts. Runs with the
broker's MALLOC_* settings (re-executes itself with them). Other processes' CPU above 20%
of a core during a cell is flagged, as in the other benches.

Run: `.venv/bin/python bench/put_fsync.py [--mib 256] [--repeats 3] [--json out.json]`.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from broker_proc import BROKER_ENV, client_cpu, kernel_threads_cpu, machine_busy_cpu
from common import NOISY_PCT, BenchError, MiB, lat_summary, log
from report import fmt, render

SIZES = (8 * MiB, 1 * MiB)
PARALLEL = (1, 4)
WARMUP_PUTS = 4


async def _cell(root: Path, size: int, parallel: int, fsync: bool, total: int) -> dict[str, Any]:
    """One timed cell: `total` bytes as `size` objects, `parallel` puts at a time."""
    from lakelog.log.storage.store import ObjectStorage

    root.mkdir(parents=True)
    plain = ObjectStorage.from_url(root.resolve().as_uri())
    storage = ObjectStorage(plain.store, plain.url, fsync=fsync)
    if storage.fsyncs != fsync:
        raise BenchError(f"storage.fsyncs is {storage.fsyncs}, wanted {fsync}")
    parts = [os.urandom(MiB) for _ in range(size // MiB)]
    count = max(1, total // size)
    for i in range(WARMUP_PUTS):
        await storage.put(f"wal/warm-{i:06d}", parts)
    os.sync()
    latencies: list[float] = []
    next_i = 0

    async def worker() -> None:
        nonlocal next_i
        while next_i < count:
            i, next_i = next_i, next_i + 1
            started = time.perf_counter()
            await storage.put(f"wal/{i:08d}", parts)
            latencies.append(time.perf_counter() - started)

    cpu0, busy0, kthreads0 = client_cpu(), machine_busy_cpu(), kernel_threads_cpu()
    t0 = time.perf_counter()
    await asyncio.wait_for(asyncio.gather(*(worker() for _ in range(parallel))), 600)
    elapsed = time.perf_counter() - t0
    own = client_cpu() - cpu0
    kthreads = kernel_threads_cpu() - kthreads0
    other = max(0.0, machine_busy_cpu() - busy0 - own - kthreads)
    return {
        "mib_s": count * size / MiB / elapsed,
        "latencies": latencies,
        "cpu_s": own,
        "other_cpu_pct": 100.0 * other / elapsed,
        "seconds": elapsed,
    }


def measure(base: Path, total: int, repeats: int) -> list[dict[str, Any]]:
    """Every (size, parallel, fsync) cell, repeats interleaved so drift hits both modes."""
    cells: dict[tuple[int, int, bool], list[dict[str, Any]]] = {}
    n = 0
    for repeat in range(repeats):
        for size in SIZES:
            for parallel in PARALLEL:
                modes = (True, False) if repeat % 2 == 0 else (False, True)
                for fsync in modes:
                    root = base / f"cell-{n:04d}"
                    n += 1
                    os.sync()
                    try:
                        got = asyncio.run(_cell(root, size, parallel, fsync, total))
                    finally:
                        shutil.rmtree(root, ignore_errors=True)
                    log(
                        f"repeat {repeat + 1}: {size // MiB} MiB x{parallel} "
                        f"{'fsync' if fsync else 'no fsync'}: {got['mib_s']:.0f} MiB/s"
                    )
                    cells.setdefault((size, parallel, fsync), []).append(got)
    rows = []
    for (size, parallel, fsync), runs in cells.items():
        latencies = [lat for run in runs for lat in run["latencies"]]
        rows.append(
            {
                "object_mib": size // MiB,
                "parallel": parallel,
                "fsync": fsync,
                "mib_s": round(statistics.median(run["mib_s"] for run in runs), 1),
                "all_mib_s": [round(run["mib_s"], 1) for run in runs],
                "latency": lat_summary(latencies),
                "cpu_ms_per_put": round(
                    1000.0 * sum(r["cpu_s"] for r in runs) / max(1, len(latencies)), 2
                ),
                "other_cpu_pct_max": round(max(run["other_cpu_pct"] for run in runs), 1),
            }
        )
    rows.sort(key=lambda r: (-r["object_mib"], r["parallel"], not r["fsync"]))
    return rows


def table(rows: list[dict[str, Any]]) -> str:
    """One line per cell, then the cost of fsync per (size, parallel)."""
    head = ["put on file://", "MiB/s", "p50 ms", "p99 ms", "max ms", "puts", "CPU ms/put"]
    body = []
    noisy = []
    for r in rows:
        label = f"{r['object_mib']} MiB x{r['parallel']} {'fsync' if r['fsync'] else 'no fsync'}"
        lat = r["latency"]
        body.append(
            [
                label,
                fmt(r["mib_s"]),
                fmt(lat["p50_ms"]),
                fmt(lat["p99_ms"]),
                fmt(lat["max_ms"]),
                str(lat["samples"]),
                fmt(r["cpu_ms_per_put"]),
            ]
        )
        if r["other_cpu_pct_max"] > NOISY_PCT:
            noisy.append(f"{label}: other processes used {r['other_cpu_pct_max']:.0f}% of a core")
    lines = render(head, body)
    cost_head = ["fsync cost", "MiB/s ratio", "p50 +ms", "p99 +ms"]
    cost_body = []
    by_key = {(r["object_mib"], r["parallel"], r["fsync"]): r for r in rows}
    for (mib, parallel, fsync), r in by_key.items():
        if not fsync or (mib, parallel, False) not in by_key:
            continue
        base = by_key[(mib, parallel, False)]
        cost_body.append(
            [
                f"{mib} MiB x{parallel}",
                fmt(r["mib_s"] / base["mib_s"]),
                fmt(_diff(r, base, "p50_ms")),
                fmt(_diff(r, base, "p99_ms")),
            ]
        )
    lines += ["", *render(cost_head, cost_body)]
    if noisy:
        lines += ["", "noisy cells (figures less trustworthy):", *(f"  {n}" for n in noisy)]
    return "\n".join(lines)


def _diff(a: dict[str, Any], b: dict[str, Any], name: str) -> float | None:
    x, y = a["latency"][name], b["latency"][name]
    return None if x is None or y is None else round(x - y, 2)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mib", type=int, default=256, help="MiB written per cell")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--dir", type=Path, default=None, help="where to write (a temp dir)")
    parser.add_argument("--json", type=Path, default=None, help="also write the rows here")
    args = parser.parse_args(argv)
    if any(os.environ.get(k) != v for k, v in BROKER_ENV.items()):
        # glibc reads these at start-up: run again with the broker's settings.
        os.execve(sys.executable, [sys.executable, *sys.argv], os.environ | BROKER_ENV)
    base = Path(tempfile.mkdtemp(prefix="lakelog-bench-fsync-", dir=args.dir))
    log(f"writing under {base} ({args.mib} MiB per cell, {args.repeats} repeats)")
    try:
        rows = measure(base, args.mib * MiB, args.repeats)
    except BenchError as exc:
        print(f"put_fsync failed: {exc}", file=sys.stderr)
        return 1
    finally:
        shutil.rmtree(base, ignore_errors=True)
    print(table(rows))
    if args.json is not None:
        args.json.write_text(json.dumps(rows, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
