"""Mirror catch-up after a link outage: memory and speed (KIP-1279 review point VK1).

Two clusters on this machine: the source is two broker processes on one data dir (zones
a and b), the destination one broker mirroring a many-partition topic from the zone-a
broker only (its client names zone a). Each run stops the zone-a broker, produces a
backlog through the zone-b broker, restarts zone a on the same port and data dir, and
times the destination's catch-up while sampling its RSS every 10 ms. Run 1 is cold (the
destination's first catch-up), run 2 warm. Printed: backlog, partitions, catch-up time and
MiB/s, fetch-buffer peak (the broker's own gauge) against the cap, destination RSS before
and at peak, destination CPU.

    .venv/bin/python bench/mirror_catchup.py [--partitions 1000] [--backlog-mib 256]
        [--cap-mib 16] [--fetchers 2] [--runs 2] [--json PATH]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, Producer, TopicPartition

import broker_proc
from broker_proc import Broker, cpu_account
from clients import create_topic
from common import BenchError, MiB, log
from report import render

VALUE = 1024


def pinned_launch(broker: Broker, port: int) -> None:
    """Start a broker again on the port it had (the mirror's bootstrap names it)."""
    original = broker_proc.free_port
    broker_proc.free_port = lambda: port
    try:
        broker.start()
    finally:
        broker_proc.free_port = original


def rss(broker: Broker) -> int:
    assert broker.proc is not None
    for line in Path(f"/proc/{broker.proc.pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise BenchError("no VmRSS")


def produce(bootstrap: str, topic: str, partitions: int, total: int, tag: str) -> None:
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "client.id": "lakelog_az=b",
            "linger.ms": 20,
            "batch.size": 512 * 1024,
            "queue.buffering.max.kbytes": 256 * 1024,
        }
    )
    payload = bytes(VALUE - 16)
    for i in range(total // VALUE):
        while True:
            try:
                producer.produce(
                    topic, value=f"{tag}{i:012d}".encode() + payload, partition=i % partitions
                )
                break
            except BufferError:
                producer.poll(0.05)
        if i % 10_000 == 0:
            producer.poll(0)
    if producer.flush(120):
        raise BenchError("the backlog was not acknowledged")


def ends(bootstrap: str, topic: str, partitions: int) -> dict[int, int]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench-probe"})
    try:
        return {
            p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1]
            for p in range(partitions)
        }
    finally:
        consumer.close()


async def mirror(dest: str, source: str, topic: str) -> None:
    from lakelog.mirror.client import MirrorClient

    client = await MirrorClient.connect(dest, "bench", timeout=120)
    assert isinstance(client, MirrorClient)
    async with client:
        await client.create("bench", source, {"client.id": "lakelog_az=a"}, [topic])


def wait_equal(source: str, dest: str, topic: str, partitions: int, limit: float) -> None:
    want = ends(source, topic, partitions)
    deadline = time.monotonic() + limit
    while ends(dest, topic, partitions) != want:
        if time.monotonic() > deadline:
            raise BenchError(f"not caught up within {limit:.0f} s")
        time.sleep(0.2)


def one_run(
    args: argparse.Namespace, zone_a: Broker, zone_b: Broker, dest: Broker, topic: str
) -> dict[str, Any]:
    port = zone_a.port
    idle = max(rss(dest) for _ in range(5))
    zone_a.stop()
    log(f"zone-a broker down; producing {args.backlog_mib} MiB through zone b")
    produce(zone_b.bootstrap, topic, args.partitions, args.backlog_mib * MiB, f"r{time.time_ns()}")
    peak = [idle]
    done = threading.Event()

    def sample() -> None:
        while not done.is_set():
            peak[0] = max(peak[0], rss(dest))
            time.sleep(0.01)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    run: dict[str, Any] = {}
    with cpu_account(dest, run):
        pinned_launch(zone_a, port)
        wait_equal(zone_b.bootstrap, dest.bootstrap, topic, args.partitions, 600)
    done.set()
    sampler.join()
    run["backlog_mib"] = args.backlog_mib
    run["mib_per_s"] = round(args.backlog_mib / run["wall_s"], 1)
    run["rss_idle_mib"] = round(idle / MiB, 1)
    run["rss_peak_mib"] = round(peak[0] / MiB, 1)
    run["rss_growth_mib"] = round((peak[0] - idle) / MiB, 1)
    run["buffer_peak_mib"] = round(dest.counter("lakelog_mirror_buffer_peak_bytes") / MiB, 1)
    return run


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--partitions", type=int, default=1000)
    parser.add_argument("--backlog-mib", type=int, default=256)
    parser.add_argument("--cap-mib", type=int, default=16)
    parser.add_argument("--fetchers", type=int, default=2)
    parser.add_argument("--runs", type=int, default=2)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    os.environ.update(
        {
            "LAKELOG_MIRROR_MAX_INFLIGHT_BYTES": str(args.cap_mib * MiB),
            "LAKELOG_MIRROR_FETCH_MAX_BYTES": str(min(8 * MiB, args.cap_mib * MiB // 4)),
            "LAKELOG_MIRROR_PARTITION_FETCH_MAX_BYTES": str(256 * 1024),
            "LAKELOG_MIRROR_NUM_FETCHERS": str(args.fetchers),
            "LAKELOG_MIRROR_LEASE_RENEW_MS": "300",
            "LAKELOG_BROKER_SESSION_TIMEOUT_MS": "2000",
            "LAKELOG_BROKER_HEARTBEAT_INTERVAL_MS": "300",
        }
    )
    topic = "mirrored"
    with tempfile.TemporaryDirectory(prefix="lakelog-mirror-bench-") as tmp:
        root = Path(tmp)
        source_dir = root / "source"
        zone_a = Broker(root, name="source-a", data_dir=source_dir, broker_id=1, rack="a")
        zone_b = Broker(root, name="source-b", data_dir=source_dir, broker_id=2, rack="b")
        dest = Broker(root, name="dest", data_dir=root / "dest", metrics=True)
        brokers = [zone_a, zone_b, dest]
        try:
            for b in brokers:
                b.start()
            create_topic(zone_b.bootstrap, topic, args.partitions)
            produce(zone_b.bootstrap, topic, args.partitions, 4 * MiB, "warm")
            asyncio.run(mirror(dest.bootstrap, zone_a.bootstrap, topic))
            wait_equal(zone_b.bootstrap, dest.bootstrap, topic, args.partitions, 120)
            runs = []
            for i in range(args.runs):
                log(f"run {i + 1}: outage and catch-up")
                runs.append(one_run(args, zone_a, zone_b, dest, topic))
        except BenchError as exc:
            print(f"FAILED: {exc}\n{dest.log_tail()}", file=sys.stderr)
            return 1
        finally:
            for b in brokers:
                b.stop()
    head = ["run", "backlog MiB", "catch-up s", "MiB/s", "buffer peak MiB", "RSS idle MiB",
            "RSS peak MiB", "RSS growth MiB", "dest CPU s", "other CPU %"]  # fmt: skip
    body = [
        [
            "cold" if i == 0 else "warm",
            str(r["backlog_mib"]),
            str(r["wall_s"]),
            str(r["mib_per_s"]),
            f"{r['buffer_peak_mib']} (cap {args.cap_mib})",
            str(r["rss_idle_mib"]),
            str(r["rss_peak_mib"]),
            str(r["rss_growth_mib"]),
            str(r.get("broker_cpu_s")),
            str(r.get("other_cpu_pct")),
        ]
        for i, r in enumerate(runs)
    ]
    print(f"mirror catch-up: {args.partitions} partitions, {args.fetchers} fetchers")
    print("\n".join(render(head, body)))
    if args.json:
        args.json.write_text(json.dumps({"args": vars(args) | {"json": None}, "runs": runs}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
