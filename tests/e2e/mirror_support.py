"""Helpers for the mirroring tests: two Lakelog clusters (separate data dirs and
coordinators), the `lakelog mirror` command, and reading whole partitions with offsets."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from confluent_kafka import Consumer, KafkaException, TopicPartition
from e2e_fixtures import BrokerFactory
from e2e_harness import BrokerProcess, wait_until

FAST_MIRROR = {
    "MIRROR_LEASE_RENEW_MS": 300,
    "MIRROR_METADATA_REFRESH_INTERVAL_MS": 1000,
    "MIRROR_GROUP_SYNC_INTERVAL_MS": 500,
    "MIRROR_STATE_REPORT_INTERVAL_MS": 300,
    "MIRROR_FETCH_MAX_WAIT_MS": 100,
}
"""Short mirror intervals, so tests see state changes within a second."""

Record = tuple[bytes | None, bytes | None]
Log = dict[tuple[int, int], Record]
"""(partition, offset) -> (key, value)."""


@dataclass
class Clusters:
    source: BrokerProcess
    dest: BrokerProcess


def two_clusters(
    broker_factory: BrokerFactory,
    dest_env: Mapping[str, object] | None = None,
    source_env: Mapping[str, object] | None = None,
) -> Clusters:
    quick = {"GROUP_INITIAL_REBALANCE_DELAY_MS": 100}
    source = broker_factory({**quick, **(source_env or {})})
    dest = broker_factory({**quick, **FAST_MIRROR, **(dest_env or {})}, metrics=True)
    return Clusters(source, dest)


def mirror_cli(
    dest: BrokerProcess, *args: str, check: bool = True, timeout: float = 120.0
) -> subprocess.CompletedProcess[str]:
    """`lakelog mirror -b DEST ARGS...` in a child process, as an operator runs it."""
    done = subprocess.run(
        [sys.executable, "-m", "lakelog", "mirror", "-b", dest.bootstrap, *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, "COLUMNS": "250"},
    )
    if check and done.returncode != 0:
        raise AssertionError(
            f"lakelog mirror {' '.join(args)} exited {done.returncode}\n"
            f"stdout:\n{done.stdout}\nstderr:\n{done.stderr}"
        )
    return done


def describe(dest: BrokerProcess, name: str) -> list[dict[str, Any]]:
    out = mirror_cli(dest, "describe", name, "--json").stdout
    return list(json.loads(out)["partitions"])


def wait_states(
    dest: BrokerProcess, name: str, topic: str, want: Mapping[int, str], timeout: float = 30.0
) -> dict[int, dict[str, Any]]:
    def check() -> dict[int, dict[str, Any]] | None:
        rows = {p["partition"]: p for p in describe(dest, name) if p["topic"] == topic}
        if all(rows.get(p, {}).get("state") == s for p, s in want.items()):
            return rows
        return None

    return wait_until(check, timeout, f"mirror {name} states {dict(want)}", interval=0.3)


def end_offsets(
    bootstrap: str, topic: str, partitions: int, committed: bool = False
) -> dict[int, int]:
    consumer = _consumer(bootstrap, committed)
    try:
        return {
            p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1]
            for p in range(partitions)
        }
    finally:
        consumer.close()


def wait_caught_up(
    source: BrokerProcess, dest: BrokerProcess, topic: str, partitions: int, timeout: float = 60.0
) -> dict[int, int]:
    """Until the destination's log end equals the source's last stable offset everywhere."""
    want = end_offsets(source.bootstrap, topic, partitions, committed=True)

    def check() -> dict[int, int] | None:
        got = end_offsets(dest.bootstrap, topic, partitions)
        return got if got == want else None

    return wait_until(check, timeout, f"{topic} mirrored up to {want}", interval=0.3)


def read_log(
    bootstrap: str, topic: str, partitions: int, committed: bool = False, idle_s: float = 0.3
) -> Log:
    """Every record a consumer of this isolation level gets, by (partition, offset)."""
    consumer = _consumer(bootstrap, committed)
    ends = {
        p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1]
        for p in range(partitions)
    }
    consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    out: Log = {}
    deadline = time.monotonic() + 60
    quiet_since = time.monotonic()
    try:
        while time.monotonic() < deadline:
            batch = consumer.consume(1000, timeout=0.2)
            for m in batch:
                if m.error() is not None:
                    raise KafkaException(m.error())
                out[(m.partition(), m.offset())] = (m.key(), m.value())
            if batch:
                quiet_since = time.monotonic()
            positions = {tp.partition: tp.offset for tp in consumer.position(consumer.assignment())}
            done = all(positions.get(p, 0) >= ends[p] for p in range(partitions) if ends[p] > 0)
            if (done or not any(ends.values())) and time.monotonic() - quiet_since > idle_s:
                break
    finally:
        consumer.close()
    return out


def _consumer(bootstrap: str, committed: bool) -> Consumer:
    return Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"reader-{time.monotonic_ns()}",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "isolation.level": "read_committed" if committed else "read_uncommitted",
            "fetch.wait.max.ms": 100,
        }
    )


def produce_keyed(bootstrap: str, topic: str, count: int, partitions: int, tag: str) -> None:
    """Keyed records from an idempotent producer, spread over the partitions."""
    from confluent_kafka import Producer

    producer = Producer(
        {"bootstrap.servers": bootstrap, "enable.idempotence": True, "linger.ms": 5}
    )
    for i in range(count):
        producer.produce(
            topic, key=f"k{i % 13}".encode(), value=f"{tag}-{i}".encode(), partition=i % partitions
        )
    assert producer.flush(30) == 0


def values(log: Log, partitions: Sequence[int] | None = None) -> list[bytes]:
    return [
        v or b"" for (p, _), (_, v) in sorted(log.items()) if partitions is None or p in partitions
    ]
