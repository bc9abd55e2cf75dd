#!/usr/bin/env python3
"""Batch coordinator commit latency: how long one `commit_file` of a full WAL object takes.

Every acks=all produce waits for one commit, and each broker commits one object at a time,
so this latency bounds both produce latency and a broker's objects per second. Inkless
reports 77-213 ms per commit on PostgreSQL; the target here is a p99 of 15 ms or less.

The workload, straight against the coordinator API (no broker): one 8 MiB object of
`--batches` (1,600) batches spread evenly over `--partitions` (100) partitions of
`--topics` (10) topics, grouped by partition as in a WAL object; on `--idempotent-pct` (50)
percent of the partitions the batches carry an idempotent producer id with consecutive
sequences (the coordinator checks and records them). `--warmup` (5) untimed commits, then
`--commits` (200) timed ones, each a new object.

Run: `.venv/bin/python bench/commit_latency.py [--commits 200] [--json out.json]`.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any
from uuid import UUID

from broker_proc import kernel_threads_cpu, machine_busy_cpu
from common import NOISY_PCT, OBJECT_BYTES, BenchError, lat_summary, log
from lakelog.coordinator import (
    BatchCoordinator,
    CommitBatch,
    CreateTopicRequest,
    TimestampType,
    open_coordinator,
)
from lakelog.util.errors import ErrorCode
from lakelog.util.runtime import tune_gc
from pg_server import PgServer, available
from report import fmt, render

TARGET_MS = 15.0
RECORDS_PER_BATCH = 5  # ~5 KiB batches of 1 KiB records


@dataclass
class Options:
    """The workload, the same for every coordinator."""

    commits: int
    warmup: int
    batches: int
    partitions: int
    topics: int
    idempotent_pct: int
    producers: int
    interleave: int = 1
    """Producers taking turns batch by batch on each idempotent partition (1: one each)."""


class Workload:
    """Builds each commit's batch list, keeping every idempotent producer's sequences
    consecutive so the coordinator accepts them all."""

    def __init__(self, opts: Options, topic_ids: list[UUID], producer_ids: list[int]) -> None:
        per_topic = opts.partitions // opts.topics
        self.partitions = [(t, p) for t in topic_ids for p in range(per_topic)]
        idem = len(self.partitions) * opts.idempotent_pct // 100
        # Each idempotent partition's producers, taking turns batch by batch.
        self.producers_of = {
            tp: [producer_ids[(i + k) % len(producer_ids)] for k in range(opts.interleave)]
            if i < idem and producer_ids
            else [-1]
            for i, tp in enumerate(self.partitions)
        }
        self.next_seq: dict[tuple[UUID, int, int], int] = {}
        self.batches = opts.batches
        self.byte_size = OBJECT_BYTES // opts.batches

    def commit(self) -> list[CommitBatch]:
        """One object's batches, grouped by partition."""
        now = int(time.time() * 1000)
        n = len(self.partitions)
        out = []
        for i in range(self.batches):
            tp = self.partitions[i * n // self.batches]
            producers = self.producers_of[tp]
            pid = producers[i % len(producers)]
            seq = -1
            if pid >= 0:
                seq = self.next_seq.get((*tp, pid), 0)
                self.next_seq[(*tp, pid)] = seq + RECORDS_PER_BATCH
            out.append(
                CommitBatch(
                    topic_id=tp[0],
                    partition=tp[1],
                    byte_offset=i * self.byte_size,
                    byte_size=self.byte_size,
                    record_count=RECORDS_PER_BATCH,
                    base_timestamp=now,
                    max_timestamp=now,
                    timestamp_type=TimestampType.CREATE_TIME,
                    producer_id=pid,
                    producer_epoch=0 if pid >= 0 else -1,
                    base_sequence=seq,
                )
            )
        return out


async def setup(c: BatchCoordinator, opts: Options) -> tuple[Workload, int]:
    """Create the topics, allocate producer ids, register the uploading broker."""
    per_topic = max(1, opts.partitions // opts.topics)
    reqs = [CreateTopicRequest(f"bench-{i}", per_topic, 1) for i in range(opts.topics)]
    created = await c.create_topics(reqs)
    bad = [r for r in created if r.error != ErrorCode.none or r.topic_id is None]
    if bad:
        raise BenchError(f"create_topics: {bad[0]}")
    pids = [await c.allocate_producer_id() for _ in range(opts.producers)]
    epoch = await c.register_broker(0, None, "127.0.0.1", 9092)
    return Workload(opts, [r.topic_id for r in created if r.topic_id], pids), epoch


class FullCollections:
    """Python's full (generation 2) garbage collections while registered: each stops this
    process for as long as it takes (20-35 ms here), so a commit it lands in is that much
    slower; the table's p99 is often one of them."""

    def __init__(self) -> None:
        self.pauses: list[float] = []
        self._started = 0.0

    def __call__(self, phase: str, info: dict[str, int]) -> None:
        if info["generation"] != 2:
            return
        if phase == "start":
            self._started = time.perf_counter()
        else:
            self.pauses.append(time.perf_counter() - self._started)


async def measure(
    url: str, opts: Options, server_cpu: Callable[[], float] | None = None
) -> dict[str, Any]:
    """Warm-up, then time each commit_file; every batch must be accepted. `server_cpu`
    gives a database server's CPU seconds, to show where the time goes."""
    c = open_coordinator(url)
    await c.start()
    collections = FullCollections()
    try:
        work, epoch = await setup(c, opts)
        tune_gc()  # as `lakelog serve` does once its broker started
        lat: list[float] = []
        cpu = 0.0
        marks: tuple[float, ...] = ()
        for i in range(opts.warmup + opts.commits):
            if i == opts.warmup:
                marks = _marks(server_cpu)
                gc.callbacks.append(collections)
            batches = work.commit()
            cpu0, t0 = _cpu(), time.perf_counter()
            results = await c.commit_file(f"wal/bench-{i:06d}", 0, epoch, OBJECT_BYTES, batches)
            dt = time.perf_counter() - t0
            bad = [r for r in results if r.error != ErrorCode.none or r.is_duplicate]
            if bad:
                raise BenchError(f"commit {i}: {len(bad)} batches refused, first: {bad[0]}")
            if i >= opts.warmup:
                cpu += _cpu() - cpu0
                lat.append(dt)
        wall, own, srv, busy, kthreads = (
            b - a for a, b in zip(marks, _marks(server_cpu), strict=True)
        )
    finally:
        if collections in gc.callbacks:
            gc.callbacks.remove(collections)
        await c.close()
    out: dict[str, Any] = dict(lat_summary(lat))
    out["gc_full_collections"] = len(collections.pauses)
    out["gc_full_max_ms"] = round(1000 * max(collections.pauses, default=0.0), 1)
    out["mean_ms"] = round(1000 * sum(lat) / len(lat), 2)
    out["cpu_ms_per_commit"] = round(1000 * cpu / opts.commits, 2)
    if server_cpu is not None:
        out["server_cpu_ms_per_commit"] = round(1000 * srv / opts.commits, 2)
    other = max(0.0, busy - own - srv - kthreads)
    out["other_cpu_pct"] = round(100 * other / wall, 1)
    out["batches_per_s_at_p50"] = round(opts.batches / (out["p50_ms"] / 1000))
    return out


def _marks(server_cpu: Callable[[], float] | None) -> tuple[float, ...]:
    """Wall clock, own CPU, DB server CPU, machine busy CPU, kernel threads' CPU: their
    differences say whether other processes competed with the measurement."""
    srv = server_cpu() if server_cpu else 0.0
    return time.monotonic(), _cpu(), srv, machine_busy_cpu(), kernel_threads_cpu()


def _cpu() -> float:
    """This process's CPU seconds (for SQLite that is all of the coordinator's work)."""
    t = os.times()
    return t.user + t.system


def run_all(opts: Options, root: Path, pg_url: str | None, skip_pg: bool) -> list[dict]:
    """SQLite, then PostgreSQL (fsync off as the test script runs it, then durable)."""
    out: list[dict[str, Any]] = []

    def one(
        name: str,
        url: str,
        extra: dict[str, Any] | None = None,
        server_cpu: Callable[[], float] | None = None,
    ) -> None:
        log(f"{name}: {opts.warmup} + {opts.commits} commits of {opts.batches} batches")
        row: dict[str, Any] = {"coordinator": name} | (extra or {})
        try:
            row |= asyncio.run(measure(url, opts, server_cpu))
        except Exception as exc:  # keep the other coordinators' figures
            row["error"] = f"{type(exc).__name__}: {exc}"
            log(f"{name} FAILED: {row['error']}")
        out.append(row)

    one("sqlite (WAL, synchronous=FULL)", f"sqlite:///{root}/c.sqlite3")
    if skip_pg:
        out.append({"coordinator": "postgresql", "skipped": "--no-postgres"})
        return out
    if pg_url:
        one("postgresql (--postgres-url)", pg_url)
        return out
    why = available()
    if why:
        out.append({"coordinator": "postgresql", "skipped": why})
        return out
    server = PgServer()
    try:
        server.start()
        for durable, recycled in ((False, False), (True, False), (True, True)):
            if not recycled:
                server.restart(durable)
            else:  # WAL for the whole run, then checkpoints: see PgServer.recycle_wal
                server.recycle_wal(max(256, (opts.warmup + opts.commits) * opts.batches // 1000))
            s = server.settings()
            label = f"postgresql {s['version'].split()[0]} (fsync={s['fsync']}, "
            label += f"synchronous_commit={s['synchronous_commit']})"
            if durable:
                label += ", WAL segments recycled" if recycled else ", new WAL segments"
            name = "bench_recycled" if recycled else "bench_durable" if durable else "bench_nosync"
            extra = {"server": s, "wal_segments_recycled": recycled}
            one(label, server.new_database(name), extra, server.cpu_seconds)
    except Exception as exc:
        out.append({"coordinator": "postgresql", "error": f"{type(exc).__name__}: {exc}"})
    finally:
        server.stop()
    return out


def table(rows: list[dict[str, Any]]) -> str:
    """One line per coordinator, then what could not be measured."""
    head = ["coordinator", "p50 ms", "p99 ms", "max ms", "mean ms", "commits",
            "CPU ms/commit: bench", "DB server", "other procs' CPU %"]  # fmt: skip
    body = [
        [r["coordinator"], fmt(r["p50_ms"]), fmt(r["p99_ms"]), fmt(r["max_ms"]),
         fmt(r["mean_ms"]), str(r["samples"]), fmt(r["cpu_ms_per_commit"]),
         fmt(r.get("server_cpu_ms_per_commit")), fmt(r["other_cpu_pct"])]
        for r in rows if "p50_ms" in r
    ]  # fmt: skip
    lines = render(head, body) if body else []
    busy = [r["coordinator"] for r in rows if r.get("other_cpu_pct", 0) > NOISY_PCT]
    if busy:
        lines.append(f"warning: other processes used more than {NOISY_PCT}% of a core during: "
                     + ", ".join(busy) + "; rerun on a quiet machine.")  # fmt: skip
    for r in rows:
        if "p50_ms" in r:
            ok = "meets" if r["p99_ms"] <= TARGET_MS else "MISSES"
            gcs = f"{r['gc_full_collections']} full GC passes in this process"
            gcs += f" (up to {r['gc_full_max_ms']} ms)" if r["gc_full_collections"] else ""
            lines.append(f"{r['coordinator']}: p99 {ok} the {TARGET_MS:.0f} ms target; {gcs}")
        elif "skipped" in r:
            lines.append(f"{r['coordinator']}: not available ({r['skipped']})")
        else:
            lines.append(f"{r['coordinator']}: FAILED: {r.get('error')}")
    return "\n".join(lines)


def parse_args(argv: Sequence[str] | None) -> tuple[Options, argparse.Namespace]:
    """The command line (see bench/README.md)."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--commits", type=int, default=200, help="timed commits (200)")
    ap.add_argument("--warmup", type=int, default=5, help="untimed commits first (5)")
    ap.add_argument("--batches", type=int, default=1600, help="batches per commit (1600)")
    ap.add_argument("--partitions", type=int, default=100, help="partitions in all (100)")
    ap.add_argument("--topics", type=int, default=10, help="topics they belong to (10)")
    ap.add_argument("--idempotent-pct", type=int, default=50, help="%% idempotent partitions")
    ap.add_argument("--producers", type=int, default=10, help="idempotent producer ids (10)")
    ap.add_argument(
        "--interleave",
        type=int,
        default=1,
        help="producers taking turns on each idempotent partition (1); with 2 or more and"
        " --idempotent-pct 100 no two batches of a commit share a row (the worst case)",
    )
    ap.add_argument("--postgres-url", help="measure this database instead of a throwaway one")
    ap.add_argument("--no-postgres", action="store_true", help="SQLite only")
    ap.add_argument("--json", type=Path, help="also write the figures as JSON here")
    a = ap.parse_args(argv)
    if min(a.commits, a.batches, a.topics, a.producers, a.interleave) < 1 or (
        a.partitions < a.topics or a.interleave > a.producers
    ):
        ap.error("commits, batches, topics, producers, interleave >= 1; partitions >= topics;"
                 " interleave <= producers")  # fmt: skip
    opts = Options(a.commits, a.warmup, a.batches, a.partitions, a.topics,
                   a.idempotent_pct, a.producers, a.interleave)  # fmt: skip
    return opts, a


def main(argv: Sequence[str] | None = None) -> int:
    opts, args = parse_args(argv)
    root = Path(tempfile.mkdtemp(prefix="lakelog-commit-"))
    try:
        rows = run_all(opts, root, args.postgres_url, args.no_postgres)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    print(table(rows))
    turns = f", {opts.interleave} producers taking turns on each" if opts.interleave > 1 else ""
    print(f"\nper commit: one {OBJECT_BYTES >> 20} MiB object, {opts.batches} batches over "
          f"{opts.partitions} partitions ({opts.idempotent_pct}% idempotent{turns}); "
          f"{opts.commits} timed after {opts.warmup} warm-up")  # fmt: skip
    if args.json:
        args.json.write_text(json.dumps({"options": asdict(opts), "results": rows}, indent=2))
    return 1 if any("error" in r for r in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
