"""`lakelog cost` against a real broker while confluent-kafka produces at a steady rate:
the projected bill must follow from the bytes actually produced."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer
from e2e_fixtures import BrokerFactory
from e2e_harness import BrokerProcess, create_topic, wait_until

from lakelog.cli.cost_model import GB, MONTH_SECONDS

LAKELOG = Path(sys.executable).with_name("lakelog")
VALUE = b"x" * 1000
PER_TICK = 4
TICK_S = 0.01
"""About 400 KB/s of record values: steady enough that a 2 s window sees the mean rate."""


def _cost_command() -> list[str]:
    """`lakelog cost` once cli.py mounts it; the module itself until then."""
    from lakelog.cli.main import app

    if any(g.name == "cost" for g in app.registered_groups):
        return [str(LAKELOG), "cost"]
    return [sys.executable, "-m", "lakelog.cli.cost"]


def _run_cost(*args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("LAKELOG_")}
    env["COLUMNS"] = "200"  # rich wraps table cells at 80 columns when not on a terminal
    return subprocess.run(
        [*_cost_command(), *args], capture_output=True, text=True, env=env, timeout=60, check=False
    )


class Traffic:
    """A producer in zone a and a tailing consumer in zone b, on background threads."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        self.stop = threading.Event()
        self.delivered = 0
        self.consumed = 0
        self.samples: list[tuple[float, int]] = []
        self.errors: list[str] = []
        self._threads = [
            threading.Thread(target=self._produce, args=(bootstrap, topic)),
            threading.Thread(target=self._consume, args=(bootstrap, topic)),
        ]

    def __enter__(self) -> Traffic:
        for thread in self._threads:
            thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        for thread in self._threads:
            thread.join(30)

    def rate_between(self, start: float, end: float) -> float:
        """Value bytes acknowledged per second between two monotonic times."""
        inside = [(t, n) for t, n in self.samples if start <= t <= end]
        (t0, n0), (t1, n1) = inside[0], inside[-1]
        return (n1 - n0) / (t1 - t0)

    def _on_delivery(self, err: Any, msg: Any) -> None:
        if err is not None:
            self.errors.append(str(err))
        else:
            self.delivered += len(msg.value())

    def _produce(self, bootstrap: str, topic: str) -> None:
        producer = Producer(
            {
                "bootstrap.servers": bootstrap,
                "client.id": "lakelog_az=a",
                "linger.ms": 5,
                "acks": "all",
            }
        )
        while not self.stop.is_set():
            for _ in range(PER_TICK):
                producer.produce(topic, VALUE, on_delivery=self._on_delivery)
            producer.poll(0)
            self.samples.append((time.monotonic(), self.delivered))
            time.sleep(TICK_S)
        producer.flush(30)

    def _consume(self, bootstrap: str, topic: str) -> None:
        consumer = Consumer(
            {
                "bootstrap.servers": bootstrap,
                "client.id": "lakelog_az=b",
                "group.id": f"{topic}-cost",
                "auto.offset.reset": "earliest",
                "enable.auto.commit": False,
            }
        )
        consumer.subscribe([topic])
        while not self.stop.is_set():
            for message in consumer.consume(500, 0.1):
                if not message.error():
                    self.consumed += len(message.value())
        consumer.close()


@pytest.fixture
def zoned_broker(broker_factory: BrokerFactory, topic_name: str) -> Iterator[BrokerProcess]:
    # The object path: the window test prices PUTs and the bytes in WAL objects, which a
    # light load would otherwise keep inline in the coordinator for a while.
    broker = broker_factory({"RACK": "b", "PRODUCE_INLINE": False}, metrics=True)
    create_topic(broker.bootstrap, topic_name, 3)
    yield broker


def test_cost_over_a_window_follows_the_bytes_produced(
    zoned_broker: BrokerProcess,
    topic_name: str,
) -> None:
    url = f"http://127.0.0.1:{zoned_broker.metrics_port}/metrics"
    with Traffic(zoned_broker.bootstrap, topic_name) as traffic:
        wait_until(
            lambda: traffic.delivered > 200_000 and traffic.consumed > 0,
            30,
            "steady produce and consume",
        )
        started = time.monotonic()
        run = _run_cost("--metrics", url, "--window-seconds", "2", "--json")
        ended = time.monotonic()
        produced_rate = traffic.rate_between(started, ended)
    assert run.returncode == 0, run.stderr
    assert not traffic.errors
    report = json.loads(run.stdout)
    rates = report["rates_per_second"]
    assert report["mode"] == "window" and report["brokers"] == [url]
    assert 1.9 <= report["observed_seconds"][url] <= 5
    assert report["get_ranges_counted"] == "per_call"

    # bytes_in counts record batches: the values plus a little framing per record/batch.
    assert 0.5 * produced_rate <= rates["bytes_in"] <= 2.0 * produced_rate, (rates, produced_rate)
    assert rates["put_class_requests"] > 0
    assert rates["object_put_bytes"] >= 0.5 * rates["bytes_in"]  # WAL objects hold them
    assert rates["bytes_out"] > 0
    # Producers in zone a, broker in zone b: every produced byte crossed; consumers did not.
    assert rates["cross_zone_bytes"] == pytest.approx(rates["bytes_in"])
    assert rates["unknown_zone_bytes"] == 0

    items = {i["key"]: i for i in report["lakelog"]["items"]}
    assert all(items[k]["usd"] > 0 for k in ("put_list_requests", "storage", "cross_zone"))
    assert items["put_list_requests"]["usd"] == pytest.approx(
        rates["put_class_requests"] * MONTH_SECONDS / 1000 * 0.005
    )
    assert items["storage"]["quantity"] == pytest.approx(
        rates["object_put_bytes"] * 7 * 86_400 / GB
    )
    assert items["cross_zone"]["usd"] == pytest.approx(
        rates["bytes_in"] * MONTH_SECONDS / GB * 0.02
    )
    assert report["lakelog"]["total_usd"] == pytest.approx(sum(i["usd"] for i in items.values()))
    classic = {i["key"]: i for i in report["classic_kafka_rf3"]["items"]}
    assert classic["replication"]["usd"] == pytest.approx(
        2 * rates["bytes_in"] * MONTH_SECONDS / GB * 0.02
    )
    assert classic["consume_cross_zone"]["usd"] > 0
    # Kafka's three replicas of 7 days on gp3, the same steady state as Lakelog's storage.
    assert classic["replica_storage"]["quantity"] == pytest.approx(
        3 * rates["bytes_in"] * 7 * 86_400 / GB
    )
    assert classic["replica_storage"]["unit_price"] == pytest.approx(0.08)


def test_cost_since_start_and_table_output(
    zoned_broker: BrokerProcess,
    topic_name: str,
    tmp_path: Path,
) -> None:
    url = f"http://127.0.0.1:{zoned_broker.metrics_port}/metrics"
    producer = Producer({"bootstrap.servers": zoned_broker.bootstrap, "linger.ms": 5})
    for _ in range(500):
        producer.produce(topic_name, VALUE)
    assert producer.flush(30) == 0

    run = _run_cost("--metrics", url, "--since-start", "--uptime-seconds", "100", "--json")
    assert run.returncode == 0, run.stderr
    report = json.loads(run.stdout)
    assert report["mode"] == "since_start"
    total_in = report["rates_per_second"]["bytes_in"] * 100
    assert 500 * len(VALUE) <= total_in <= 1.2 * 500 * len(VALUE)
    # No zone on the producer: its bytes are unknown-zone traffic, noted, not priced.
    assert report["rates_per_second"]["unknown_zone_bytes"] == pytest.approx(
        report["rates_per_second"]["bytes_in"]
    )
    assert any("no known zone" in note for note in report["notes"])

    derived = _run_cost("--metrics", url, "--since-start", "--json")
    assert derived.returncode == 0, derived.stderr
    assert 0 < json.loads(derived.stdout)["observed_seconds"][url] < 300

    prices = tmp_path / "prices.toml"
    prices.write_text("storage_per_gb_month = 0.0\n")
    table = _run_cost(
        "--metrics",
        url,
        "--since-start",
        "--uptime-seconds",
        "100",
        "--prices",
        str(prices),
        "--retention-days",
        "30",
    )
    assert table.returncode == 0, table.stderr
    for text in (
        "Lakelog, projected 30-day month",
        "Classic Kafka",
        "Storage (30 days",
        "$0.005 / 1,000 req",
        "$0 / GB-month",
        "Total",
        "Disks (3 replicas, 30 days kept)",
        "Monthly total: Lakelog $",
    ):
        assert text in table.stdout, table.stdout
