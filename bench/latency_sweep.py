#!/usr/bin/env python3
"""Latency and cost across offered load: what the WAL's adaptive sealing trades.

One broker process on the local store (or `--storage-url`/`--coordinator-url`, or `--pg-s3`:
a throwaway durable PostgreSQL and moto's S3 server over HTTP). For each offered rate
(`--rates`, MiB/s; `max` = as fast as the client goes), on a new topic: a producer paced at
that rate (acks=all, 1 KiB records) while a consumer tails the topic. Prints, per rate:
achieved MiB/s, produce and end-to-end p50/p99/p999, PUTs per second and per GiB (every PUT
the broker made, the inline mover's included, from its metrics), bytes committed inline in
the coordinator per GiB (`--inline`: the small-write path of issue 32 on) and broker CPU
seconds per GiB. Each phase lasts `--seconds` or `--max-mib` for `max`.

Run: `.venv/bin/python bench/latency_sweep.py [--rates 1,10,50,200,max] [--json out.json]`.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

from broker_proc import Broker, cpu_account
from clients import create_topic
from common import BenchError, MiB, log
from paced import phase_paced
from report import fmt, render
from scale_out import scale_out

GiB = 1024 * MiB
PUTS = 'lakelog_object_requests_total{op="put"}'
INLINE_BYTES = "lakelog_wal_inline_bytes_total"
MAX_RATE = 100_000.0
"""MiB/s that stands for "as fast as the client goes" (the paced loop never catches up)."""


def sweep(args: argparse.Namespace) -> list[dict[str, Any]]:
    if args.pg_s3:
        with scale_out() as (args.storage_url, args.coordinator_url):
            log(f"PostgreSQL (durable) + S3 (moto): {args.coordinator_url}")
            args.pg_s3 = False
            return sweep(args)
    root = Path(tempfile.mkdtemp(prefix="lakelog-bench-sweep-"))
    if args.storage_url:
        os.environ["LAKELOG_STORAGE_URL"] = args.storage_url
    if args.coordinator_url:
        os.environ["LAKELOG_COORDINATOR_URL"] = args.coordinator_url
    if args.inline:
        os.environ["LAKELOG_PRODUCE_INLINE"] = "true"
    broker = Broker(root, metrics=True)
    rows: list[dict[str, Any]] = []
    try:
        broker.start()
        for i, rate in enumerate(args.rates):
            mibs = MAX_RATE if rate == "max" else float(rate)
            seconds = args.max_mib / MAX_RATE if rate == "max" else args.seconds
            topic = f"sweep-{i}"
            create_topic(broker.bootstrap, topic, args.partitions)
            log(f"offered {rate} MiB/s")
            before = broker.metric(PUTS)
            inline_before = broker.metric(INLINE_BYTES)
            cpu: dict[str, Any] = {}
            with cpu_account(broker, cpu):
                paced = phase_paced(
                    broker.bootstrap, topic, args.partitions, 1024, mibs, seconds, 256
                )
            puts = broker.metric(PUTS) - before
            inline_bytes = broker.metric(INLINE_BYTES) - inline_before
            gib = paced["mib"] * MiB / GiB
            rows.append(
                {
                    "offered MiB/s": rate,
                    "achieved MiB/s": paced["achieved_mib_s"],
                    "produce p50/p99/p999 ms": _three(paced["produce_latency"]),
                    "e2e p50/p99/p999 ms": _three(paced["e2e"]),
                    "PUTs/s": round(puts / max(paced.get("seconds", seconds), 1e-9), 3),
                    "PUTs/GiB": round(puts / gib),
                    "inline MiB/GiB": round(inline_bytes / MiB / gib, 1),
                    "broker CPU s/GiB": round(cpu.get("broker_cpu_s", 0.0) / gib, 2),
                    "other CPU %": cpu.get("other_cpu_pct"),
                }
            )
    finally:
        broker.stop()
        shutil.rmtree(root, ignore_errors=True)
    return rows


def _three(summary: dict[str, Any]) -> str:
    return " / ".join(fmt(summary[k]) for k in ("p50_ms", "p99_ms", "p999_ms"))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rates", default="1,10,50,200,max", help="MiB/s list (1,10,50,200,max)")
    ap.add_argument("--seconds", type=float, default=10.0, help="seconds per paced rate (10)")
    ap.add_argument("--max-mib", type=float, default=512.0, help="MiB at max rate (512)")
    ap.add_argument("--partitions", type=int, default=4, help="partitions per topic (4)")
    ap.add_argument("--storage-url", help="object store (default: the broker's local one)")
    ap.add_argument("--coordinator-url", help="batch coordinator (default: SQLite)")
    ap.add_argument(
        "--pg-s3",
        action="store_true",
        help="start a durable PostgreSQL and moto's S3 server and sweep on those",
    )
    ap.add_argument(
        "--inline",
        action="store_true",
        help="turn the small-write path on (produce_inline; issue 32)",
    )
    ap.add_argument("--json", type=Path, help="also write the figures as JSON here")
    args = ap.parse_args()
    args.rates = [r.strip() for r in args.rates.split(",") if r.strip()]
    try:
        rows = sweep(args)
    except BenchError as exc:
        log(f"failed: {exc}")
        return 1
    keys = list(rows[0])
    print("\n".join(render(keys, [[fmt(row[k]) for k in keys] for row in rows])))
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
