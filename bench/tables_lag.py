#!/usr/bin/env python3
"""How far a table topic's Iceberg table lags behind the topic under steady produce.

One broker on the embedded defaults (a temp dir), a key_value table topic of
`--partitions` partitions, a producer paced at `--mib` MiB/s (acks=all, 1 KiB records) for
`--seconds`, and `lakelog pipeline tables --every EVERY` running beside it on local Spark.
Every `--sample-s` the bench reads the topic's high watermarks and the table's committed
next offsets (the table property `lakelog.next-offsets`), and prints, once the first pass
has committed:
- lag in records: high watermark minus the table's next offset, summed over partitions;
- lag in seconds: how long ago the topic held as many records as the table holds now
  (from the high watermarks sampled earlier), so a table one pass behind lags by about the
  pass interval plus the pass's own time.

Run: `.venv/bin/python bench/tables_lag.py [--mib 10] [--every 10] [--seconds 180]`.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from bisect import bisect_left
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from broker_proc import Broker
from common import BenchError, MiB, log
from lakelog.config import Settings
from lakelog.pipeline.tables import NEXT_OFFSETS
from lakelog.tables.catalog import NAMESPACE, open_catalog

RECORD = 1024


def pace(bootstrap: str, topic: str, mib: float, seconds: float, stop: threading.Event) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5})
    payload = os.urandom(RECORD)
    per_tick = mib * MiB / RECORD / 20  # twenty ticks a second
    owed = 0.0
    end = time.monotonic() + seconds
    while not stop.is_set() and time.monotonic() < end:
        tick = time.monotonic()
        owed += per_tick
        while owed >= 1:
            try:
                producer.produce(topic, payload)
            except BufferError:
                producer.poll(0.05)
                continue
            owed -= 1
        producer.poll(0)
        time.sleep(max(0.0, 0.05 - (time.monotonic() - tick)))
    producer.flush(60)


def high_watermarks(consumer: Consumer, topic: str, partitions: int) -> int:
    total = 0
    for p in range(partitions):
        _, high = consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)
        total += high
    return total


def table_offsets(settings: Settings, topic: str) -> int | None:
    catalog = open_catalog(settings)
    if not catalog.table_exists((NAMESPACE, topic)):
        return None
    raw = catalog.load_table((NAMESPACE, topic)).properties.get(NEXT_OFFSETS)
    if not raw:
        return None
    return sum(int(o) for o in json.loads(raw)["next"].values())


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else 0.0


def run(args: argparse.Namespace) -> dict[str, Any]:
    root = Path(tempfile.mkdtemp(prefix="lakelog-bench-tables-lag-"))
    broker = Broker(root)
    job: subprocess.Popen[bytes] | None = None
    stop = threading.Event()
    try:
        broker.start()
        topic = "lag"
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        new = NewTopic(
            topic,
            num_partitions=args.partitions,
            replication_factor=1,
            config={"lakelog.iceberg.mode": "key_value", "retention.ms": "-1"},
        )
        admin.create_topics([new])[topic].result(30)
        settings = Settings(data_dir=broker.data_dir)
        producer = threading.Thread(
            target=pace, args=(broker.bootstrap, topic, args.mib, args.seconds, stop)
        )
        producer.start()
        job_log = (root / "tables.log").open("wb")
        job = subprocess.Popen(
            [sys.executable, "-m", "lakelog", "pipeline", "tables", topic,
             "--data-dir", str(broker.data_dir), "--master", args.master,
             "--every", str(args.every)],
            stdout=job_log, stderr=subprocess.STDOUT, start_new_session=True,
        )  # fmt: skip
        consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "lag-bench"})
        history: list[tuple[int, float]] = []  # (high watermark total, time), both rising
        lag_records: list[float] = []
        lag_seconds: list[float] = []
        first_commit: float | None = None
        start = time.monotonic()
        while producer.is_alive():
            now = time.monotonic()
            high = high_watermarks(consumer, topic, args.partitions)
            history.append((high, now))
            done = table_offsets(settings, topic)
            if done is not None:
                first_commit = first_commit or now - start
                lag_records.append(high - done)
                i = bisect_left([h for h, _ in history], done)
                lag_seconds.append(now - history[i][1] if i < len(history) else 0.0)
                log(f"t={now - start:5.0f}s high={high:,} table={done:,} lag={high - done:,}")
            if job.poll() is not None:
                raise BenchError(f"the tables job exited with {job.returncode}: see {job_log}")
            time.sleep(max(0.0, args.sample_s - (time.monotonic() - now)))
        consumer.close()
        return {
            "mib_per_s": args.mib,
            "every_s": args.every,
            "first_commit_s": round(first_commit or 0.0, 1),
            "samples": len(lag_records),
            "lag_records_p50": percentile(lag_records, 0.5),
            "lag_records_p99": percentile(lag_records, 0.99),
            "lag_seconds_p50": round(percentile(lag_seconds, 0.5), 1),
            "lag_seconds_p99": round(percentile(lag_seconds, 0.99), 1),
            "lag_seconds_max": round(max(lag_seconds, default=0.0), 1),
        }
    finally:
        stop.set()
        if job is not None and job.poll() is None:
            os.killpg(job.pid, signal.SIGTERM)
            try:
                job.wait(60)
            except subprocess.TimeoutExpired:
                os.killpg(job.pid, signal.SIGKILL)
                job.wait(30)
        broker.stop()
        shutil.rmtree(root, ignore_errors=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mib", type=float, default=10.0, help="offered MiB/s")
    parser.add_argument("--every", type=float, default=10.0, help="seconds between passes")
    parser.add_argument("--seconds", type=float, default=180.0)
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--sample-s", type=float, default=2.0)
    parser.add_argument("--master", default="local[2]")
    args = parser.parse_args()
    try:
        figures = run(args)
    except BenchError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    for name, value in figures.items():
        print(f"{name:>16}: {value:,}" if isinstance(value, int) else f"{name:>16}: {value}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
