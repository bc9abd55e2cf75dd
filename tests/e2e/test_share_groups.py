"""Share groups (KIP-932) with confluent-kafka's ShareConsumer against a real broker.

- four consumers share a one-partition topic and together receive every record;
- a released record, and one held past its lock, goes to another consumer with a higher
  delivery count; after share.delivery.count.limit deliveries it is archived;
- a consumer killed while holding records loses them to the others within the lock
  duration;
- share-partition state survives a broker restart and a move to another broker;
- read_committed share consumers never see aborted records;
- a record cap (max.poll.records) stops acquisition only where a producer batch starts:
  a 20-record batch is acquired whole by a consumer that asks for 5, as Kafka does.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path

import pytest
from cluster_support import metric_sum, scrape, start_cluster
from confluent_kafka import AcknowledgeType, Producer, ShareConsumer
from e2e_fixtures import BrokerFactory
from e2e_harness import create_topic, wait_until
from group_clients import unique
from share_clients import (
    RELEASE,
    SHARE_ENV,
    ShareReader,
    WireShareMember,
    produce_values,
    set_group_configs,
    topic_id_of,
    wire_share_fetch,
)

pytestmark = pytest.mark.timeout(300)
TIMEOUT_S = 90.0
EARLIEST = {"share.auto.offset.reset": "earliest"}


def _values(n: int, tag: str) -> list[bytes]:
    return [f"{tag}-{i}".encode() for i in range(n)]


def _stop(readers: list[ShareReader]) -> None:
    for r in readers:
        r.stop()


def _all_values(readers: list[ShareReader]) -> list[bytes]:
    return [v for r in readers for v in r.values()]


def test_four_consumers_share_one_partition(broker_factory: BrokerFactory) -> None:
    broker = broker_factory(SHARE_ENV)
    topic, group = unique("share4"), unique("g")
    create_topic(broker.bootstrap, topic, partitions=1)
    set_group_configs(broker.bootstrap, group, EARLIEST)
    readers = [
        ShareReader(broker.bootstrap, group, topic, name=f"c{i}", pause_s=0.05).start()
        for i in range(4)
    ]
    try:
        expected: list[bytes] = []
        for round_ in range(10):  # several rounds, so every consumer is polling
            values = _values(100, f"r{round_}")
            produce_values(broker.bootstrap, topic, values)
            expected += values
        wait_until(
            lambda: set(expected) <= set(_all_values(readers)), TIMEOUT_S, "every record shared"
        )
    finally:
        _stop(readers)
    counts = {r.name: len(r.values()) for r in readers}
    assert set(_all_values(readers)) == set(expected), counts
    assert sum(1 for c in counts.values() if c) >= 2, counts
    firsts = Counter(g.value for r in readers for g in r.snapshot() if g.delivery_count == 1)
    assert max(firsts.values()) == 1  # a record's first delivery goes to one consumer only
    assert not [e for r in readers for e in r.errors], [r.errors for r in readers]


def test_released_record_goes_to_another_consumer_then_is_archived(
    broker_factory: BrokerFactory,
) -> None:
    """The releaser releases every record it gets; the others accept theirs. Record
    `poison` is released by whoever gets it: after 3 deliveries it is archived. The
    broker's metrics count what happened."""
    broker = broker_factory(SHARE_ENV, metrics=True)
    topic, group = unique("share-rel"), unique("g")
    create_topic(broker.bootstrap, topic, partitions=1)
    set_group_configs(broker.bootstrap, group, EARLIEST)

    def release_all(reader: ShareReader, message: object) -> int:
        return int(RELEASE)

    def accept_but_poison(reader: ShareReader, message: object) -> int:
        return int(RELEASE) if message.value() == b"poison" else 1  # type: ignore[attr-defined]

    produce_values(broker.bootstrap, topic, [*_values(20, "a"), b"poison"])
    releaser = ShareReader(
        broker.bootstrap, group, topic, "releaser", release_all, max_polls=1
    ).start()
    acceptor = ShareReader(broker.bootstrap, group, topic, "acceptor", accept_but_poison)
    try:
        wait_until(releaser.done, TIMEOUT_S, "the releaser released one poll's records")
        released = set(releaser.values())
        assert released
        acceptor.start()
        wait_until(
            lambda: set(_values(20, "a")) <= set(acceptor.values()), TIMEOUT_S, "redelivered"
        )
        wait_until(
            lambda: (
                sum(g.value == b"poison" for r in (releaser, acceptor) for g in r.snapshot()) >= 3
            ),
            TIMEOUT_S,
            "poison delivered three times",
        )
        time.sleep(3)  # time for a wrong 4th delivery to show up
    finally:
        _stop([releaser, acceptor])
    again = [g for g in acceptor.snapshot() if g.value in released and g.value != b"poison"]
    assert again and {g.delivery_count for g in again} == {2}, again
    firsts = [g for g in acceptor.snapshot() if g.value not in released]
    assert all(g.delivery_count == 1 for g in firsts if g.value != b"poison"), firsts
    poison = sorted(
        g.delivery_count for r in (releaser, acceptor) for g in r.snapshot() if g.value == b"poison"
    )
    assert poison == [1, 2, 3], poison
    assert broker.metrics_port is not None
    samples = scrape(broker.metrics_port)
    assert metric_sum(samples, "lakelog_share_delivery_limit_archived_total", group=group) == 1
    events = {
        kind: metric_sum(samples, "lakelog_share_records_total", group=group, event=kind)
        for kind in ("acquired", "acknowledged", "released")
    }
    assert events["acquired"] == len(releaser.got) + len(acceptor.got), events
    assert events["acknowledged"] == 20 and events["released"] >= 3, events
    assert metric_sum(samples, "lakelog_share_partition_records", group=group, kind="lag") == 0
    in_flight = "lakelog_share_partition_records"
    assert metric_sum(samples, in_flight, group=group, kind="in_flight") == 0


def test_record_held_past_its_lock_is_redelivered(broker_factory: BrokerFactory) -> None:
    """A member acquires records with one ShareFetch and never acknowledges them: once
    the 4 s lock ends they go to a ShareConsumer with delivery count 2."""
    broker = broker_factory(SHARE_ENV)
    topic, group = unique("share-lock"), unique("g")
    create_topic(broker.bootstrap, topic, partitions=1)
    set_group_configs(broker.bootstrap, group, EARLIEST)
    values = _values(50, "h")
    produce_values(broker.bootstrap, topic, values)
    held = wire_share_fetch(broker.port, group, "holder", topic_id_of(broker.bootstrap, topic), 20)
    acquired_at = time.time()
    assert held and held[0][0] == 0 and all(count == 1 for _, _, count in held), held
    held_offsets = {o for first, last, _ in held for o in range(first, last + 1)}
    other = ShareReader(broker.bootstrap, group, topic, "other").start()
    try:
        wait_until(lambda: set(values) <= set(other.values()), TIMEOUT_S, "all to the other")
    finally:
        other.stop()
    got = other.snapshot()
    again = [g for g in got if g.offset in held_offsets]
    assert len(again) == len(held_offsets) and {g.delivery_count for g in again} == {2}, again
    assert all(g.delivery_count == 1 for g in got if g.offset not in held_offsets)
    assert min(g.at for g in again) - acquired_at > 3.0  # not before the lock ended


KILLED_READER = """
import sys, time
from confluent_kafka import ShareConsumer
c = ShareConsumer({"bootstrap.servers": sys.argv[1], "group.id": sys.argv[2]})
c.subscribe([sys.argv[3]])
while True:
    got = [m for m in c.poll(1.0) if m.error() is None]
    if got:
        print(len(got), flush=True)
        time.sleep(3600)
"""


def test_killed_consumer_loses_its_records_within_the_lock(
    broker_factory: BrokerFactory, tmp_path: Path
) -> None:
    broker = broker_factory(SHARE_ENV)
    topic, group = unique("share-kill"), unique("g")
    create_topic(broker.bootstrap, topic, partitions=1)
    set_group_configs(broker.bootstrap, group, EARLIEST)
    values = _values(200, "k")
    produce_values(broker.bootstrap, topic, values)
    script = tmp_path / "victim.py"
    script.write_text(KILLED_READER)
    victim = subprocess.Popen(
        [sys.executable, str(script), broker.bootstrap, group, topic],
        stdout=subprocess.PIPE,
        env={**os.environ},
        text=True,
    )
    readers: list[ShareReader] = []
    try:
        assert victim.stdout is not None
        line = victim.stdout.readline()
        assert int(line) > 0
        os.kill(victim.pid, signal.SIGKILL)
        killed_at = time.time()
        readers = [
            ShareReader(broker.bootstrap, group, topic, name=f"s{i}").start() for i in range(3)
        ]
        wait_until(lambda: set(values) <= set(_all_values(readers)), TIMEOUT_S, "taken over")
        # The 4 s lock, plus polling and start-up slack on a busy machine.
        assert time.time() - killed_at < 4 + 30
        counts = Counter(g.delivery_count for r in readers for g in r.snapshot())
        assert counts[2] >= int(line), counts
    finally:
        victim.kill()
        victim.wait()
        _stop(readers)


def test_state_survives_restart_and_move(broker_factory: BrokerFactory, tmp_path: Path) -> None:
    """Accepted records stay accepted across a restart and on another broker: a later
    consumer gets exactly the rest, nothing twice."""
    data = tmp_path / "shared-data"
    first = broker_factory(SHARE_ENV, data_dir=data)
    topic, group = unique("share-move"), unique("g")
    create_topic(first.bootstrap, topic, partitions=1)
    set_group_configs(first.bootstrap, group, EARLIEST)
    produce_values(first.bootstrap, topic, _values(100, "one"))
    reader = ShareReader(first.bootstrap, group, topic, "before").start()
    wait_until(lambda: len(set(reader.values())) >= 100, TIMEOUT_S, "first half")
    reader.stop()  # commit_sync + close: everything accepted
    assert set(reader.values()) == set(_values(100, "one"))

    first.restart()
    produce_values(first.bootstrap, topic, _values(50, "two"))
    after_restart = ShareReader(first.bootstrap, group, topic, "after-restart").start()
    wait_until(lambda: len(after_restart.values()) >= 50, TIMEOUT_S, "after restart")
    after_restart.stop()
    assert set(after_restart.values()) == set(_values(50, "two")), after_restart.values()

    first.terminate()
    second = broker_factory(SHARE_ENV, data_dir=data)  # another broker id, same cluster data
    produce_values(second.bootstrap, topic, _values(50, "three"))
    moved = ShareReader(second.bootstrap, group, topic, "moved").start()
    wait_until(lambda: len(moved.values()) >= 50, TIMEOUT_S, "on another broker")
    time.sleep(2)
    moved.stop()
    assert sorted(moved.values()) == sorted(_values(50, "three"))


def test_read_committed_share_consumer_skips_aborted(broker_factory: BrokerFactory) -> None:
    broker = broker_factory(SHARE_ENV)
    topic, group = unique("share-rc"), unique("g")
    create_topic(broker.bootstrap, topic, partitions=1)
    set_group_configs(
        broker.bootstrap, group, {**EARLIEST, "share.isolation.level": "read_committed"}
    )
    producer = Producer(
        {"bootstrap.servers": broker.bootstrap, "transactional.id": unique("tx"), "linger.ms": 5}
    )
    producer.init_transactions(30)
    committed: list[bytes] = []
    for i in range(6):
        producer.begin_transaction()
        values = _values(10, f"t{i}")
        for v in values:
            producer.produce(topic, value=v, partition=0)
        producer.flush(30)
        if i % 2:
            producer.abort_transaction(30)
        else:
            producer.commit_transaction(30)
            committed += values
    reader = ShareReader(broker.bootstrap, group, topic, "rc").start()
    try:
        wait_until(lambda: set(committed) <= set(reader.values()), TIMEOUT_S, "committed")
        time.sleep(2)
    finally:
        reader.stop()
    assert sorted(reader.values()) == sorted(committed)


def test_two_brokers_serve_one_share_partition_at_once(
    broker_factory: BrokerFactory, tmp_path: Path
) -> None:
    """Leaderless: members fetch the same share partition through two brokers at the
    same time. Compare-and-set on the stored state means no record is ever handed out
    twice while it is locked: every offset is delivered exactly once, with count 1."""
    brokers = start_cluster(broker_factory, tmp_path / "cluster", [None, None], SHARE_ENV)
    topic, group = unique("share-two"), unique("g")
    create_topic(brokers[0].bootstrap, topic, partitions=1)
    # Locks that outlive any stall of a busy machine: "delivered once" must not hinge on
    # a member's next fetch coming within SHARE_ENV's 4 s.
    set_group_configs(
        brokers[0].bootstrap, group, {**EARLIEST, "share.record.lock.duration.ms": "30000"}
    )
    total = 3000
    # Small producer batches (at most 20 records): a share fetch acquires whole batches, so
    # with a few big ones the first members to fetch could take them all.
    for i in range(6):
        produce_values(
            brokers[i % 2].bootstrap,
            topic,
            _values(total // 6, f"p{i}"),
            **{"batch.num.messages": 20},
        )
    topic_id = topic_id_of(brokers[0].bootstrap, topic)
    got: dict[str, list[tuple[int, int, int]]] = {}
    errors: list[BaseException] = []

    def member(name: str, port: int) -> None:
        client = WireShareMember(port, group, name, topic_id)
        seen = got.setdefault(name, [])
        try:
            quiet = 0
            while quiet < 10:
                acquired = client.fetch(40)
                seen.extend(acquired)
                quiet = 0 if acquired else quiet + 1
        except BaseException as exc:
            errors.append(exc)
        finally:
            client.close()

    threads = [
        threading.Thread(target=member, args=(f"m{i}", brokers[i % 2].port)) for i in range(4)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join(TIMEOUT_S)
    assert not errors, errors
    offsets = Counter(
        o for ranges in got.values() for first, last, _ in ranges for o in range(first, last + 1)
    )
    assert sorted(offsets) == list(range(total)), (len(offsets), total)
    assert set(offsets.values()) == {1}, [o for o, n in offsets.items() if n > 1][:20]
    assert {c for ranges in got.values() for _, _, c in ranges} == {1}
    by_broker = [sum(len(got[f"m{i}"]) for i in range(b, 4, 2)) for b in (0, 1)]
    assert all(by_broker), by_broker


def test_consumer_keeps_consuming_across_a_restart(broker_factory: BrokerFactory) -> None:
    """The broker's share sessions die with it: a running ShareConsumer starts a new one
    (SHARE_SESSION_NOT_FOUND), rejoins the group and gets every record."""
    broker = broker_factory(SHARE_ENV)
    topic, group = unique("share-live"), unique("g")
    create_topic(broker.bootstrap, topic, partitions=1)
    set_group_configs(broker.bootstrap, group, EARLIEST)
    produce_values(broker.bootstrap, topic, _values(50, "a"))
    reader = ShareReader(broker.bootstrap, group, topic, "survivor").start()
    try:
        wait_until(lambda: len(reader.values()) >= 50, TIMEOUT_S, "before the restart")
        time.sleep(1)  # its implicit acknowledgements go out with the next poll
        broker.restart()
        produce_values(broker.bootstrap, topic, _values(50, "b"))
        wait_until(lambda: len(set(reader.values())) >= 100, TIMEOUT_S, "after the restart")
    finally:
        reader.stop()
    assert sorted(set(reader.values())) == sorted(_values(50, "a") + _values(50, "b"))


def test_a_record_cap_acquires_whole_producer_batches(broker_factory: BrokerFactory) -> None:
    """Kafka 4.x acquires by batch: the cap (librdkafka's max.poll.records, sent as the
    ShareFetch's MaxRecords) is soft and stops only at a batch boundary, so one poll
    hands out the whole 20-record batch, each record delivered once."""
    broker = broker_factory(SHARE_ENV)
    topic, group = unique("share-cap"), unique("g")
    create_topic(broker.bootstrap, topic, partitions=1)
    set_group_configs(broker.bootstrap, group, EARLIEST)
    values = _values(20, "batch")
    # One producer batch: everything is queued before the linger ends, flush sends it.
    produce_values(broker.bootstrap, topic, values, **{"linger.ms": 1000})
    consumer = ShareConsumer(
        {
            "bootstrap.servers": broker.bootstrap,
            "group.id": group,
            "max.poll.records": 5,
            "share.acknowledgement.mode": "explicit",
        }
    )
    consumer.subscribe([topic])
    try:
        first: list = []

        def polled() -> bool:
            first.extend(m for m in consumer.poll(0.5) if m.error() is None)
            return bool(first)

        wait_until(polled, TIMEOUT_S, "the first records")
        got = [(m.offset(), m.value(), m.delivery_count()) for m in first]
        assert got == [(i, v, 1) for i, v in enumerate(values)]
        for m in first:
            consumer.acknowledge(m, AcknowledgeType.ACCEPT)
        consumer.commit_sync(30)
    finally:
        consumer.close()
