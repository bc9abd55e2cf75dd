#!/usr/bin/env python3
"""`lakelog pipeline tables` throughput on local Spark: rows per second and MiB/s (of
record keys and values read) that one pass writes into a table topic's Iceberg table.

The store is filled without a broker (as bench/pipeline_jobs.py does): `--objects` WAL
objects, each with one batch of `--records` records of about `--record-bytes` bytes per
partition (`--partitions`), committed with the coordinator's `commit_file`, on a topic with
`lakelog.iceberg.mode` = `--mode`. In value_schema mode the values are JSON objects the
topic's JSON Schema decodes into four typed columns. Spark (`--master`, default local[2])
and its Python workers are started before the timing; the pass's time includes the
catalog reads, the Spark tasks and the Iceberg commit.

Run: `.venv/bin/python bench/tables.py [--mode key_value|value_schema] [--objects 400]`
(`--storage-url`/`--coordinator-url` for S3 and PostgreSQL instead of a temp dir).
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
from lakelog.coordinator import CreateTopicRequest, open_coordinator
from lakelog.log.protocol.records import BatchHeader
from lakelog.log.storage.store import ObjectStorage
from lakelog.log.storage.wal import WalEntry
from lakelog.pipeline.batch_writer import encode_record, rebuild_batch
from lakelog.pipeline.context import JobContext
from lakelog.pipeline.tables import run_tables
from pipeline_jobs import put_wal
from report import render

TOPIC = "tables-bench"
SCHEMA = {
    "type": "object",
    "properties": {
        "user": {"type": "string"},
        "page": {"type": "string"},
        "ms": {"type": "integer"},
        "pad": {"type": "string"},
    },
    "required": ["user", "page"],
}


def value(i: int, size: int, mode: str) -> bytes:
    if mode == "key_value":
        return os.urandom(size)
    doc = {"user": f"u{i % 1000}", "page": f"/p/{i % 50}", "ms": i, "pad": ""}
    doc["pad"] = "x" * max(0, size - len(json.dumps(doc)))
    return json.dumps(doc).encode()


def batch(records: int, size: int, timestamp: int, mode: str, base: int) -> tuple[bytes, int]:
    header = BatchHeader(0, 0, -1, 2, 0, 0, records - 1, timestamp, timestamp, -1, -1, -1, 0)
    keys = [f"k{base + i}".encode() for i in range(records)]
    values = [value(base + i, size, mode) for i in range(records)]
    encoded = [encode_record(i, 0, keys[i], values[i]) for i in range(records)]
    payload = sum(len(k) + len(v) for k, v in zip(keys, values, strict=True))
    return rebuild_batch(header, 0, encoded), payload


async def fill(settings: Settings, args: argparse.Namespace) -> tuple[int, int]:
    """Commit the objects; returns (records, key and value bytes)."""
    coordinator = open_coordinator(settings.resolved_coordinator_url)
    storage = ObjectStorage.from_url(settings.resolved_storage_url)
    await coordinator.start()
    configs = {"lakelog.iceberg.mode": args.mode, "retention.ms": "-1"}
    if args.mode == "value_schema":
        configs["lakelog.iceberg.value.schema"] = json.dumps(SCHEMA)
    try:
        [created] = await coordinator.create_topics(
            [CreateTopicRequest(TOPIC, args.partitions, 1, configs)]
        )
        topic_id = created.topic_id
        assert topic_id is not None, created
        now = int(time.time() * 1000)
        limit = asyncio.Semaphore(16)

        async def one(index: int) -> int:
            made = [
                batch(args.records, args.record_bytes, now, args.mode, index * args.records)
                for _ in range(args.partitions)
            ]
            entries = [
                WalEntry(topic_id, p, data, args.records, -1, -1, -1)
                for p, (data, _) in enumerate(made)
            ]
            await put_wal(storage, coordinator, entries, now, limit)
            return sum(p for _, p in made)

        payload = 0
        for start in range(0, args.objects, 200):
            sizes = await asyncio.gather(
                *(one(i) for i in range(start, min(start + 200, args.objects)))
            )
            payload += sum(sizes)
        return args.objects * args.partitions * args.records, payload
    finally:
        await coordinator.close()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mode", choices=("key_value", "value_schema"), default="key_value")
    parser.add_argument("--objects", type=int, default=400)
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--records", type=int, default=250)
    parser.add_argument("--record-bytes", type=int, default=200)
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--storage-url")
    parser.add_argument("--coordinator-url")
    parser.add_argument("--json")
    args = parser.parse_args()
    workdir = Path(tempfile.mkdtemp(prefix="lakelog-tables-bench."))
    try:
        settings = Settings(
            data_dir=workdir, storage_url=args.storage_url, coordinator_url=args.coordinator_url
        )
        log(f"filling: {args.objects} objects, mode {args.mode}")
        records, payload = asyncio.run(fill(settings, args))
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
        from lakelog.pipeline.session import build_session
        from lakelog.spark import warm_up

        spark = build_session(args.master, "lakelog-bench")
        warm_up(spark)
        log("running the tables job")
        started = time.perf_counter()
        with JobContext(settings, spark=spark) as ctx:
            summary = run_tables(ctx, [TOPIC])
        seconds = time.perf_counter() - started
        spark.stop()
        assert summary.rows_written == records, (summary.rows_written, records)
        row: dict[str, Any] = {
            "mode": args.mode,
            "rows": records,
            "MiB read": round(payload / MiB, 1),
            "MiB written": round(summary.bytes_written / MiB, 1),
            "files": summary.files,
            "seconds": round(seconds, 2),
            "rows/s": round(records / seconds),
            "MiB/s": round(payload / MiB / seconds, 1),
        }
        head = list(row)
        print("\n".join(render(head, [[str(row[h]) for h in head]])))
        if args.json:
            Path(args.json).write_text(json.dumps(row, indent=2))
        return 0
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    raise SystemExit(main())
