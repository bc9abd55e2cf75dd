#!/usr/bin/env python3
"""Latency and cost across offered load: what the WAL's sealing and the small-write path
trade (issue 32).

One broker process on the embedded backend (local store, SQLite) or, with `--backend
scaleout`, on a throwaway durable PostgreSQL and moto's S3 server over HTTP (or any
`--storage-url`/`--coordinator-url`). For each offered rate (`--rates`, MiB/s; `max` = as
fast as the client goes), on a new topic: a producer paced at that rate (acks=all, 1 KiB
records) while a consumer tails the topic. Prints, per rate:

- achieved MiB/s, produce and end-to-end p50/p99/p999;
- PUTs per second and per GiB (every PUT the broker made, the inline mover's included);
- coordinator MiB written per GiB: bytes committed inline plus the growth of the rows
  (`coordinator_meter.py`; at light load mostly rows: every commit adds a file row and
  batch rows, and SQLite pages are never quite full), and of which inline;
- the projected monthly bill of Lakelog and of classic Kafka (RF=3 over 3 zones) at the
  point's rates, from the model and default price table `lakelog cost` uses (storage on
  both sides, `--retention-days` kept), and Lakelog's as a share of Kafka's. The broker's
  clients have no zone, so Lakelog pays no cross-zone client traffic here (zone-aware
  clients, as `lakelog cost` assumes when zones are known).

`--inline` turns the small-write path on, `--no-inline` off; neither: the broker default.
Each paced point lasts `--seconds`, `max` sends `--max-mib`. PUTs of the inline mover for
one point's files may land in the next point (it moves by size or after a minute).

With `max` among the rates, a second broker with the settings full speed had before issue
32 (small-write path off, objects sealed on size and interval only: full objects, as the
old load-shrinking budget made them at full speed) runs the `max` point too, alternating
with the first `--max-repeats` times, so the two throughputs compare within one run on
one machine state (`--no-before` skips it).

Run: `.venv/bin/python bench/latency_sweep.py [--backend embedded|scaleout] [--inline]
[--rates 0.01,0.1,1,10,50,200,max] [--json out.json]`.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

from broker_proc import Broker, cpu_account
from clients import create_topic
from common import BenchError, GiB, MiB, log
from coordinator_meter import CoordinatorMeter
from lakelog.cli import cost_model as cost
from paced import phase_paced
from report import fmt, render
from scale_out import scale_out

REQUESTS = "lakelog_object_requests_total"
INLINE_BYTES = "lakelog_wal_inline_bytes_total"
RECORD_BYTES = 1024
MAX_RATE = 100_000.0
"""MiB/s that stands for "as fast as the client goes" (the paced loop never catches up)."""
DEFAULT_RATES = "0.01,0.1,1,10,50,200,max"
BEFORE_ENV = {"LAKELOG_PRODUCE_INLINE": "false", "LAKELOG_PRODUCE_MAX_PUTS_PER_SECOND": "0"}
"""Full speed as before issue 32: no small-write path, objects sealed when full."""


def sweep(args: argparse.Namespace) -> list[dict[str, Any]]:
    if args.backend == "scaleout" and not (args.storage_url and args.coordinator_url):
        with scale_out() as (args.storage_url, args.coordinator_url):
            log(f"PostgreSQL (durable) + S3 (moto): {args.coordinator_url}")
            return _sweep(args)
    return _sweep(args)


def _sweep(args: argparse.Namespace) -> list[dict[str, Any]]:
    root = Path(tempfile.mkdtemp(prefix="lakelog-bench-sweep-"))
    if args.storage_url:
        os.environ["LAKELOG_STORAGE_URL"] = args.storage_url
    if args.coordinator_url:
        os.environ["LAKELOG_COORDINATOR_URL"] = args.coordinator_url
    if args.inline is not None:
        os.environ["LAKELOG_PRODUCE_INLINE"] = "true" if args.inline else "false"
    broker = Broker(root, metrics=True)
    before: Broker | None = None
    if args.before and "max" in args.rates:
        # Its own data dir (and, on a shared coordinator, its own broker id): the two
        # brokers never serve each other's topics.
        before = Broker(
            root, name="before", data_dir=root / "before-data", broker_id=7, metrics=True,
            env=BEFORE_ENV,
        )  # fmt: skip
    # On a shared coordinator (scale-out) the two brokers would be one cluster and clients
    # could be sent to either, so there the "before" broker runs its points after the
    # first has stopped; on the embedded backend they alternate.
    shared = bool(args.coordinator_url)
    points: list[tuple[str, Broker, str]] = []
    later: list[tuple[str, Broker, str]] = []
    for rate in args.rates:
        if rate == "max" and before is not None:
            for _ in range(args.max_repeats):
                points.append(("max", broker, "max"))
                (later if shared else points).append(("max", before, "max, before issue 32"))
        else:
            points.append((rate, broker, rate))
    prices = cost.Prices()
    rows: list[dict[str, Any]] = []
    try:
        for b in (broker, None if shared else before):
            if b is not None:
                b.start()
        for i, (rate, at, label) in enumerate(points):
            log(f"offered {label} MiB/s")
            rows.append(_point(args, at, rate, label, f"sweep-{i}", prices))
        if later and before is not None:
            broker.stop()
            before.start()
            for i, (rate, at, label) in enumerate(later, start=len(points)):
                log(f"offered {label} MiB/s")
                rows.append(_point(args, at, rate, label, f"sweep-{i}", prices))
    finally:
        for b in (broker, before):
            if b is not None:
                b.stop()
        shutil.rmtree(root, ignore_errors=True)
    return rows


def _point(
    args: argparse.Namespace, broker: Broker, rate: str, label: str, topic: str, prices: Any
) -> dict[str, Any]:
    """One sweep point on `broker`: a paced producer and a tailing consumer on a new topic."""
    meter = CoordinatorMeter(
        args.coordinator_url or "sqlite:///" + str(broker.data_dir / "coordinator.sqlite3")
    )
    mibs = MAX_RATE if rate == "max" else float(rate)
    seconds = args.max_mib / MAX_RATE if rate == "max" else args.seconds
    create_topic(broker.bootstrap, topic, args.partitions)
    before, rows_before, t0 = _metrics(broker), meter.row_bytes(), time.monotonic()
    cpu: dict[str, Any] = {}
    with cpu_account(broker, cpu):
        paced = phase_paced(
            broker.bootstrap, topic, args.partitions, RECORD_BYTES, mibs, seconds, 256
        )
    window = time.monotonic() - t0
    delta = cost.counter_delta(before, _metrics(broker))
    inline = _sample(delta, INLINE_BYTES)
    rows_grown = meter.row_bytes() - rows_before
    puts = _sample(delta, REQUESTS, op="put")
    gib = paced["records"] * RECORD_BYTES / GiB
    bill = cost.project(cost.usage_from_series(delta, window), prices, args.retention_days)
    return {
        "offered MiB/s": label,
        "achieved MiB/s": round(paced["records"] * RECORD_BYTES / MiB / paced["seconds"], 3),
        "produce p50/p99/p999 ms": _three(paced["produce_latency"]),
        "e2e p50/p99/p999 ms": _three(paced["e2e"]),
        "PUTs/s": round(puts / window, 3),
        "PUTs/GiB": round(puts / gib),
        "coord MiB/GiB": round((inline + rows_grown) / MiB / gib, 1),
        "of which inline": round(inline / MiB / gib, 1),
        "Lakelog $/mo": round(bill.lakelog_usd, 2),
        "Kafka $/mo": round(bill.classic_usd, 2),
        "Lakelog/Kafka": round(bill.lakelog_usd / bill.classic_usd, 3)
        if bill.classic_usd
        else None,
        "broker CPU s/GiB": round(cpu.get("broker_cpu_s", 0.0) / gib, 2),
    }


def _metrics(broker: Broker) -> cost.Series:
    url = f"http://127.0.0.1:{broker.metrics_port}/metrics"
    return cost.parse_metrics(urllib.request.urlopen(url, timeout=10).read().decode())


def _sample(series: cost.Series, name: str, **labels: str) -> float:
    """A counter delta summed over the series of `name` that carry `labels`."""
    return sum(
        value
        for (series_name, have), value in series.items()
        if series_name == name and labels.items() <= dict(have).items()
    )


def _three(summary: dict[str, Any]) -> str:
    return " / ".join(fmt(summary[k]) for k in ("p50_ms", "p99_ms", "p999_ms"))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rates", default=DEFAULT_RATES, help=f"MiB/s list ({DEFAULT_RATES})")
    ap.add_argument("--seconds", type=float, default=30.0, help="seconds per paced rate (30)")
    ap.add_argument("--max-mib", type=float, default=2048.0, help="MiB at max rate (2048)")
    ap.add_argument(
        "--before",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="also run max on a broker with the settings from before issue 32 (on)",
    )
    ap.add_argument(
        "--max-repeats", type=int, default=2, help="max points per broker, alternating (2)"
    )
    ap.add_argument("--partitions", type=int, default=4, help="partitions per topic (4)")
    ap.add_argument(
        "--backend",
        choices=("embedded", "scaleout"),
        default="embedded",
        help="embedded: local store + SQLite; scaleout: durable PostgreSQL + S3 (moto)",
    )
    ap.add_argument("--pg-s3", action="store_true", help="same as --backend scaleout")
    ap.add_argument("--storage-url", help="object store (default: the backend's)")
    ap.add_argument("--coordinator-url", help="batch coordinator (default: the backend's)")
    inline = ap.add_mutually_exclusive_group()
    inline.add_argument(
        "--inline",
        dest="inline",
        action="store_true",
        default=None,
        help="small-write path on (produce_inline; issue 32)",
    )
    inline.add_argument(
        "--no-inline", dest="inline", action="store_false", help="small-write path off"
    )
    ap.add_argument(
        "--retention-days",
        type=float,
        default=cost.DEFAULT_RETENTION_DAYS,
        help="days of storage priced on both sides (7)",
    )
    ap.add_argument("--json", type=Path, help="also write the figures as JSON here")
    args = ap.parse_args()
    if args.pg_s3:
        args.backend = "scaleout"
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
