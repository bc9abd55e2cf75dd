"""Helpers for tests that run several broker processes as one cluster.

Brokers of one cluster share a data dir (one SQLite coordinator, one local object store) and
differ in `LAKELOG_BROKER_ID` and `LAKELOG_RACK`. Clients name their zone in `client.id`
(`lakelog_az=<zone>`), so every helper that talks to the cluster takes a client id: the
zone decides what Metadata a client sees.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
import urllib.request
import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from e2e_fixtures import BrokerFactory
from e2e_harness import BrokerProcess, wait_until

SESSION_TIMEOUT_MS = 3000
"""Low, so a killed broker leaves Metadata within seconds instead of 30."""
HEARTBEAT_INTERVAL_MS = 500

CLUSTER_ENV: dict[str, object] = {
    "BROKER_SESSION_TIMEOUT_MS": SESSION_TIMEOUT_MS,
    "BROKER_HEARTBEAT_INTERVAL_MS": HEARTBEAT_INTERVAL_MS,
}
FAILOVER_ENV: dict[str, object] = {
    # The production defaults, for tests of failover that must not come from a short
    # session timeout; and commits every 50 ms, so the producers have plenty in flight.
    "BROKER_SESSION_TIMEOUT_MS": 30_000,
    "BROKER_HEARTBEAT_INTERVAL_MS": 2_000,
    "BROKER_ZONE_FAILOVER_MS": 6_000,
    "PRODUCE_COMMIT_INTERVAL_MS": 50,
}


def zone_client_id(name: str, zone: str | None) -> str:
    """A client.id that pins the client to `zone` (or no zone at all)."""
    return f"{name},lakelog_az={zone}" if zone else name


def start_cluster(
    factory: BrokerFactory,
    data_dir: Path,
    racks: Sequence[str | None],
    env: dict[str, object] | None = None,
    *,
    metrics: bool = False,
) -> list[BrokerProcess]:
    """Start one broker per entry of `racks` on the shared `data_dir` (ids 1..n) and wait
    until every broker's Metadata lists all of them, so tests never race registration."""
    brokers = [
        factory(
            {**CLUSTER_ENV, **(env or {}), "BROKER_ID": i + 1, **({"RACK": rack} if rack else {})},
            metrics=metrics,
            data_dir=data_dir,
        )
        for i, rack in enumerate(racks)
    ]
    expected = {i + 1 for i in range(len(brokers))}
    for broker in brokers:
        wait_until(
            lambda b=broker: metadata_brokers(b.bootstrap, "cluster-probe") == expected,
            20,
            f"{broker.name}'s Metadata to list brokers {sorted(expected)}",
            interval=0.2,
        )
    return brokers


def bootstrap_of(brokers: Iterable[BrokerProcess]) -> str:
    return ",".join(b.bootstrap for b in brokers)


# ------------------------------------------------------------------- metadata


@dataclass(frozen=True)
class ClusterView:
    """What one client's Metadata says: broker ids and each partition's leader."""

    brokers: dict[int, str]
    leaders: dict[int, int]


def metadata_view(
    bootstrap: str, client_id: str, topic: str | None = None, timeout: float = 10.0
) -> ClusterView:
    """Metadata as librdkafka sees it with this client.id (a fresh client each call, so no
    cached answer hides a change)."""
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": bootstrap, "client.id": client_id})
    md = admin.list_topics(topic=topic, timeout=timeout)
    brokers = {b.id: f"{b.host}:{b.port}" for b in md.brokers.values()}
    leaders: dict[int, int] = {}
    if topic is not None:
        meta = md.topics[topic]
        if meta.error is not None:
            raise RuntimeError(f"metadata for {topic}: {meta.error}")
        leaders = {p.id: p.leader for p in meta.partitions.values()}
    return ClusterView(brokers, leaders)


def leaders_everywhere(
    brokers: Sequence[BrokerProcess], client_id: str, topic: str
) -> ClusterView | None:
    """The one view every broker gives when they all name the same leaders, else None.
    Each broker refreshes its view of the cluster on its own (within about a second), so a
    change seen through one bootstrap address may not be seen through another yet: a
    client asking that one would still be sent to the old leader."""
    views = [metadata_view(b.bootstrap, client_id, topic) for b in brokers]
    if all(v.leaders == views[0].leaders for v in views[1:]):
        return views[0]
    return None


def metadata_brokers(bootstrap: str, client_id: str) -> set[int]:
    return set(metadata_view(bootstrap, client_id).brokers)


def cluster_status(bootstrap: str, timeout: float = 30.0) -> list[dict[str, Any]]:
    """`lakelog cluster -b HOST:PORT status --json`, parsed."""
    proc = subprocess.run(
        [sys.executable, "-m", "lakelog", "cluster", "-b", bootstrap, "status", "--json"],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    assert proc.returncode == 0, f"cluster status failed ({proc.returncode}): {proc.stderr}"
    rows = json.loads(proc.stdout)
    assert isinstance(rows, list), proc.stdout
    return rows


# ------------------------------------------------------------------- metrics


Sample = tuple[str, frozenset[tuple[str, str]]]


def scrape(metrics_port: int) -> dict[Sample, float]:
    """Every sample of a broker's /metrics as {(name, labels): value}."""
    from prometheus_client.parser import text_string_to_metric_families

    url = f"http://127.0.0.1:{metrics_port}/metrics"
    text = urllib.request.urlopen(url, timeout=5).read().decode()
    out: dict[Sample, float] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            out[(sample.name, frozenset(sample.labels.items()))] = sample.value
    return out


def metric_sum(samples: dict[Sample, float], name: str, **labels: str) -> float:
    """The sum of `name` over the samples whose labels include `labels`."""
    want = set(labels.items())
    return sum(v for (n, ls), v in samples.items() if n == name and want <= ls)


def metric_rows(samples: dict[Sample, float], name: str) -> list[tuple[dict[str, str], float]]:
    return [(dict(ls), v) for (n, ls), v in samples.items() if n == name]


# ------------------------------------------------------------------- reading the log


def high_watermarks(bootstrap: str, client_id: str, topic: str, partitions: int) -> dict[int, int]:
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "client.id": client_id,
            "group.id": f"hw-{uuid.uuid4().hex}",
        }
    )
    try:
        return {
            p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=15, cached=False)[1]
            for p in range(partitions)
        }
    finally:
        consumer.close()


def read_log(
    bootstrap: str,
    client_id: str,
    topic: str,
    high: dict[int, int],
    timeout: float = 60.0,
) -> dict[int, list[tuple[int, bytes]]]:
    """Every record of each partition below `high`, as (offset, value), via assign()."""
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "client.id": client_id,
            "group.id": f"read-{uuid.uuid4().hex}",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "fetch.wait.max.ms": 100,
        }
    )
    out: dict[int, list[tuple[int, bytes]]] = {p: [] for p in high}
    try:
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in high])
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and any(
            (out[p][-1][0] + 1 if out[p] else 0) < high[p] for p in high
        ):
            for m in consumer.consume(num_messages=5000, timeout=0.5):
                assert m.error() is None, m.error()
                if m.offset() < high[m.partition()]:
                    out[m.partition()].append((m.offset(), m.value()))
    finally:
        consumer.close()
    return out


def assert_dense(log: dict[int, list[tuple[int, bytes]]], high: dict[int, int]) -> None:
    """Offsets of each partition are exactly 0..high-1, each once."""
    for p, records in log.items():
        offsets = [o for o, _ in records]
        assert offsets == list(range(high[p])), (
            f"partition {p}: {len(offsets)} records read for high watermark {high[p]}; "
            f"first mismatches {[(i, o) for i, o in enumerate(offsets) if o != i][:5]}"
        )


def assert_unique_values(log: dict[int, list[tuple[int, bytes]]]) -> None:
    """No record id (value) appears twice anywhere in the log."""
    where: dict[bytes, tuple[int, int]] = {}
    for p, records in log.items():
        for offset, value in records:
            assert value not in where, (
                f"duplicate {value!r}: at {where[value]} and at {(p, offset)}"
            )
            where[value] = (p, offset)
