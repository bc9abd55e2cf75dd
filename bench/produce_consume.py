#!/usr/bin/env python3
"""Produce/consume benchmark: one real broker process driven by confluent-kafka.

Measures, per run (the first on a fresh broker = cold, the next ones warm, each on new
topics): acks=all produce throughput and latency, consume throughput from the beginning,
end-to-end latency at a paced rate, broker CPU per GiB and peak RSS, and the raw write
speed of the same object store, so the produce figure can be read against the physical
limit of this machine. See bench/README.md for what each figure means.

Run: `.venv/bin/python bench/produce_consume.py [--mib 512] [--runs 2] [--json out.json]`.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from typing import Any

from broker_proc import Broker, cpu_account
from clients import create_topic, phase_consume, phase_produce
from common import OBJECT_BYTES, BenchError, MiB, log
from paced import phase_paced
from raw import RAW_PARALLEL, phase_raw, raw_figures
from report import table


@dataclass
class Options:
    """The command line's settings for every run."""

    mib: int
    runs: int
    paced_mibs: float
    paced_seconds: float
    record_bytes: int
    partitions: int
    queue_mib: int
    commit_interval_ms: int
    skip_raw: bool


def run_once(broker: Broker, opts: Options, index: int, root: Path) -> dict[str, Any]:
    """One cold or warm run: produce, consume, paced, raw store; errors kept per phase."""
    label = "cold" if index == 0 else "warm"
    res: dict[str, Any] = {"run": index + 1, "kind": label}
    res["peak_rss_reset"] = broker.reset_peak_rss()
    n = opts.mib * MiB // opts.record_bytes
    value = os.urandom(opts.record_bytes)
    topic = f"bench-r{index + 1}-{int(time.time())}"
    paced_topic = topic + "-paced"

    def phase(name: str, fn: Callable[[], dict[str, Any]]) -> dict[str, Any] | None:
        if not broker.alive():
            res[name] = {"error": "broker is not running"}
            return None
        log(f"run {index + 1} ({label}): {name}")
        out: dict[str, Any] = {}
        try:
            with cpu_account(broker, out):
                out |= fn()
        except BenchError as exc:
            out["error"] = str(exc)
            log(f"run {index + 1} {name} FAILED: {exc}")
        except Exception as exc:  # a client or /proc surprise: keep it, go on with the report
            out["error"] = f"{type(exc).__name__}: {exc}"
            log(f"run {index + 1} {name} FAILED: {out['error']}")
        res[name] = out
        return out

    os.sync()  # start from a clean page cache: earlier runs' dirty pages are not our cost

    def create_both() -> dict[str, Any]:
        for name in (topic, paced_topic):
            create_topic(broker.bootstrap, name, opts.partitions)
        return {}

    created = phase("create_topics", create_both)
    if created is not None and "error" not in created:
        prod = phase(
            "produce",
            lambda: phase_produce(broker.bootstrap, topic, n, value, opts.queue_mib),
        )
        if prod is not None and "error" not in prod:
            in_topic = prod["records_in_topic"]
            phase(
                "consume",
                lambda: phase_consume(broker.bootstrap, topic, opts.partitions, in_topic),
            )
        phase(
            "paced",
            lambda: phase_paced(
                broker.bootstrap,
                paced_topic,
                opts.partitions,
                opts.record_bytes,
                opts.paced_mibs,
                opts.paced_seconds,
                opts.queue_mib,
            ),
        )
    if broker.alive():
        res["memory_mib"] = broker.memory_mib()
    if not opts.skip_raw:
        os.sync()
        phase("raw", lambda: phase_raw(root / f"raw-run{index + 1}", n * opts.record_bytes))
    derive(res, opts)
    return res


def derive(res: dict[str, Any], opts: Options) -> None:
    """CPU per GiB, ratio to the raw store, and the paced latency target check."""
    for name in ("produce", "consume", "paced"):
        ph = res.get(name) or {}
        mib = ph.get("mib")
        if "error" not in ph and mib and "broker_cpu_s" in ph:
            ph["broker_cpu_s_per_gib"] = round(ph["broker_cpu_s"] / (mib / 1024), 2)
    prod, raw = res.get("produce") or {}, res.get("raw") or {}
    best = max((raw[k]["mib_s"] for k in ("store_seq", "store_par") if k in raw), default=None)
    if best and "mib_s" in prod:
        res["produce_vs_raw_store"] = round(prod["mib_s"] / best, 3)
    paced = res.get("paced") or {}
    p99 = (paced.get("produce_latency") or {}).get("p99_ms")
    if p99 is not None:
        target = opts.commit_interval_ms + 50
        paced["produce_p99_target_ms"] = target
        paced["produce_p99_ok"] = p99 <= target


def parse_args(argv: Sequence[str] | None) -> tuple[Options, argparse.Namespace]:
    """The command line (see bench/README.md, Options)."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--mib", type=int, default=512, help="MiB to produce per run (512)")
    ap.add_argument("--runs", type=int, default=2, help="runs: first cold, rest warm (2)")
    ap.add_argument("--paced-mibs", type=float, default=50.0, help="paced rate MiB/s (50)")
    ap.add_argument("--paced-seconds", type=float, default=10.0, help="paced duration (10)")
    ap.add_argument("--record-bytes", type=int, default=1024, help="record value size (1024)")
    ap.add_argument("--partitions", type=int, default=4, help="partitions per topic (4)")
    ap.add_argument(
        "--queue-mib",
        type=int,
        default=64,
        help="producer queue (queue.buffering.max.kbytes) in MiB (64)",
    )
    ap.add_argument(
        "--commit-interval-ms",
        type=int,
        default=250,
        help="the broker's produce.commit.interval.ms, for the p99 target (250)",
    )
    ap.add_argument("--skip-raw", action="store_true", help="skip the raw store figures")
    ap.add_argument("--keep", action="store_true", help="keep the temp dir (broker log, data)")
    ap.add_argument("--json", type=Path, help="also write the figures as JSON here")
    ap.add_argument("--raw-only", type=Path, help=argparse.SUPPRESS)  # as bench/raw.py
    ap.add_argument("--raw-bytes", type=int, default=0, help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    if a.record_bytes < 16 or a.mib < 1 or a.runs < 1 or a.partitions < 1:
        ap.error("record-bytes >= 16, mib >= 1, runs >= 1, partitions >= 1")
    opts = Options(
        mib=a.mib,
        runs=a.runs,
        paced_mibs=a.paced_mibs,
        paced_seconds=a.paced_seconds,
        record_bytes=a.record_bytes,
        partitions=a.partitions,
        queue_mib=a.queue_mib,
        commit_interval_ms=a.commit_interval_ms,
        skip_raw=a.skip_raw,
    )
    return opts, a


def _on_term(signum: int, frame: FrameType | None) -> None:
    """SIGTERM unwinds like Ctrl-C, so `finally` stops the broker."""
    raise SystemExit(128 + signum)


def main(argv: Sequence[str] | None = None) -> int:
    opts, args = parse_args(argv)
    if args.raw_only is not None:
        print(json.dumps(raw_figures(args.raw_only, args.raw_bytes)))
        return 0
    signal.signal(signal.SIGTERM, _on_term)
    root = Path(tempfile.mkdtemp(prefix="lakelog-bench-"))
    broker = Broker(root)
    results: dict[str, Any] = {
        "options": vars(opts) | {"object_bytes": OBJECT_BYTES, "raw_parallel": RAW_PARALLEL},
        "python": sys.version.split()[0],
        "runs": [],
    }
    started = time.monotonic()
    try:
        log(f"starting broker in {root}")
        broker.start()
        for i in range(opts.runs):
            results["runs"].append(run_once(broker, opts, i, root))
            if not broker.alive():
                results["error"] = f"broker exited with {broker.proc and broker.proc.returncode}"
                break
    except BenchError as exc:
        results["error"] = str(exc)
    except Exception as exc:
        results["error"] = f"{type(exc).__name__}: {exc}"
    finally:
        broker.stop()
        tail = broker.log_tail()
        results["broker_log_tail"] = tail
        results["seconds"] = round(time.monotonic() - started, 1)
        if args.keep:
            log(f"kept {root}")
        else:
            shutil.rmtree(root, ignore_errors=True)
    failed = bool(results.get("error")) or any(
        isinstance(ph, dict) and "error" in ph for r in results["runs"] for ph in r.values()
    )
    print(table(results))
    print(f"\n{results['seconds']} s in all; {len(results['runs'])} run(s) of {opts.mib} MiB, "
          f"{opts.record_bytes} B records, {opts.partitions} partitions")  # fmt: skip
    if failed and tail:
        print("\nbroker log (last lines):\n" + tail)
    if args.json:
        args.json.write_text(json.dumps(results, indent=2) + "\n")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
