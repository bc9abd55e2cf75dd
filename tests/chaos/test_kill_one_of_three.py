"""SIGKILL one broker of three under steady idempotent produce: clients move to the survivors
and no acknowledged record is lost or duplicated.

Every broker writes every partition, so the dead broker holds nothing the others need; what
can go wrong is in the seams: a batch the dead broker committed but never acknowledged must
be recognised as a duplicate when the producer retries it on a survivor (the idempotence
state lives in the shared coordinator), and the dead broker must leave Metadata after the
session timeout so clients stop waiting for it.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from cluster_support import (
    SESSION_TIMEOUT_MS,
    assert_dense,
    assert_unique_values,
    bootstrap_of,
    high_watermarks,
    metadata_view,
    read_log,
    start_cluster,
)
from e2e_fixtures import BrokerFactory
from e2e_harness import BrokerProcess, create_topic, wait_until

PARTITIONS = 6
PRODUCERS = 2
ACKS_BEFORE_KILL = 1500
ACKS_AFTER_MOVE = 1500


@dataclass
class SteadyProducer:
    """An idempotent acks=all producer writing `p<n>-<i>` ids round-robin over the
    partitions until stopped; delivery callbacks are the ground truth of what was acked."""

    n: int
    bootstrap: str
    topic: str
    acks: list[tuple[bytes, int, int, float]] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)
    sent: int = 0
    stop: threading.Event = field(default_factory=threading.Event)
    error: BaseException | None = None
    fatal: str | None = None
    unflushed: int = -1

    def __post_init__(self) -> None:
        self.thread = threading.Thread(target=self._run, name=f"producer-{self.n}", daemon=True)

    def _run(self) -> None:
        from confluent_kafka import KafkaError, Producer

        def on_error(err: KafkaError) -> None:
            if err.fatal():
                self.fatal = str(err)

        try:
            producer = Producer(
                {
                    "bootstrap.servers": self.bootstrap,
                    "client.id": f"chaos-producer-{self.n}",
                    "enable.idempotence": True,
                    "acks": "all",
                    "linger.ms": 5,
                    "message.timeout.ms": 45_000,
                    "reconnect.backoff.ms": 50,
                    "reconnect.backoff.max.ms": 500,
                    "topic.metadata.refresh.interval.ms": 1000,
                    "error_cb": on_error,
                }
            )

            def delivered(err: object, msg: object) -> None:
                if err is not None:
                    self.failures.append(str(err))
                else:
                    self.acks.append(
                        (msg.value(), msg.partition(), msg.offset(), time.monotonic())  # type: ignore[attr-defined]
                    )

            i = 0
            while not self.stop.is_set():
                try:
                    producer.produce(
                        self.topic,
                        value=f"p{self.n}-{i}".encode(),
                        partition=i % PARTITIONS,
                        on_delivery=delivered,
                    )
                    i += 1
                    self.sent = i
                except BufferError:
                    producer.poll(0.05)
                producer.poll(0)
                if i % 20 == 0:
                    time.sleep(0.01)  # a steady stream, ~1,500 records/s per producer
            self.unflushed = producer.flush(50)
        except BaseException as exc:
            self.error = exc


@dataclass
class TailingConsumer:
    """An assign()-consumer that follows the log through the kill, as a real one would."""

    bootstrap: str
    topic: str
    seen: dict[int, list[tuple[int, bytes]]] = field(
        default_factory=lambda: {p: [] for p in range(PARTITIONS)}
    )
    errors: list[str] = field(default_factory=list)
    stop: threading.Event = field(default_factory=threading.Event)
    error: BaseException | None = None

    def __post_init__(self) -> None:
        self.thread = threading.Thread(target=self._run, name="tail-consumer", daemon=True)

    def _run(self) -> None:
        from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

        try:
            consumer = Consumer(
                {
                    "bootstrap.servers": self.bootstrap,
                    "client.id": "chaos-tail",
                    "group.id": f"tail-{uuid.uuid4().hex}",
                    "enable.auto.commit": False,
                    "fetch.wait.max.ms": 100,
                    "topic.metadata.refresh.interval.ms": 1000,
                    "reconnect.backoff.ms": 50,
                    "reconnect.backoff.max.ms": 500,
                }
            )
            consumer.assign(
                [TopicPartition(self.topic, p, OFFSET_BEGINNING) for p in range(PARTITIONS)]
            )
            while not self.stop.is_set():
                for m in consumer.consume(num_messages=2000, timeout=0.2):
                    if m.error() is not None:
                        self.errors.append(str(m.error()))
                    else:
                        self.seen[m.partition()].append((m.offset(), m.value()))
            consumer.close()
        except BaseException as exc:
            self.error = exc

    def caught_up(self, high: dict[int, int]) -> bool:
        return all(len(self.seen[p]) >= high[p] for p in range(PARTITIONS))


def total_acks(producers: list[SteadyProducer]) -> int:
    return sum(len(p.acks) for p in producers)


def healthy(producers: list[SteadyProducer]) -> bool:
    return all(p.error is None and p.fatal is None for p in producers)


@pytest.mark.timeout(120)
def test_kill_one_of_three(broker_factory: BrokerFactory, tmp_path: Path, topic_name: str) -> None:
    brokers = start_cluster(
        broker_factory,
        tmp_path / "cluster",
        [None, None, None],
        env={"PRODUCE_COMMIT_INTERVAL_MS": 50},
    )
    bootstrap = bootstrap_of(brokers)
    create_topic(brokers[0].bootstrap, topic_name, PARTITIONS)

    # The victim leads the most partitions, so the clients really have to move.
    view = metadata_view(bootstrap, "chaos-probe", topic_name)
    assert set(view.brokers) == {1, 2, 3}, view
    led = Counter(view.leaders.values())
    victim: BrokerProcess = brokers[led.most_common(1)[0][0] - 1]
    survivors = [b for b in brokers if b is not victim]
    survivor_ids = {brokers.index(b) + 1 for b in survivors}

    producers = [SteadyProducer(n, bootstrap, topic_name) for n in range(PRODUCERS)]
    tail = TailingConsumer(bootstrap, topic_name)
    for thread in [*(p.thread for p in producers), tail.thread]:
        thread.start()
    try:
        wait_until(
            lambda: total_acks(producers) >= ACKS_BEFORE_KILL or not healthy(producers),
            30,
            f"{ACKS_BEFORE_KILL} acks before the kill",
        )
        assert healthy(producers), [(p.error, p.fatal) for p in producers]

        in_flight = sum(p.sent for p in producers) - total_acks(producers)
        victim.kill()  # mid-stream: requests in flight, a WAL buffer half full
        killed_at = time.monotonic()
        print(
            f"killed {victim.name} (leader of {led[brokers.index(victim) + 1]} partitions) "
            f"with {in_flight} records unacknowledged"
        )

        # After the session timeout Metadata names only the survivors, as every leader.
        moved = wait_until(
            lambda: (
                (v := metadata_view(bootstrap_of(survivors), "chaos-probe", topic_name))
                and set(v.brokers) == survivor_ids
                and set(v.leaders.values()) <= survivor_ids
                and v
            ),
            SESSION_TIMEOUT_MS / 1000 + 10,
            "the dead broker to leave Metadata",
            interval=0.2,
        )
        left_after = time.monotonic() - killed_at
        print(f"dead broker left Metadata after {left_after:.1f}s; leaders {moved.leaders}")
        assert left_after >= SESSION_TIMEOUT_MS / 1000 - 1.5, (
            f"the dead broker left Metadata after {left_after:.1f}s, before its session ended"
        )
        assert set(moved.leaders) == set(range(PARTITIONS)), moved

        # Producers make progress on the survivors, on every partition.
        def progressed() -> bool:
            late = [a for p in producers for a in p.acks if a[3] > killed_at + left_after]
            if not healthy(producers):
                return True
            return len(late) >= ACKS_AFTER_MOVE and {a[1] for a in late} == set(range(PARTITIONS))

        wait_until(progressed, 30, f"{ACKS_AFTER_MOVE} acks on every partition after the move")
        assert healthy(producers), [(p.error, p.fatal) for p in producers]
    finally:
        for p in producers:
            p.stop.set()
        for p in producers:
            p.thread.join(60)
    for p in producers:
        assert not p.thread.is_alive(), f"producer {p.n} did not finish"
        assert p.error is None and p.fatal is None, (p.n, p.error, p.fatal)
        assert p.unflushed == 0, f"producer {p.n}: {p.unflushed} records never delivered"
        assert not p.failures, f"producer {p.n}: {len(p.failures)} failed: {p.failures[:5]}"

    # The final log, read from the survivors: dense, no id twice, every ack in it exactly
    # where the producer was told.
    high = high_watermarks(bootstrap_of(survivors), "chaos-reader", topic_name, PARTITIONS)
    log = read_log(bootstrap_of(survivors), "chaos-reader", topic_name, high)
    assert_dense(log, high)
    assert_unique_values(log)
    stored = {value: (p, offset) for p, records in log.items() for offset, value in records}
    acked = {value: (p, offset) for prod in producers for value, p, offset, _ in prod.acks}
    assert len(acked) == sum(len(p.acks) for p in producers), "a record was acked twice"
    lost = [v for v in acked if v not in stored]
    assert not lost, f"{len(lost)} acknowledged records lost, e.g. {lost[:5]}"
    moved_recs = [(v, acked[v], stored[v]) for v in acked if acked[v] != stored[v]]
    assert not moved_recs, f"acked offsets differ from the log: {moved_recs[:5]}"
    sent = {f"p{p.n}-{i}".encode() for p in producers for i in range(p.sent)}
    assert set(stored) <= sent, "the log holds records nobody produced"
    # Idempotent producers with no failures: the log is exactly what was acknowledged,
    # and each producer's records are in order in each partition.
    assert set(stored) == set(acked), f"{len(set(stored) - set(acked))} unacked records"
    for p, records in log.items():
        for n in range(PRODUCERS):
            ids = [int(v.split(b"-")[1]) for _, v in records if v.startswith(f"p{n}-".encode())]
            assert ids == sorted(ids), f"partition {p}: producer {n} out of order"

    # The tailing consumer followed the log through the kill and saw the same thing.
    wait_until(lambda: tail.caught_up(high) or tail.error, 30, "the tailing consumer to catch up")
    tail.stop.set()
    tail.thread.join(15)
    assert tail.error is None, tail.error
    tailed = {p: [r for r in tail.seen[p] if r[0] < high[p]] for p in range(PARTITIONS)}
    assert tailed == log, "the tailing consumer read a different log"

    assert all(b.alive() for b in survivors), [b.exit_codes for b in survivors]
    print(f"{len(acked)} acked, high watermarks {high}, tail errors {Counter(tail.errors)}")
