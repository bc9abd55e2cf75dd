"""The small-write path (issue 32) under SIGKILL: inline files survive a broker killed
between their commit and their move, and a broker killed between the move's PUT and its
swap; another broker serves them meanwhile; at the end every batch lives in an ordinary
object, the log is exactly what the producers were told (nothing lost, duplicated or
reordered; read_committed sees committed transactions only) and nothing is orphaned once
GC's orphan pass has run.

Runs on the embedded backend and, with LAKELOG_TEST_BACKEND=scaleout, on PostgreSQL + S3.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass, field

import pytest
from cluster_support import (
    CLUSTER_ENV,
    assert_dense,
    high_watermarks,
    metadata_brokers,
    metadata_view,
    read_log,
    start_cluster,
)
from e2e_fixtures import BrokerFactory
from e2e_harness import BrokerProcess, create_topic, wait_until

from lakelog.coordinator import open_coordinator

PARTITIONS = 3
INLINE_ENV: dict[str, object] = {
    **CLUSTER_ENV,
    "PRODUCE_INLINE": True,
    "PRODUCE_INLINE_MOVE_AGE_MS": 3_600_000,  # no move until a test asks for one
    "FILE_DELETE_GRACE_MS": 300,
    "RETENTION_CHECK_INTERVAL_MS": 200,
}
MOVE_NOW = {"PRODUCE_INLINE_MOVE_AGE_MS": 500}


@dataclass
class Acks:
    """What the producer was told: value -> (partition, offset), and the aborted values."""

    at: dict[bytes, tuple[int, int]] = field(default_factory=dict)
    aborted: set[bytes] = field(default_factory=set)
    errors: list[str] = field(default_factory=list)

    def callback(self, err: object, msg: object) -> None:
        if err is not None:
            self.errors.append(str(err))
        else:
            self.at[msg.value()] = (msg.partition(), msg.offset())  # type: ignore[attr-defined]


def produce_idempotent(bootstrap: str, topic: str, count: int, tag: str) -> Acks:
    from confluent_kafka import Producer

    acks = Acks()
    producer = Producer(
        {"bootstrap.servers": bootstrap, "enable.idempotence": True, "linger.ms": 2}
    )
    for i in range(count):
        producer.produce(
            topic, f"{tag}-{i}".encode(), partition=i % PARTITIONS, on_delivery=acks.callback
        )
        producer.poll(0)
        if i % 10 == 9:
            producer.flush(30)  # a light load: many small WAL buffers
    assert producer.flush(60) == 0
    return acks


def produce_transactions(bootstrap: str, topic: str, count: int, tag: str) -> Acks:
    """Transactions of 10 records; every fourth is aborted, the last is committed."""
    from confluent_kafka import Producer

    acks = Acks()
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "transactional.id": f"inline-{uuid.uuid4().hex}",
            "linger.ms": 2,
        }
    )
    producer.init_transactions(30)
    for t in range(count // 10):
        producer.begin_transaction()
        values = [f"{tag}-{t}-{i}".encode() for i in range(10)]
        for i, value in enumerate(values):
            producer.produce(topic, value, partition=i % PARTITIONS, on_delivery=acks.callback)
        producer.flush(30)
        if t % 4 == 3 and t != count // 10 - 1:
            producer.abort_transaction(30)
            acks.aborted.update(values)
        else:
            producer.commit_transaction(30)
    return acks


async def _inspect(coordinator_url: str) -> tuple[int, int, set[str]]:
    """(inline files holding batches, inline file rows in any state, every file key)."""
    coordinator = open_coordinator(coordinator_url)
    await coordinator.start()
    try:
        live = await coordinator.inline_files()
        usage = await coordinator.inline_usage(0)
        return len(live), usage.files, set(await coordinator.list_files())
    finally:
        await coordinator.close()


def inspect(broker: BrokerProcess) -> tuple[int, int, set[str]]:
    return asyncio.run(_inspect(broker.backend.coordinator_url))


def read_committed_values(bootstrap: str, topic: str, expected: set[bytes]) -> list[bytes]:
    """Every value a read_committed consumer sees, in (partition, offset) order, read until
    all of `expected` arrived (the last transaction is committed, so by then every aborted
    record lies behind the consumer)."""
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"rc-{uuid.uuid4().hex}",
            "isolation.level": "read_committed",
            "enable.auto.commit": False,
            "fetch.wait.max.ms": 100,
        }
    )
    seen: list[tuple[int, int, bytes]] = []
    try:
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(PARTITIONS)])
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline and not expected <= {v for _, _, v in seen}:
            for m in consumer.consume(num_messages=1000, timeout=0.5):
                assert m.error() is None, m.error()
                seen.append((m.partition(), m.offset(), m.value()))
    finally:
        consumer.close()
    return [v for _, _, v in sorted(seen)]


def check_log(bootstrap: str, topic: str, acks: Acks, transactional: bool) -> None:
    assert not acks.errors, acks.errors[:5]
    committed = {v for v in acks.at if v not in acks.aborted}
    if transactional:
        values = read_committed_values(bootstrap, topic, committed)
        assert len(values) == len(set(values)), "a record was read twice"
        assert set(values) == committed, (
            f"missing {sorted(committed - set(values))[:5]}, "
            f"unexpected {sorted(set(values) - committed)[:5]}"
        )
        # Offsets as acknowledged: each partition's values in the order of their offsets.
        for p in range(PARTITIONS):
            got = [v for v in values if acks.at[v][0] == p]
            assert got == sorted(got, key=lambda v: acks.at[v][1])
        return
    high = high_watermarks(bootstrap, "inline-check", topic, PARTITIONS)
    log = read_log(bootstrap, "inline-check", topic, high)
    assert_dense(log, high)
    stored = {(p, o): v for p, records in log.items() for o, v in records}
    assert len(set(stored.values())) == len(stored), "a record is stored twice"
    for value, where in acks.at.items():
        assert stored.get(where) == value, (
            f"acked {value!r} at {where}, log has {stored.get(where)!r}"
        )
    assert len(stored) == len(acks.at)


def run_gc(broker: BrokerProcess) -> None:
    backend = broker.backend
    subprocess.run(
        [
            sys.executable,
            "-m",
            "lakelog",
            "pipeline",
            "gc",
            "--storage-url",
            backend.storage_url,
            "--coordinator-url",
            backend.coordinator_url,
            "--orphan-grace-ms",
            "0",
        ],
        check=True,
        capture_output=True,
        timeout=600,
    )


def leaders(broker: BrokerProcess, topic: str) -> set[int]:
    return set(metadata_view(broker.bootstrap, "probe", topic).leaders.values())


def store_keys(broker: BrokerProcess) -> set[str]:
    return broker.backend.list_keys("wal") | broker.backend.list_keys("seg")


@pytest.mark.timeout(600)
@pytest.mark.parametrize("producer", ["idempotent", "transactional"])
def test_inline_files_survive_sigkill_before_and_during_their_move(
    broker_factory: BrokerFactory, tmp_path, topic_name: str, producer: str
) -> None:
    transactional = producer == "transactional"
    produce = produce_transactions if transactional else produce_idempotent
    b1, b2 = start_cluster(broker_factory, tmp_path / "cluster", [None, None], INLINE_ENV)
    create_topic(b1.bootstrap, topic_name, PARTITIONS)

    acks = produce(f"{b1.bootstrap},{b2.bootstrap}", topic_name, 120, "a")
    live, _, _ = inspect(b1)
    assert live > 0, "nothing was committed inline"
    assert store_keys(b1) == set(), "a light load PUT objects"

    # 1. Killed between inline commits and their move: the other broker serves them.
    b1.kill()
    wait_until(lambda: leaders(b2, topic_name) == {2}, 30, "b2 to lead every partition")
    check_log(b2.bootstrap, topic_name, acks, transactional)
    assert inspect(b2)[0] == live  # still inline: read from the coordinator

    # 2. Killed between the move's PUT and its swap.
    b1.env.update({**MOVE_NOW, "FAULT_INLINE_MOVE_DELAY_MS": 120_000})
    b1.start()
    wait_until(lambda: store_keys(b1) - inspect(b1)[2], 60, "the move's PUT")
    b1.kill()
    assert inspect(b2)[0] == live, "the swap happened although the mover was killed before it"

    # 3. Restarted: the move finishes (b1's own files, and b2's once abandoned-old), more
    # writes arrive meanwhile, and the emptied inline files are deleted.
    del b1.env["FAULT_INLINE_MOVE_DELAY_MS"]
    b1.start()
    wait_until(lambda: metadata_brokers(b2.bootstrap, "probe") >= {1, 2}, 30, "b1 back")
    more = produce(f"{b1.bootstrap},{b2.bootstrap}", topic_name, 60, "b")
    acks.at.update(more.at)
    acks.aborted |= more.aborted
    acks.errors += more.errors
    wait_until(lambda: inspect(b1)[1] == 0, 90, "every inline file moved and deleted")
    check_log(b2.bootstrap, topic_name, acks, transactional)
    check_log(b1.bootstrap, topic_name, acks, transactional)

    # 4. Nothing orphaned once GC's orphan pass ran: the killed move's object is the only
    # object no file row names, and GC removes it; every file row names a stored object.
    _, _, known = inspect(b1)
    orphans = store_keys(b1) - known
    assert len(orphans) == 1, orphans
    run_gc(b1)
    _, inline_rows, known = inspect(b1)
    assert inline_rows == 0
    assert store_keys(b1) == known, store_keys(b1) ^ known
    check_log(b2.bootstrap, topic_name, acks, transactional)
