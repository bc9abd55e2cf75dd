#!/usr/bin/env python3
"""Spark source and export throughput on local Spark: how fast does `format("lakelog")`
read a topic straight from object storage, and how fast does `export` write it to Parquet?

A broker fills one topic (`--partitions`, default 4) with `--mib` MiB (default 256) of
`--record-bytes` (1 KiB) records from one confluent producer (`--codec`, default none), then
stops: the source needs no broker. Spark (`--master`, default local[2]) then reads the
whole topic `--runs` times (default 3; run 1 includes starting the Python workers, unless
`--warm-up` started them first with `lakelog.spark.warm_up`, timed separately) with
`sum(length(value))`, so every record is decoded and handed to the JVM, and exports it
once to Parquet. MiB/s counts record values only.

Run: `.venv/bin/python bench/spark_source.py [--mib 256] [--codec lz4] [--json out.json]`.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from broker_proc import Broker
from clients import create_topic, phase_produce
from common import MiB, log
from lakelog.config import Settings
from report import render

TOPIC = "spark-bench"


def jvm_archive_state() -> str:
    """Whether this run's JVM maps the class archive (lakelog.spark.jvm_cache)."""
    from lakelog.spark import jvm_cache

    archive = jvm_cache.archive_path()
    if archive is None:
        return "off"
    return "used" if archive.is_file() else "none yet: written when this run exits"


def spark_session(master: str, plain: bool = False) -> Any:
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    from lakelog.spark import get_or_create, register

    builder = (
        SparkSession.builder.master(master)
        .appName("lakelog-bench")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.driver.memory", "2g")
    )
    spark = builder.getOrCreate() if plain else get_or_create(builder)
    spark.sparkContext.setLogLevel("ERROR")
    register(spark)
    return spark


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mib", type=int, default=256)
    parser.add_argument("--record-bytes", type=int, default=1024)
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--codec", default="none")
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--json", type=Path)
    parser.add_argument("--keep", action="store_true", help="keep the temp dir")
    parser.add_argument(
        "--warm-up", action="store_true", help="lakelog.spark.warm_up before the first read"
    )
    parser.add_argument(
        "--plain-session",
        action="store_true",
        help="builder.getOrCreate() instead of lakelog.spark.get_or_create (no JVM class "
        "archive, pyspark's own worker daemon): the start-up before those",
    )
    args = parser.parse_args()

    root = Path(tempfile.mkdtemp(prefix="lakelog-bench-spark-"))
    results: dict[str, Any] = {"options": vars(args) | {"json": str(args.json)}}
    try:
        broker = Broker(root)
        broker.start()
        try:
            create_topic(broker.bootstrap, TOPIC, args.partitions)
            n = args.mib * MiB // args.record_bytes
            value = os.urandom(args.record_bytes // 2) + bytes(args.record_bytes // 2)
            log(f"producing {n} records ({args.mib} MiB, codec {args.codec})")
            results["produce"] = phase_produce(
                broker.bootstrap,
                TOPIC,
                n,
                value,
                64,
                {"compression.type": args.codec},
            )
        finally:
            broker.stop()
        payload = (n + 1) * args.record_bytes / MiB  # + the warm-up record

        settings = Settings(data_dir=broker.data_dir)
        plain = args.plain_session
        results["jvm_archive"] = "off (--plain-session)" if plain else jvm_archive_state()
        started = time.perf_counter()
        spark = spark_session(args.master, plain)
        results["spark_start_s"] = round(time.perf_counter() - started, 1)
        if args.warm_up:
            from lakelog.spark import warm_up

            started = time.perf_counter()
            warm_up(spark)
            results["warm_up_s"] = round(time.perf_counter() - started, 1)
            log(f"warm-up: {results['warm_up_s']} s")
        from pyspark.sql import functions as F

        reads = []
        for run in range(1, args.runs + 1):
            df = (
                spark.read.format("lakelog")
                .option("lakelog.data.dir", str(broker.data_dir))
                .option("subscribe", TOPIC)
                .load()
            )
            t0 = time.perf_counter()
            row = df.select(F.count("*").alias("n"), F.sum(F.length("value")).alias("b")).first()
            seconds = time.perf_counter() - t0
            assert row is not None and row["n"] == n + 1, f"read {row} of {n + 1} records"
            reads.append({"run": run, "seconds": round(seconds, 2), "mib_s": payload / seconds})
            log(f"read run {run}: {seconds:.2f} s, {payload / seconds:.0f} MiB/s")
        results["reads"] = reads

        from lakelog.pipeline.export import run_export

        t0 = time.perf_counter()
        summary = run_export(settings, [TOPIC], str(root / "export"), spark=spark)
        seconds = time.perf_counter() - t0
        results["export"] = {
            "seconds": round(seconds, 2),
            "mib_s": payload / seconds,
            "records": summary.records,
            "files": summary.files,
            "parquet_mib": round(summary.bytes_written / MiB, 1),
        }
        log(f"export: {seconds:.2f} s, {payload / seconds:.0f} MiB/s")
        spark.stop()
    finally:
        if not args.keep:
            shutil.rmtree(root, ignore_errors=True)

    rows = [
        ("payload MiB", f"{payload:.0f} ({args.codec}, {args.partitions} partitions)"),
        ("produce MiB/s", f"{results['produce']['mib_s']}"),
        ("Spark session start s", f"{results['spark_start_s']}"),
        ("JVM class archive", results["jvm_archive"]),
    ]
    if "warm_up_s" in results:
        rows.append(("warm-up s (lakelog.spark.warm_up)", f"{results['warm_up_s']}"))
    rows += [
        (f"source read run {r['run']} MiB/s", f"{r['mib_s']:.0f} ({r['seconds']} s)")
        for r in results["reads"]
    ]
    rows.append(("export MiB/s", f"{results['export']['mib_s']:.0f}"))
    print("\n".join(render(["figure", "value"], [list(r) for r in rows])))
    if args.json:
        args.json.write_text(json.dumps(results, indent=1, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
