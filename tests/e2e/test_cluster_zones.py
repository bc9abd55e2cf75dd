"""Three brokers in three zones on one data dir: each zone's clients stay in their zone.

The point of a leaderless log: producers in every zone write the same partitions through
their own zone's broker, consumers in every zone read the whole log from their own zone's
broker, and no record byte crosses a zone boundary.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from cluster_support import (
    assert_dense,
    assert_unique_values,
    cluster_status,
    high_watermarks,
    metadata_view,
    metric_rows,
    metric_sum,
    read_log,
    scrape,
    start_cluster,
    zone_client_id,
)
from e2e_fixtures import BrokerFactory
from e2e_harness import create_topic

ZONES = ("z1", "z2", "z3")
PARTITIONS = 6
PER_PRODUCER = 900


@dataclass
class ZoneProducer:
    """An idempotent acks=all producer pinned to one zone, producing `<zone>:<i>` values
    round-robin over the partitions, slowly enough that the zones interleave."""

    zone: str
    bootstrap: str
    topic: str
    start: threading.Barrier
    """All producers start producing together, once each has its metadata, so their
    records interleave however long connecting took."""
    acks: list[tuple[bytes, int, int]] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)
    error: BaseException | None = None
    unflushed: int = -1

    def __post_init__(self) -> None:
        self.thread = threading.Thread(target=self._run, name=f"producer-{self.zone}", daemon=True)

    def _run(self) -> None:
        from confluent_kafka import Producer

        try:
            producer = Producer(
                {
                    "bootstrap.servers": self.bootstrap,
                    "client.id": zone_client_id(f"zone-producer-{self.zone}", self.zone),
                    "enable.idempotence": True,
                    "acks": "all",
                    "linger.ms": 5,
                }
            )

            def delivered(err: object, msg: object) -> None:
                if err is not None:
                    self.failures.append(str(err))
                else:
                    self.acks.append((msg.value(), msg.partition(), msg.offset()))  # type: ignore[attr-defined]

            producer.list_topics(self.topic, timeout=20)
            self.start.wait(30)
            for i in range(PER_PRODUCER):
                producer.produce(
                    self.topic,
                    value=f"{self.zone}:{i}".encode(),
                    partition=i % PARTITIONS,
                    on_delivery=delivered,
                )
                producer.poll(0)
                if i % 30 == 29:
                    time.sleep(0.05)  # ~600 records/s per zone over ~1.5 s
            self.unflushed = producer.flush(30)
        except BaseException as exc:
            self.error = exc


def runs(values: list[bytes]) -> int:
    """How many maximal same-zone stretches a partition's values form."""
    zones = [v.split(b":", 1)[0] for v in values]
    return sum(1 for i, z in enumerate(zones) if i == 0 or zones[i - 1] != z)


@pytest.mark.timeout(180)
def test_three_zones_stay_in_zone(
    broker_factory: BrokerFactory, tmp_path: Path, topic_name: str
) -> None:
    brokers = start_cluster(broker_factory, tmp_path / "cluster", ZONES, metrics=True)
    zone_broker = {zone: brokers[i] for i, zone in enumerate(ZONES)}
    zone_id = {zone: i + 1 for i, zone in enumerate(ZONES)}

    # `lakelog cluster status --json`: the three brokers, their zones, distinct epochs.
    rows = cluster_status(brokers[0].bootstrap)
    assert sorted(r["broker_id"] for r in rows) == [1, 2, 3], rows
    assert {r["broker_id"]: r["rack"] for r in rows} == {1: "z1", 2: "z2", 3: "z3"}, rows
    epochs = [r["epoch"] for r in rows]
    assert all(isinstance(e, int) and e >= 0 for e in epochs), rows
    assert len(set(epochs)) == 3, f"broker epochs are not distinct: {rows}"

    create_topic(brokers[0].bootstrap, topic_name, PARTITIONS)

    # Metadata for a client in zone z names z's broker every partition's leader, whichever
    # broker the client bootstraps from. It names the other zones' brokers too (leading
    # nothing), so the client has somewhere to ask once z's broker is gone.
    for zone in ZONES:
        for via in brokers:
            view = metadata_view(via.bootstrap, zone_client_id(f"md-{zone}", zone), topic_name)
            assert view.brokers == {i: b.bootstrap for i, b in enumerate(brokers, 1)}, view
            assert view.leaders == dict.fromkeys(range(PARTITIONS), zone_id[zone]), (
                zone,
                via.name,
                view,
            )

    start = threading.Barrier(len(ZONES))
    producers = [ZoneProducer(z, zone_broker[z].bootstrap, topic_name, start) for z in ZONES]
    for p in producers:
        p.thread.start()
    for p in producers:
        p.thread.join(60)
        assert not p.thread.is_alive(), f"producer {p.zone} did not finish"
        assert p.error is None, f"producer {p.zone}: {p.error!r}"
        assert p.unflushed == 0 and not p.failures, (p.zone, p.unflushed, p.failures[:5])
        assert len(p.acks) == PER_PRODUCER, (p.zone, len(p.acks))

    acked = {value: (partition, offset) for p in producers for value, partition, offset in p.acks}
    assert len(acked) == len(ZONES) * PER_PRODUCER
    per_partition = len(ZONES) * PER_PRODUCER // PARTITIONS
    expected_high = dict.fromkeys(range(PARTITIONS), per_partition)

    # Every zone reads the whole log from its own broker: the same log everywhere.
    logs = {}
    for zone in ZONES:
        client_id = zone_client_id(f"zone-consumer-{zone}", zone)
        bootstrap = zone_broker[zone].bootstrap
        high = high_watermarks(bootstrap, client_id, topic_name, PARTITIONS)
        assert high == expected_high, (zone, high)
        log = read_log(bootstrap, client_id, topic_name, high)
        assert_dense(log, high)
        assert_unique_values(log)
        logs[zone] = log
    assert logs["z1"] == logs["z2"] == logs["z3"], "zones read different logs"

    log = logs["z1"]
    stored = {value: (p, offset) for p, records in log.items() for offset, value in records}
    assert stored == acked, "the log differs from what the producers were acknowledged"
    interleaved = 0
    for p, records in log.items():
        values = [v for _, v in records]
        for zone in ZONES:
            mine = [int(v.split(b":")[1]) for v in values if v.startswith(f"{zone}:".encode())]
            assert mine == sorted(mine), f"partition {p}: {zone}'s records out of order"
            assert len(mine) == PER_PRODUCER // PARTITIONS, (p, zone, len(mine))
        interleaved += runs(values) > len(ZONES)
    assert interleaved, "no partition interleaves the zones' records (producers ran serially?)"

    # No record byte crossed a zone; each broker served its own zone in both directions.
    for zone in ZONES:
        broker = zone_broker[zone]
        assert broker.metrics_port is not None
        samples = scrape(broker.metrics_port)
        cross = {
            d: metric_sum(samples, "lakelog_cross_zone_bytes_total", direction=d)
            for d in ("in", "out")
        }
        assert cross == {"in": 0, "out": 0}, (zone, cross)
        for direction in ("in", "out"):
            local = metric_sum(
                samples,
                "lakelog_zone_bytes_total",
                direction=direction,
                client_zone=zone,
                broker_zone=zone,
            )
            assert local > 0, (zone, direction, metric_rows(samples, "lakelog_zone_bytes_total"))
        foreign = [
            (labels, v)
            for labels, v in metric_rows(samples, "lakelog_zone_bytes_total")
            if labels["client_zone"] in ZONES and labels["client_zone"] != zone and v > 0
        ]
        assert not foreign, (zone, foreign)
        assert metric_sum(samples, "lakelog_bytes_in_total") > 0, zone
        assert metric_sum(samples, "lakelog_bytes_out_total") > 0, zone

    assert all(b.alive() for b in brokers), [b.exit_codes for b in brokers]
