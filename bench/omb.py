#!/usr/bin/env python3
"""An OpenMessaging-Benchmark-style workload, so figures compare with published ones.

OMB's usual Kafka workload: 1 KiB records, one topic of many partitions, several producers
at a fixed total rate and a consumer group reading as they go. Here: one broker process (the
local store, or `--pg-s3`: a throwaway durable PostgreSQL and moto's S3 server), one topic of
`--partitions` (16), `--producers` (2) producer processes sharing `--rate` records/s
(20,000: about 20 MiB/s; OMB's published runs often use 50,000 on far larger machines) and
`--consumers` (2) consumer processes in one group (subscribe, the classic protocol). Each
producer is confluent-kafka with acks=all, linger 5 ms, no compression (OMB's Kafka
driver defaults). After `--warmup` seconds, `--seconds` are measured.

Prints, as OMB does: publish and consume rates, publish latency (send to acknowledgement)
and end-to-end latency (send to receipt in a consumer) p50/p99/p999/max, plus what a
diskless log adds: WAL PUTs per GiB, broker CPU seconds per GiB and peak RSS.

Run: `.venv/bin/python bench/omb.py [--rate 20000] [--partitions 16] [--pg-s3] [--json f]`.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import shutil
import sys
import tempfile
import time
from array import array
from contextlib import nullcontext
from pathlib import Path
from typing import Any

from broker_proc import Broker, cpu_account
from clients import Deliveries, common_conf, create_topic, drain_producer, producer_conf
from common import STALL_S, BenchError, MiB, lat_summary, log
from report import fmt, render
from scale_out import scale_out

GiB = 1024 * MiB
TOPIC = "omb-1kb"
RECORD_BYTES = 1024


def _producer(
    bootstrap: str, rate: float, start: float, warm_end: float, end: float, out: Any
) -> None:
    """Paced sends from `start` to `end` (wall clock); latencies of the records sent after
    `warm_end`. Puts (sent, measured sent, latencies as bytes, error) on `out`."""
    from confluent_kafka import Producer

    pad = os.urandom(RECORD_BYTES - 8)
    measured = Deliveries()
    warm = Deliveries()

    def on_delivery(err: Any, msg: Any) -> None:
        sent_ns = int.from_bytes(msg.value()[:8], "big")
        (measured if sent_ns >= warm_end * 1e9 else warm)(err, msg)

    p = Producer(producer_conf(bootstrap, 256, on_delivery))
    sent = measured_sent = 0
    error = None
    try:
        while time.time() < start:
            time.sleep(0.001)
        t0 = time.time()
        while True:
            now = time.time()
            if now >= end:
                break
            due = int((now - t0) * rate) + 1
            while sent < due:
                now_ns = time.time_ns()
                try:
                    p.produce(TOPIC, now_ns.to_bytes(8, "big") + pad)
                except BufferError:
                    p.poll(0.005)
                    break
                sent += 1
                measured_sent += now_ns >= warm_end * 1e9
            p.poll(0)
            if sent >= due:
                time.sleep(0.001)
        drain_producer(p, _Both(measured, warm), sent, "omb producer")
        if measured.errors or warm.errors:
            error = measured.first_error or warm.first_error
    except BaseException as exc:
        error = repr(exc)
    out.put((sent, measured_sent, measured.latencies.tobytes(), error))


class _Both:
    """drain_producer's view of two Deliveries sinks."""

    def __init__(self, a: Deliveries, b: Deliveries) -> None:
        self.a, self.b = a, b

    @property
    def done(self) -> int:
        return self.a.done + self.b.done


def _consumer(bootstrap: str, warm_end: float, stop: Any, seen: Any, out: Any) -> None:
    """A group member: end-to-end latency of the records sent after `warm_end`."""
    from confluent_kafka import Consumer

    conf = common_conf(bootstrap) | {
        "group.id": "omb",
        "auto.offset.reset": "earliest",
        "enable.auto.commit": True,
        "fetch.wait.max.ms": 500,
        "fetch.queue.backoff.ms": 0,
    }
    e2e = array("d")
    error = None
    c = Consumer(conf)
    try:
        c.subscribe([TOPIC])
        hard_stop = time.monotonic() + 900
        while not stop.is_set() and time.monotonic() < hard_stop:
            msgs = c.consume(num_messages=5_000, timeout=0) or c.consume(1, timeout=0.1)
            now = time.time_ns()
            for m in msgs:
                if m.error() is not None:
                    error = error or str(m.error())
                    continue
                sent = int.from_bytes(m.value()[:8], "big")
                with seen.get_lock():
                    seen.value += 1
                if sent >= warm_end * 1e9:
                    e2e.append((now - sent) / 1e9)
    except BaseException as exc:
        error = repr(exc)
    finally:
        c.close()
    out.put((e2e.tobytes(), error))


def run(args: argparse.Namespace, bootstrap: str) -> dict[str, Any]:
    ctx = mp.get_context("spawn")
    out_p, out_c = ctx.Queue(), ctx.Queue()
    stop, seen = ctx.Event(), ctx.Value("q", 0)
    start = time.time() + 8.0  # processes start and the group settles first
    warm_end = start + args.warmup
    end = warm_end + args.seconds
    consumers = [
        ctx.Process(target=_consumer, args=(bootstrap, warm_end, stop, seen, out_c))
        for _ in range(args.consumers)
    ]
    per_producer = args.rate / args.producers
    producers = [
        ctx.Process(target=_producer, args=(bootstrap, per_producer, start, warm_end, end, out_p))
        for _ in range(args.producers)
    ]
    for proc in consumers + producers:
        proc.start()
    try:
        results = [out_p.get(timeout=end - time.time() + 2 * STALL_S) for _ in producers]
        total = sum(r[0] for r in results)
        errors = [r[3] for r in results if r[3]]
        if errors:
            raise BenchError(f"producer failed: {errors[0]}")
        last, last_change = seen.value, time.monotonic()
        while seen.value < total:
            time.sleep(0.2)
            if seen.value != last:
                last, last_change = seen.value, time.monotonic()
            elif time.monotonic() - last_change > STALL_S:
                raise BenchError(f"consumers saw {seen.value} of {total} records")
        consume_done = time.time()
        stop.set()
        gathered = [out_c.get(timeout=60) for _ in consumers]
    finally:
        stop.set()
        for proc in consumers + producers:
            proc.join(30)
            if proc.is_alive():
                proc.kill()
    cerrors = [g[1] for g in gathered if g[1]]
    if cerrors:
        raise BenchError(f"consumer failed: {cerrors[0]}")
    publish, e2e = array("d"), array("d")
    for r in results:
        publish.frombytes(r[2])
    for g in gathered:
        e2e.frombytes(g[0])
    measured = sum(r[1] for r in results)
    if len(e2e) != measured:
        raise BenchError(f"consumers saw {len(e2e)} of the {measured} measured records")
    return {
        "records": total,
        "publish rate rec/s": round(measured / args.seconds),
        "publish MiB/s": round(measured * RECORD_BYTES / MiB / args.seconds, 1),
        "consume rate rec/s": round(total / (consume_done - start)),
        "publish latency ms": lat_summary(publish),
        "end-to-end latency ms": lat_summary(e2e),
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rate", type=float, default=20_000, help="records/s in all (20,000)")
    ap.add_argument("--partitions", type=int, default=16, help="partitions (16)")
    ap.add_argument("--producers", type=int, default=2, help="producer processes (2)")
    ap.add_argument("--consumers", type=int, default=2, help="consumers in the group (2)")
    ap.add_argument("--warmup", type=float, default=5.0, help="unmeasured seconds (5)")
    ap.add_argument("--seconds", type=float, default=20.0, help="measured seconds (20)")
    ap.add_argument("--pg-s3", action="store_true", help="durable PostgreSQL + moto's S3")
    ap.add_argument("--json", type=Path, help="also write the figures as JSON here")
    args = ap.parse_args()
    root = Path(tempfile.mkdtemp(prefix="lakelog-bench-omb-"))
    try:
        with scale_out() if args.pg_s3 else nullcontext() as backends:
            if backends is not None:
                os.environ["LAKELOG_STORAGE_URL"], os.environ["LAKELOG_COORDINATOR_URL"] = backends
            broker = Broker(root, metrics=True)
            broker.start()
            try:
                create_topic(broker.bootstrap, TOPIC, args.partitions)
                log(
                    f"{args.producers} producers at {args.rate:.0f} records/s, "
                    f"{args.consumers} consumers, {args.partitions} partitions"
                )
                before = broker.metric("lakelog_wal_objects_total")
                cpu: dict[str, Any] = {}
                with cpu_account(broker, cpu):
                    result = run(args, broker.bootstrap)
                puts = broker.metric("lakelog_wal_objects_total") - before
                gib = result["records"] * RECORD_BYTES / GiB
                result["PUTs/GiB"] = round(puts / gib)
                result["broker CPU s/GiB"] = round(cpu.get("broker_cpu_s", 0.0) / gib, 2)
                result["broker peak RSS MiB"] = broker.memory_mib().get("VmHWM")
            finally:
                broker.stop()
    except BenchError as exc:
        log(f"failed: {exc}")
        return 1
    finally:
        shutil.rmtree(root, ignore_errors=True)
    lat = ("p50_ms", "p99_ms", "p999_ms", "max_ms")
    head = ["figure", "value"]
    body = []
    for key, value in result.items():
        if isinstance(value, dict):
            value = " / ".join(fmt(value[k]) for k in lat) + " (p50/p99/p999/max)"
        body.append([key, fmt(value) if not isinstance(value, str) else value])
    print("\n".join(render(head, body)))
    if args.json:
        args.json.write_text(json.dumps(result | {"options": vars(args) | {"json": None}}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
