"""Link outage with many partitions: the source broker the mirror talks to is stopped while
producers keep writing to the source cluster through its other broker; restarted on the
same port and data dir, the mirror catches up the backlog (many times the in-flight cap)
with the destination broker's fetch buffers under `mirror.max.inflight.bytes` and its RSS
growth bounded by twice the cap, not by the backlog or the partition count.

The source cluster is two brokers on one data dir, in zones a and b. The mirror's client
names zone a, so it only ever talks to the zone-a broker; producers name zone b."""

from __future__ import annotations

import threading
import time
from pathlib import Path

from cluster_support import metric_sum, scrape
from confluent_kafka import Producer
from e2e_fixtures import BrokerFactory
from e2e_harness import create_topic, wait_until
from mirror_support import FAST_MIRROR, end_offsets, mirror_cli

PARTITIONS = 200
MiB = 1 << 20
CAP = 8 * MiB
BACKLOG = 48 * MiB
VALUE = 2048
SOURCE_ENV = {"BROKER_SESSION_TIMEOUT_MS": 2000, "BROKER_HEARTBEAT_INTERVAL_MS": 300}


def _rss(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS")


def _produce(bootstrap: str, topic: str, total: int, tag: str) -> None:
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "client.id": "lakelog_az=b",
            "linger.ms": 20,
            "batch.size": 256 * 1024,
            "compression.type": "none",
        }
    )
    payload = bytes(VALUE - 16)
    for i in range(total // VALUE):
        producer.produce(topic, value=f"{tag}{i:012d}".encode() + payload, partition=i % PARTITIONS)
        if i % 5000 == 0:
            producer.poll(0)
    assert producer.flush(60) == 0


class RssSampler(threading.Thread):
    def __init__(self, pid: int) -> None:
        super().__init__(daemon=True)
        self.pid = pid
        self.peak = 0
        self.stopping = threading.Event()

    def run(self) -> None:
        while not self.stopping.is_set():
            self.peak = max(self.peak, _rss(self.pid))
            time.sleep(0.01)


def test_catch_up_after_an_outage_stays_under_the_memory_cap(
    broker_factory: BrokerFactory, topic_name: str
) -> None:
    zone_a = broker_factory({**SOURCE_ENV, "BROKER_ID": 1, "RACK": "a"})
    zone_b = broker_factory({**SOURCE_ENV, "BROKER_ID": 2, "RACK": "b"}, data_dir=zone_a.data_dir)
    dest = broker_factory(
        {
            **FAST_MIRROR,
            "MIRROR_MAX_INFLIGHT_BYTES": CAP,
            "MIRROR_FETCH_MAX_BYTES": 2 * MiB,
            "MIRROR_PARTITION_FETCH_MAX_BYTES": 256 * 1024,
        },
        metrics=True,
    )
    create_topic(zone_b.bootstrap, topic_name, PARTITIONS)
    _produce(zone_b.bootstrap, topic_name, 2 * MiB, "warm")
    mirror_cli(
        dest,
        "create", "dr",
        "--source", zone_a.bootstrap,
        "--source-config", "client.id=lakelog_az=a",
        "--topic", topic_name,
    )  # fmt: skip

    def caught_up() -> bool:
        want = end_offsets(zone_b.bootstrap, topic_name, PARTITIONS)
        return end_offsets(dest.bootstrap, topic_name, PARTITIONS) == want

    wait_until(caught_up, 60, "the first records mirrored", interval=0.5)
    assert dest.proc is not None
    idle = max(_rss(dest.proc.pid) for _ in range(5))

    zone_a.terminate()  # the link goes down: the mirror only knows the zone-a broker
    _produce(zone_b.bootstrap, topic_name, BACKLOG, "backlog")
    time.sleep(2)
    assert end_offsets(dest.bootstrap, topic_name, PARTITIONS) != end_offsets(
        zone_b.bootstrap, topic_name, PARTITIONS
    )
    sampler = RssSampler(dest.proc.pid)
    sampler.start()
    zone_a.start()  # same port, same data dir
    started = time.monotonic()
    try:
        wait_until(caught_up, 120, "the backlog mirrored", interval=0.5)
    finally:
        sampler.stopping.set()
        sampler.join()
    took = time.monotonic() - started
    assert dest.metrics_port is not None
    samples = scrape(dest.metrics_port)
    buffer_peak = metric_sum(samples, "lakelog_mirror_buffer_peak_bytes")
    growth = sampler.peak - idle
    print(
        f"catch-up of {BACKLOG / MiB:.0f} MiB over {PARTITIONS} partitions: {took:.1f} s, "
        f"buffer peak {buffer_peak / MiB:.1f} MiB (cap {CAP / MiB:.0f}), RSS idle "
        f"{idle / MiB:.0f} MiB, peak {sampler.peak / MiB:.0f} MiB (+{growth / MiB:.1f} MiB)"
    )
    assert 0 < buffer_peak <= CAP
    # The buffers hold at most CAP; one more CAP covers the copies being decoded and written
    # and the allocator's slack. A leak or an unbounded buffer shows the backlog (six times
    # the cap), so twice the cap still tells the two apart.
    assert growth < 2 * CAP, f"RSS grew {growth / MiB:.1f} MiB during catch-up (bound 16 MiB)"
    assert metric_sum(samples, "lakelog_mirror_failures_total") == 0
