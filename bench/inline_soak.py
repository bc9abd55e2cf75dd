#!/usr/bin/env python3
"""Does the coordinator stay flat under steady light load with the small-write path on?

Issue 32 keeps small writes' bytes in the batch coordinator until the broker's mover puts
them into ordinary WAL objects (`produce_inline_move_bytes` / `_move_age_ms`). This bench
runs one broker on the embedded defaults with `produce_inline` on, a producer paced at
`--kib` KiB/s (acks=all, 1 KiB records) for `--minutes`, into a topic whose retention
(`--retention-ms`) is short enough that the log itself reaches a steady size within the
run. Every `--sample-s` it prints: the coordinator's SQLite file (main file plus WAL), the
pages SQLite has in use (file size minus its free list: a file never shrinks, it reuses
free pages), the bytes held inline, the rows of `batches` and `files`, the objects in the
store and the broker's PUTs. At the end it compares the second half's largest figures with
the first half's: flat means the second half grows by no more than one sampling step's
worth of churn.

Run: `.venv/bin/python bench/inline_soak.py [--minutes 60] [--kib 50] [--retention-ms 600000]`.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sqlite3
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from broker_proc import Broker
from clients import create_topic
from common import BenchError, MiB, log

PUTS = 'lakelog_object_requests_total{op="put"}'
RECORD = 1024


def coordinator_figures(db: Path) -> dict[str, Any]:
    """What the coordinator's file holds, read through a read-only connection (the broker
    keeps writing meanwhile; WAL mode lets both go on)."""
    wal = db.with_name(db.name + "-wal")
    file_bytes = db.stat().st_size + (wal.stat().st_size if wal.exists() else 0)
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=30)
    try:
        page_size = con.execute("PRAGMA page_size").fetchone()[0]
        pages = con.execute("PRAGMA page_count").fetchone()[0]
        free = con.execute("PRAGMA freelist_count").fetchone()[0]
        inline = con.execute(
            "SELECT count(*), coalesce(sum(length(data)), 0) FROM inline_files"
        ).fetchone()
        batches = con.execute("SELECT count(*) FROM batches").fetchone()[0]
        files = con.execute("SELECT count(*) FROM files").fetchone()[0]
    finally:
        con.close()
    return {
        "file_bytes": file_bytes,
        "used_bytes": (pages - free) * page_size,
        "inline_files": inline[0],
        "inline_bytes": inline[1],
        "batch_rows": batches,
        "file_rows": files,
    }


def objects_in(store: Path) -> int:
    return sum(len(names) for _, _, names in os.walk(store))


def soak(args: argparse.Namespace) -> list[dict[str, Any]]:
    from confluent_kafka import Producer

    root = Path(tempfile.mkdtemp(prefix="lakelog-bench-soak-"))
    os.environ["LAKELOG_PRODUCE_INLINE"] = "true"
    os.environ["LAKELOG_RETENTION_CHECK_INTERVAL_MS"] = "10000"
    broker = Broker(root, metrics=True)
    rows: list[dict[str, Any]] = []
    try:
        broker.start()
        topic = "soak"
        create_topic(broker.bootstrap, topic, args.partitions)
        from confluent_kafka.admin import (
            AdminClient,
            AlterConfigOpType,
            ConfigEntry,
            ConfigResource,
        )

        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        retention = ConfigEntry(
            "retention.ms", str(args.retention_ms), incremental_operation=AlterConfigOpType.SET
        )
        resource = ConfigResource("topic", topic, incremental_configs=[retention])
        admin.incremental_alter_configs([resource])[resource].result(30)
        producer = Producer({"bootstrap.servers": broker.bootstrap, "acks": "all", "linger.ms": 5})
        errors: list[str] = []

        def delivered(err: Any, _msg: Any) -> None:
            if err is not None and len(errors) < 10:
                errors.append(str(err))

        per_tick = args.kib * 1024 / RECORD / 10  # ten ticks a second
        owed = 0.0
        payload = os.urandom(RECORD)
        start = time.monotonic()
        end = start + args.minutes * 60
        next_sample = start
        db = broker.data_dir / "coordinator.sqlite3"
        store = broker.data_dir / "objects"
        sent = 0
        while True:
            now = time.monotonic()
            if now >= next_sample:
                producer.flush(30)
                row = {
                    "minute": round((now - start) / 60, 1),
                    "sent_mib": round(sent * RECORD / MiB, 2),
                    **coordinator_figures(db),
                    "objects": objects_in(store),
                    "puts": int(broker.metric(PUTS)),
                }
                rows.append(row)
                log(json.dumps(row))
                next_sample += args.sample_s
            if now >= end:
                break
            owed += per_tick
            while owed >= 1:
                producer.produce(topic, payload, on_delivery=delivered)
                owed -= 1
                sent += 1
            producer.poll(0)
            time.sleep(max(0.0, 0.1 - (time.monotonic() - now)))
        producer.flush(30)
        if errors:
            raise BenchError(f"produce failed: {errors}")
    finally:
        broker.stop()
        shutil.rmtree(root, ignore_errors=True)
    return rows


def verdict(rows: list[dict[str, Any]]) -> list[str]:
    half = len(rows) // 2
    first, second = rows[: half + 1], rows[half:]
    lines = []
    for key in ("used_bytes", "file_bytes", "inline_bytes", "batch_rows", "objects"):
        a = max(r[key] for r in first)
        b = max(r[key] for r in second)
        growth = (b - a) / a if a else 0.0
        lines.append(f"{key:>13}: first half max {a:,}, second half max {b:,} ({growth:+.1%})")
    return lines


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--minutes", type=float, default=60)
    parser.add_argument("--kib", type=float, default=50.0, help="offered KiB/s")
    parser.add_argument("--partitions", type=int, default=6)
    parser.add_argument("--retention-ms", type=int, default=600_000)
    parser.add_argument("--sample-s", type=float, default=60.0)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    try:
        rows = soak(args)
    except BenchError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    header = list(rows[0])
    print(" | ".join(header))
    for r in rows:
        print(" | ".join(f"{r[h]:,}" if isinstance(r[h], int) else str(r[h]) for h in header))
    for line in verdict(rows):
        print(line)
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
