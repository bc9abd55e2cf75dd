#!/usr/bin/env python3
"""Two broker processes against one on this machine: does a second process add produce
throughput, and what does each broker spend per GiB?

Setup "1 broker" and setup "2 brokers" get the same load: `--producers` (2) confluent
producers, each in its own process, together `--mib` MiB of acks=all records into one topic
of `--partitions` (8). The brokers of a setup share one data dir (one SQLite coordinator,
one object store), as `lakelog serve --brokers N` does. Broker i runs with `--rack bench-i`
and producer j names zone `bench-(j mod N)` in its client.id (`lakelog_az=`), so Metadata
gives each producer its own broker as every partition's leader: one producer per broker.

Run: `.venv/bin/python bench/two_brokers.py [--mib 512] [--runs 2] [--json out.json]`.
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
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from types import FrameType
from typing import Any

from confluent_kafka.admin import AdminClient

from broker_proc import Broker, cpu_account
from clients import common_conf, create_topic
from common import NOISY_PCT, STALL_S, BenchError, MiB, log
from producer_proc import ProducerProc
from report import fmt, get, render

BYTES_IN = "lakelog_bytes_in_total"


@dataclass
class Options:
    """The command line's settings, the same for both setups."""

    mib: int
    runs: int
    producers: int
    partitions: int
    record_bytes: int
    queue_mib: int


def zone_of(producer: int, brokers: int) -> str:
    return f"bench-{producer % brokers}"


def leaders_seen(bootstrap: str, topic: str, client_id: str) -> list[int]:
    """The partition leaders Metadata gives a client with this client.id."""
    admin = AdminClient(common_conf(bootstrap) | {"client.id": client_id})
    md = admin.list_topics(topic=topic, timeout=10)
    return sorted({p.leader for p in md.topics[topic].partitions.values()})


def run_once(brokers: list[Broker], opts: Options, index: int) -> dict[str, Any]:
    """One timed produce of `--mib` MiB by all producers together, on a new topic."""
    n = len(brokers)
    res: dict[str, Any] = {"run": index + 1, "kind": "cold" if index == 0 else "warm"}
    for b in brokers:
        b.reset_peak_rss()
    topic = f"two-{n}b-r{index + 1}-{int(time.time())}"
    os.sync()  # earlier runs' dirty pages are not this run's cost
    create_topic(brokers[0].bootstrap, topic, opts.partitions)
    total = opts.mib * MiB // opts.record_bytes
    procs = []
    for j in range(opts.producers):
        zone = zone_of(j, n)
        client_id = f"lakelog-bench-p{j} lakelog_az={zone}"
        home = brokers[j % n]
        res.setdefault("leaders", []).append(leaders_seen(home.bootstrap, topic, client_id))
        records = total // opts.producers + (1 if j < total % opts.producers else 0)
        spec = {
            "bootstrap": home.bootstrap, "topic": topic, "records": records,
            "record_bytes": opts.record_bytes, "queue_mib": opts.queue_mib,
            "client_id": client_id,
        }  # fmt: skip
        procs.append(ProducerProc(spec))
    try:
        for p in procs:
            p.spawn()
        for p in procs:
            p.wait_ready()
        bytes0 = [b.counter(BYTES_IN) for b in brokers]
        sys0 = sum(b.cpu_user_sys()[1] for b in brokers)
        phase: dict[str, Any] = {}
        with cpu_account(brokers, phase):
            for p in procs:
                p.go()
            outs = [p.result(timeout=opts.mib / 5 + 2 * STALL_S) for p in procs]
        phase["broker_sys_cpu_s"] = round(sum(b.cpu_user_sys()[1] for b in brokers) - sys0, 3)
        bytes_in = [b.counter(BYTES_IN) - x for b, x in zip(brokers, bytes0, strict=True)]
    finally:
        for p in procs:
            p.stop()
    seconds = max(o["ended"] for o in outs) - min(o["started"] for o in outs)
    mib = sum(o["mib"] for o in outs)
    res |= phase
    res["mib"] = round(mib, 1)
    res["seconds"] = round(seconds, 3)
    res["mib_s"] = round(mib / seconds, 1)
    res["producers"] = [
        {k: o[k] for k in ("records", "mib", "seconds", "mib_s", "latency", "cpu_s")} for o in outs
    ]
    res["client_cpu_s"] = round(sum(o["cpu_s"] for o in outs), 3)  # the timed part only
    res["broker_bytes_in"] = [int(x) for x in bytes_in]
    derive(res, brokers)
    return res


def derive(res: dict[str, Any], brokers: list[Broker]) -> None:
    """CPU per GiB for the setup and per broker (of the payload that broker received)."""
    gib = res["mib"] / 1024
    each = res.get("broker_cpu_s_each") or [res.get("broker_cpu_s")]
    if None in each:
        return
    res["broker_cpu_s_per_gib"] = round(sum(each) / gib, 2)
    wire = sum(res["broker_bytes_in"]) or 1
    shares = [x / wire for x in res["broker_bytes_in"]]
    res["broker_share"] = [round(s, 3) for s in shares]
    res["broker_cpu_s_per_own_gib"] = [
        round(c / (gib * s), 2) if s > 0 else None for c, s in zip(each, shares, strict=True)
    ]
    res["memory_mib"] = [b.memory_mib() for b in brokers if b.alive()]


def run_setups(counts: list[int], opts: Options, root: Path) -> list[dict[str, Any]]:
    """Start every setup's brokers (each setup on its own data dir), then run the setups in
    turn, run by run, so a drift of the machine (another job, the host's memory) hits all
    setups alike instead of skewing the ratio. Idle brokers cost next to nothing."""
    setups = [{"brokers": n, "runs": []} for n in counts]
    fleets = [
        [Broker(root, name=f"{n}b-broker{i}", data_dir=root / f"data-{n}b", broker_id=i,
                rack=f"bench-{i}", metrics=True) for i in range(n)]
        for n in counts
    ]  # fmt: skip
    try:
        for fleet in fleets:
            for b in fleet:  # one after the other: the first one creates the schema
                b.start()
        for i in range(opts.runs):
            for setup, fleet in zip(setups, fleets, strict=True):
                if "error" in setup:
                    continue
                log(f"{setup['brokers']} broker(s): run {i + 1}")
                try:
                    setup["runs"].append(run_once(fleet, opts, i))
                except Exception as exc:  # keep the other setups' figures
                    setup["error"] = f"{type(exc).__name__}: {exc}"
                    log(f"{setup['brokers']} broker(s) FAILED: {setup['error']}")
    except BenchError as exc:
        for setup in setups:
            setup.setdefault("error", str(exc))
    finally:
        for setup, fleet in zip(setups, fleets, strict=True):
            for b in fleet:
                b.stop()
            setup["log_tails"] = {b.name: b.log_tail(10) for b in fleet}
    return setups


def table(setups: list[dict[str, Any]]) -> str:
    """One column per setup and run, then the 2-vs-1 ratios."""
    most = max((len(s["runs"]) for s in setups), default=0)
    cols = [(s, s["runs"][i]) for i in range(most) for s in setups if i < len(s["runs"])]
    head = ["figure"] + [f"{s['brokers']} broker(s) {r['kind']}" for s, r in cols]

    def per_producer(r: dict[str, Any], *path: str | int) -> str:
        return " / ".join(fmt(get(p, *path)) for p in r["producers"])

    def per_broker(r: dict[str, Any], key: str) -> str:
        return " / ".join(fmt(v) for v in (r.get(key) or [None]))

    rows = [
        ("produce MiB/s, all producers", lambda r: fmt(r["mib_s"])),
        ("  per producer MiB/s", lambda r: per_producer(r, "mib_s")),
        ("  per producer p99 ms", lambda r: per_producer(r, "latency", "p99_ms")),
        ("leaders seen per producer", lambda r: " / ".join(
            ",".join(map(str, ls)) for ls in r["leaders"])),
        ("bytes share per broker", lambda r: per_broker(r, "broker_share")),
        ("broker CPU s/GiB (all brokers)", lambda r: fmt(r.get("broker_cpu_s_per_gib"))),
        ("broker CPU s/GiB per broker", lambda r: per_broker(r, "broker_cpu_s_per_own_gib")),
        ("  of which system time %", lambda r: fmt(
            100 * r["broker_sys_cpu_s"] / r["broker_cpu_s"] if r.get("broker_cpu_s") else None)),
        ("broker CPU s per broker", lambda r: per_broker(r, "broker_cpu_s_each")
         if "broker_cpu_s_each" in r else fmt(r.get("broker_cpu_s"))),
        ("producers' CPU s", lambda r: fmt(r["client_cpu_s"])),
        ("other procs' CPU %", lambda r: fmt(r.get("other_cpu_pct"))),
        ("peak RSS MiB per broker", lambda r: " / ".join(
            fmt(m.get("VmHWM")) for m in r.get("memory_mib") or [{}])),
    ]  # fmt: skip
    lines = render(head, [[name] + [fn(r) for _, r in cols] for name, fn in rows])
    lines.append("")
    by_n = {s["brokers"]: s["runs"] for s in setups}
    for n in sorted(k for k in by_n if k > 1):
        for i, (one, many) in enumerate(zip(by_n.get(1, []), by_n[n], strict=False)):
            lines.append(
                f"run {i + 1} ({one['kind']}): {n} brokers / 1 broker = "
                f"{many['mib_s'] / one['mib_s']:.2f} "
                f"({fmt(many['mib_s'])} / {fmt(one['mib_s'])} MiB/s)"
            )
    busy = [
        f"{s['brokers']}b run {r['run']} {r['other_cpu_pct']}%"
        for s, r in cols
        if (r.get("other_cpu_pct") or 0) > NOISY_PCT
    ]
    if busy:
        lines.append(f"warning: other processes used more than {NOISY_PCT}% of a core during: "
                     + ", ".join(busy) + "; rerun on a quiet machine.")  # fmt: skip
    lines += [f"error ({s['brokers']} broker(s)): {s['error']}" for s in setups if "error" in s]
    return "\n".join(lines)


def parse_args(argv: Sequence[str] | None) -> tuple[Options, argparse.Namespace]:
    """The command line (see bench/README.md)."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--mib", type=int, default=512, help="MiB per run, all producers (512)")
    ap.add_argument("--runs", type=int, default=2, help="runs per setup: first cold (2)")
    ap.add_argument("--producers", type=int, default=2, help="producer processes (2)")
    ap.add_argument("--partitions", type=int, default=8, help="partitions of the topic (8)")
    ap.add_argument("--record-bytes", type=int, default=1024, help="record value size (1024)")
    ap.add_argument("--queue-mib", type=int, default=64, help="each producer's queue MiB (64)")
    ap.add_argument("--setups", default="1,2", help="broker counts to compare (1,2)")
    ap.add_argument("--keep", action="store_true", help="keep the temp dir (logs, data)")
    ap.add_argument("--json", type=Path, help="also write the figures as JSON here")
    a = ap.parse_args(argv)
    if not all(x.strip().isdigit() and int(x) > 0 for x in a.setups.split(",")):
        ap.error("--setups: broker counts such as 1,2")
    if a.mib < 1 or a.runs < 1 or a.producers < 1 or a.partitions < 1 or a.record_bytes < 16:
        ap.error("mib, runs, producers, partitions >= 1; record-bytes >= 16")
    opts = Options(a.mib, a.runs, a.producers, a.partitions, a.record_bytes, a.queue_mib)
    return opts, a


def _on_term(signum: int, frame: FrameType | None) -> None:
    """SIGTERM unwinds like Ctrl-C, so `finally` stops the brokers."""
    raise SystemExit(128 + signum)


def main(argv: Sequence[str] | None = None) -> int:
    opts, args = parse_args(argv)
    signal.signal(signal.SIGTERM, _on_term)
    root = Path(tempfile.mkdtemp(prefix="lakelog-bench2-"))
    started = time.monotonic()
    try:
        setups = run_setups(sorted({int(x) for x in args.setups.split(",")}), opts, root)
    finally:
        if args.keep:
            log(f"kept {root}")
        else:
            shutil.rmtree(root, ignore_errors=True)
    print(table(setups))
    print(f"\n{time.monotonic() - started:.1f} s in all; {opts.runs} run(s) per setup of "
          f"{opts.mib} MiB, {opts.producers} producers, {opts.partitions} partitions, "
          f"{opts.record_bytes} B records")  # fmt: skip
    if args.json:
        doc = {"options": asdict(opts), "setups": setups, "python": sys.version.split()[0]}
        args.json.write_text(json.dumps(doc, indent=2) + "\n")
    failed = any("error" in s for s in setups)
    if failed:
        for s in setups:
            for name, tail in s.get("log_tails", {}).items():
                print(f"\n{name} log (last lines):\n{tail}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
