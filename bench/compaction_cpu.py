"""The broker's own compaction (cleanup.policy=compact, no Spark): CPU seconds per GiB
compacted and MiB/s.

One broker on a temp data dir. The bench writes `--mib` MiB of keyed records (`--keys`
distinct keys, so most records are superseded) to a compacted topic whose segment.ms is a
day (nothing is cleanable while it writes), waits until the broker is idle and measures
its idle CPU, then lowers segment.ms to 100 ms: the broker's compaction loop compacts
every partition. It reads the broker's metrics (bytes compacted, pass wall time, passes
committed) and its CPU from /proc, idle CPU subtracted.

CPU s/GiB = broker CPU during the passes / GiB of batch rows the committed passes
covered; MiB/s = those MiB / the passes' wall time. `--rate` sets
compaction_max_bytes_per_second (0, the default here: no pacing, to measure the cost;
the broker's default paces to 64 MiB/s of reads).

Run: `.venv/bin/python bench/compaction_cpu.py [--mib 256] [--keys 10000] [--json out.json]`.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

from broker_proc import Broker
from common import BenchError, MiB, log
from report import fmt, render

GiB = 1024 * MiB
TOPIC = "compaction-bench"
_SAMPLE = re.compile(r"^(\w+)(?:\{([^}]*)\})? ([0-9.e+-]+)$")


def metrics(broker: Broker) -> dict[str, float]:
    """Every compaction sample of the broker's /metrics, by `name{labels}`."""
    url = f"http://127.0.0.1:{broker.metrics_port}/metrics"
    out: dict[str, float] = {}
    for line in urllib.request.urlopen(url, timeout=5).read().decode().splitlines():
        m = _SAMPLE.match(line)
        if m and m.group(1).startswith("lakelog_compaction"):
            out[f"{m.group(1)}{{{m.group(2) or ''}}}"] = float(m.group(3))
    return out


def produce(bootstrap: str, mib: int, keys: int, record_bytes: int, partitions: int) -> int:
    from confluent_kafka import Producer

    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "linger.ms": 20,
            "batch.size": 256 * 1024,
            "queue.buffering.max.kbytes": 64 * 1024,
            "compression.type": "none",
        }
    )
    value = os.urandom(record_bytes // 2).hex().encode()[:record_bytes]
    count = mib * MiB // record_bytes
    for i in range(count):
        while True:
            try:
                producer.produce(
                    TOPIC, key=b"key-%08d" % (i % keys), value=value, partition=i % partitions
                )
                break
            except BufferError:
                producer.poll(0.05)
        if i % 1000 == 0:
            producer.poll(0)
    if producer.flush(120):
        raise BenchError("records left unsent after 120 s")
    return count


def alter(bootstrap: str, configs: dict[str, str], create: int = 0) -> None:
    from confluent_kafka.admin import (
        AdminClient,
        AlterConfigOpType,
        ConfigEntry,
        ConfigResource,
        NewTopic,
    )

    admin = AdminClient({"bootstrap.servers": bootstrap})
    if create:
        futures = admin.create_topics([NewTopic(TOPIC, create, 1, config=configs)])
    else:
        entries = [
            ConfigEntry(k, v, incremental_operation=AlterConfigOpType.SET)
            for k, v in configs.items()
        ]
        resource = ConfigResource(ConfigResource.Type.TOPIC, TOPIC, incremental_configs=entries)
        futures = admin.incremental_alter_configs([resource])
    for future in futures.values():
        future.result(30)


def run(args: argparse.Namespace, root: Path) -> dict[str, Any]:
    os.environ.update(
        {
            "LAKELOG_COMPACTION_INTERVAL_MS": "200",
            "LAKELOG_COMPACTION_MAX_BYTES_PER_SECOND": str(args.rate),
            "LAKELOG_COMPACTION_MAX_BYTES_PER_PASS": str(args.mib * MiB),
            "LAKELOG_COMPACTION_MAX_KEYS_PER_PASS": str(max(args.keys * 2, 250_000)),
        }
    )
    broker = Broker(root, metrics=True)
    broker.start()
    try:
        alter(
            broker.bootstrap,
            {
                "cleanup.policy": "compact",
                "segment.ms": str(24 * 3600 * 1000),
                "min.cleanable.dirty.ratio": "0.01",
            },
            create=args.partitions,
        )
        log(f"writing {args.mib} MiB over {args.keys} keys")
        records = produce(broker.bootstrap, args.mib, args.keys, args.record_bytes, args.partitions)
        time.sleep(2)
        idle0, t0 = broker.cpu_seconds(), time.monotonic()
        time.sleep(args.idle_seconds)
        idle_rate = (broker.cpu_seconds() - idle0) / (time.monotonic() - t0)
        before = metrics(broker)
        cpu0, wall0 = broker.cpu_seconds(), time.monotonic()
        alter(broker.bootstrap, {"segment.ms": "100"})
        log("compacting")
        deadline = time.monotonic() + args.timeout
        committed = 'lakelog_compaction_passes_total{outcome="committed"}'
        while True:
            now = metrics(broker)
            if now.get(committed, 0) - before.get(committed, 0) >= args.partitions:
                break
            if time.monotonic() > deadline:
                raise BenchError(f"not compacted within {args.timeout} s: {now}")
            time.sleep(0.2)
        wall = time.monotonic() - wall0
        cpu = broker.cpu_seconds() - cpu0 - idle_rate * wall

        def delta(name: str) -> float:
            return now.get(name, 0.0) - before.get(name, 0.0)

        compacted = delta('lakelog_compaction_bytes_total{kind="compacted"}')
        seconds = delta("lakelog_compaction_seconds_total{}")
        return {
            "records": records,
            "keys": args.keys,
            "partitions": args.partitions,
            "rate_cap": args.rate,
            "compacted_mib": compacted / MiB,
            "read_mib": delta('lakelog_compaction_bytes_total{kind="read"}') / MiB,
            "removed_mib": delta('lakelog_compaction_bytes_total{kind="removed"}') / MiB,
            "pass_seconds": seconds,
            "broker_cpu_s": cpu,
            "idle_cpu_pct": idle_rate * 100,
            "cpu_s_per_gib": cpu / (compacted / GiB) if compacted else None,
            "mib_s": compacted / MiB / seconds if seconds else None,
            "peak_rss_mib": broker.memory_mib().get("VmHWM"),
        }
    finally:
        broker.stop()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mib", type=int, default=256)
    parser.add_argument("--keys", type=int, default=10_000)
    parser.add_argument("--record-bytes", type=int, default=1024)
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--rate", type=int, default=0, help="compaction_max_bytes_per_second")
    parser.add_argument("--idle-seconds", type=float, default=3.0)
    parser.add_argument("--timeout", type=float, default=600.0)
    parser.add_argument("--json", type=Path)
    parser.add_argument("--keep", action="store_true", help="keep the temp dir")
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="lakelog-compaction-bench-"))
    try:
        result = run(args, root)
    except BenchError as exc:
        log(f"failed: {exc}")
        return 1
    finally:
        if not args.keep:
            shutil.rmtree(root, ignore_errors=True)
    head = ["MiB compacted", "MiB read", "MiB removed", "pass s", "CPU s", "CPU s/GiB", "MiB/s"]
    body = [
        [
            fmt(result["compacted_mib"]),
            fmt(result["read_mib"]),
            fmt(result["removed_mib"]),
            fmt(result["pass_seconds"]),
            fmt(result["broker_cpu_s"]),
            fmt(result["cpu_s_per_gib"]),
            fmt(result["mib_s"]),
        ]
    ]
    print("\n".join(render(head, body)))
    print(
        f"{result['records']} records over {result['keys']} keys in {result['partitions']}"
        f" partitions; broker idle CPU {result['idle_cpu_pct']:.1f}% (subtracted);"
        f" peak RSS {fmt(result['peak_rss_mib'])} MiB"
    )
    if args.json:
        args.json.write_text(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
