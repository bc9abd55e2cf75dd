#!/usr/bin/env python3
"""Merge and GC throughput on local Spark: how many objects (and MiB) per second do
`lakelog pipeline merge` and `lakelog pipeline gc` get through?

The store is filled without a broker, so the bench measures only the jobs: `--objects`
(default 2000) WAL objects, each holding one batch of `--records` (default 10) records of
`--record-bytes` (400) bytes for each of `--partitions` (8) partitions, committed with the
coordinator's `commit_file`, plus `--orphans` (1000) uploaded WAL objects nobody committed.
Grace periods are 0. Spark (`--master`, default local[2]) is started before any timing;
its Python workers too with `--warm-up` (else merge, the first job, pays their start-up).

1. merge: reads every live batch, writes one segment object per partition (joined rows),
   swaps coordinates. objects/s counts source objects; MiB/s the bytes rewritten.
2. gc: lists the store, anti-joins with the coordinator, deletes the
   orphans and the objects merge emptied. objects/s counts objects deleted.

Run: `.venv/bin/python bench/pipeline_jobs.py [--objects 2000] [--json out.json]`
(`--storage-url`/`--coordinator-url` to run against S3 and PostgreSQL instead of a temp dir).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from common import MiB, log
from lakelog.config import Settings
from lakelog.coordinator import CommitBatch, CreateTopicRequest, TimestampType, open_coordinator
from lakelog.log.protocol.records import BatchHeader
from lakelog.log.storage.keys import new_wal_key
from lakelog.log.storage.store import ObjectStorage
from lakelog.log.storage.wal import WalEntry, build_wal
from lakelog.pipeline.batch_writer import encode_record, rebuild_batch
from lakelog.pipeline.context import JobContext
from lakelog.pipeline.gc import run_gc
from lakelog.pipeline.merge import run_merge
from report import render

TOPIC = "pipeline-bench"


def batch(records: int, record_bytes: int, timestamp: int) -> bytes:
    header = BatchHeader(0, 0, -1, 2, 0, 0, records - 1, timestamp, timestamp, -1, -1, -1, 0)
    payload = os.urandom(record_bytes)
    encoded = [encode_record(i, 0, f"k{i}".encode(), payload) for i in range(records)]
    return rebuild_batch(header, 0, encoded)


async def put_wal(
    storage: ObjectStorage,
    coordinator: Any,
    entries: list[WalEntry],
    now: int,
    limit: asyncio.Semaphore,
    *,
    commit: bool = True,
) -> int:
    """One WAL object of `entries` (each one batch of `record_count` records) PUT to the
    store and, with `commit`, committed as a broker commits it; the object's size."""
    wal = build_wal(entries)
    key = new_wal_key()
    async with limit:
        await storage.put(key, wal.parts)
    if commit:
        placed = [
            CommitBatch(
                e.topic_id,
                e.partition,
                off,
                size,
                e.record_count,
                now,
                now,
                TimestampType.CREATE_TIME,
            )
            for e, (off, size) in zip(entries, wal.placements, strict=True)
        ]
        await coordinator.commit_file(key, 0, -1, wal.size, placed)
    return wal.size


async def fill(settings: Settings, args: argparse.Namespace) -> int:
    """Commit the objects and upload the orphans; returns the committed bytes."""
    coordinator = open_coordinator(settings.resolved_coordinator_url)
    storage = ObjectStorage.from_url(settings.resolved_storage_url)
    await coordinator.start()
    try:
        [created] = await coordinator.create_topics([CreateTopicRequest(TOPIC, args.partitions, 1)])
        topic_id = created.topic_id
        assert topic_id is not None, created
        now = int(time.time() * 1000)
        total = 0
        limit = asyncio.Semaphore(16)

        async def one(index: int, commit: bool) -> int:
            data = batch(args.records, args.record_bytes, now)
            entries = [
                WalEntry(topic_id, p, data, args.records, -1, -1, -1)
                for p in range(args.partitions)
            ]
            return await put_wal(storage, coordinator, entries, now, limit, commit=commit)

        for start in range(0, args.objects, 200):
            sizes = await asyncio.gather(
                *(one(i, True) for i in range(start, min(start + 200, args.objects)))
            )
            total += sum(sizes)
        await asyncio.gather(*(one(i, False) for i in range(args.orphans)))
        return total
    finally:
        await coordinator.close()


def spark_session(master: str) -> Any:
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from lakelog.pipeline.session import build_session

    return build_session(master, "lakelog-bench")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--objects", type=int, default=2000)
    parser.add_argument("--orphans", type=int, default=1000)
    parser.add_argument("--partitions", type=int, default=8)
    parser.add_argument("--records", type=int, default=10)
    parser.add_argument("--record-bytes", type=int, default=400)
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--storage-url")
    parser.add_argument("--coordinator-url")
    parser.add_argument("--json")
    parser.add_argument(
        "--warm-up",
        action="store_true",
        help="start Spark's Python workers (lakelog.spark.warm_up) before timing merge",
    )
    args = parser.parse_args()
    workdir = Path(tempfile.mkdtemp(prefix="lakelog-pipeline-bench."))
    try:
        settings = Settings(
            data_dir=workdir,
            storage_url=args.storage_url,
            coordinator_url=args.coordinator_url,
            merge_min_age_ms=0,
            gc_orphan_grace_ms=0,
            file_delete_grace_ms=0,
        )
        log(f"filling: {args.objects} objects + {args.orphans} orphans")
        committed = asyncio.run(fill(settings, args))
        spark = spark_session(args.master)
        if args.warm_up:
            from lakelog.spark import warm_up

            started = time.perf_counter()
            warm_up(spark)
            log(f"warm-up: {time.perf_counter() - started:.1f} s")
        rows: list[dict[str, Any]] = []
        for name, job in (("merge", run_merge), ("gc", run_gc)):
            log(f"running {name}")
            with JobContext(settings, spark=spark) as ctx:
                summary = job(ctx)
            if name == "merge":
                objects, size = summary.details["objects to merge"], summary.bytes_rewritten
            else:
                objects, size = summary.objects_deleted, summary.bytes_deleted
            rows.append(
                {
                    "job": name,
                    "objects": objects,
                    "MiB": round(size / MiB, 1),
                    "seconds": round(summary.seconds, 2),
                    "objects/s": round(int(objects) / summary.seconds),
                    "MiB/s": round(size / MiB / summary.seconds, 1),
                }
            )
        spark.stop()
        log(f"committed {committed / MiB:.1f} MiB in {args.objects} objects")
        head = list(rows[0])
        print("\n".join(render(head, [[str(r[h]) for h in head] for r in rows])))
        if args.json:
            Path(args.json).write_text(json.dumps(rows, indent=2))
        return 0
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    raise SystemExit(main())
