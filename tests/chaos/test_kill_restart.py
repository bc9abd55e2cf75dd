"""Crash the broker under load: an acknowledged record must survive SIGKILL, offsets stay
dense, and no offset is handed out twice across restarts.

A background thread keeps producing with acks=all (librdkafka retries through the outage);
the delivery callbacks are the ground truth of what was acknowledged and where.
"""

from __future__ import annotations

import threading
import time
import uuid
from dataclasses import dataclass, field

import pytest
from e2e_fixtures import BrokerFactory
from e2e_harness import BrokerProcess, create_topic, wait_until
from e2e_wire import encode_request

PARTITIONS = 3
ACKS_PER_ROUND = 1500
KILL_ROUNDS = 3


@dataclass
class Ack:
    value: bytes
    partition: int
    offset: int
    at: float
    """time.monotonic() when the delivery callback ran (after the broker's ack arrived)."""


@dataclass
class ProducerThread:
    """Produces `r<i>` records round-robin over the partitions until stopped."""

    bootstrap: str
    topic: str
    acks: list[Ack] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)
    sent: int = 0
    stop: threading.Event = field(default_factory=threading.Event)
    error: BaseException | None = None
    unflushed: int = -1

    def __post_init__(self) -> None:
        self.thread = threading.Thread(target=self._run, name="chaos-producer", daemon=True)

    def start(self) -> None:
        self.thread.start()

    def join(self, timeout: float) -> None:
        self.stop.set()
        self.thread.join(timeout)
        assert not self.thread.is_alive(), "producer thread did not finish"
        if self.error is not None:
            raise self.error

    def acked_count(self) -> int:
        return len(self.acks)

    def _run(self) -> None:
        from confluent_kafka import Producer

        try:
            producer = Producer(
                {
                    "bootstrap.servers": self.bootstrap,
                    "acks": "all",
                    "linger.ms": 5,
                    "message.timeout.ms": 60_000,
                    "reconnect.backoff.ms": 50,
                    "reconnect.backoff.max.ms": 500,
                    "topic.metadata.refresh.interval.ms": 1000,
                }
            )

            def delivered(err: object, msg: object) -> None:
                if err is not None:
                    self.failures.append(str(err))
                    return
                self.acks.append(
                    Ack(msg.value(), msg.partition(), msg.offset(), time.monotonic())  # type: ignore[attr-defined]
                )

            i = 0
            while not self.stop.is_set():
                try:
                    producer.produce(
                        self.topic,
                        value=f"r{i}-".encode() + b"x" * (i % 200),
                        key=str(i).encode(),
                        partition=i % PARTITIONS,
                        on_delivery=delivered,
                    )
                    i += 1
                    self.sent = i
                except BufferError:
                    producer.poll(0.05)
                producer.poll(0)
                if i % 20 == 0:
                    time.sleep(0.01)  # ~2,000 records/s: a steady stream, not a flood
            self.unflushed = producer.flush(90)
        except BaseException as exc:
            self.error = exc


def read_all(
    bootstrap: str, topic: str, high: dict[int, int]
) -> dict[int, list[tuple[int, bytes]]]:
    """Every record of every partition up to the given high watermarks, as (offset, value)."""
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"chaos-{uuid.uuid4().hex}",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "fetch.wait.max.ms": 100,
        }
    )
    out: dict[int, list[tuple[int, bytes]]] = {p: [] for p in range(PARTITIONS)}
    try:
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(PARTITIONS)])
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline and any(
            (out[p][-1][0] + 1 if out[p] else 0) < high[p] for p in range(PARTITIONS)
        ):
            for m in consumer.consume(num_messages=5000, timeout=0.5):
                assert m.error() is None, m.error()
                out[m.partition()].append((m.offset(), m.value()))
    finally:
        consumer.close()
    return out


def high_watermarks(bootstrap: str, topic: str) -> dict[int, int]:
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "chaos-watermarks"})
    try:
        return {
            p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=15, cached=False)[1]
            for p in range(PARTITIONS)
        }
    finally:
        consumer.close()


def check_log(
    bootstrap: str, topic: str, acks: list[Ack]
) -> tuple[dict[int, int], dict[int, list[tuple[int, bytes]]]]:
    """The invariants every run must keep; returns (high watermarks, log)."""
    high = high_watermarks(bootstrap, topic)
    log = read_all(bootstrap, topic, high)

    for p in range(PARTITIONS):
        offsets = [o for o, _ in log[p]]
        assert offsets == list(range(high[p])), (
            f"partition {p}: offsets not dense 0..{high[p] - 1}: {len(offsets)} read, gaps/dups "
            f"near {[(i, o) for i, o in enumerate(offsets) if o != i][:5]}"
        )

    seen: dict[tuple[int, int], bytes] = {}
    for ack in acks:
        where = (ack.partition, ack.offset)
        assert where not in seen or seen[where] == ack.value, (
            f"offset {where} acknowledged twice: {seen.get(where)!r} and {ack.value!r}"
        )
        seen[where] = ack.value
        assert ack.offset < high[ack.partition], (
            f"acked {ack.value[:12]!r} at {where} but the high watermark is {high[ack.partition]}"
        )
        stored = log[ack.partition][ack.offset][1]
        assert stored == ack.value, (
            f"acked {ack.value[:12]!r} at {where}, the log holds {stored[:12]!r} there"
        )
    return high, log


@pytest.mark.timeout(240)
def test_acked_records_survive_sigkill(broker_factory: BrokerFactory, topic_name: str) -> None:
    broker: BrokerProcess = broker_factory(env={"PRODUCE_COMMIT_INTERVAL_MS": 50})
    create_topic(broker.bootstrap, topic_name, PARTITIONS)
    producer = ProducerThread(broker.bootstrap, topic_name)
    producer.start()
    rounds: list[tuple[float, float]] = []  # (killed at, answering again at)
    try:
        for _ in range(KILL_ROUNDS):
            target = producer.acked_count() + ACKS_PER_ROUND
            wait_until(
                lambda t=target: producer.acked_count() >= t or producer.error,
                60,
                f"{ACKS_PER_ROUND} more acks before the kill",
            )
            killed_at = time.monotonic()
            broker.kill()  # mid-stream: requests in flight, a WAL buffer half full
            time.sleep(0.5)  # the producer keeps retrying against a closed port
            broker.start()
            rounds.append((killed_at, time.monotonic()))
        target = producer.acked_count() + ACKS_PER_ROUND
        wait_until(
            lambda: producer.acked_count() >= target or producer.error,
            60,
            "acks after the last restart",
        )
    finally:
        producer.join(timeout=120)
    assert producer.unflushed == 0, f"{producer.unflushed} records never delivered"
    assert not producer.failures, f"delivery failures: {producer.failures[:5]}"

    acks = list(producer.acks)
    high, _ = check_log(broker.bootstrap, topic_name, acks)

    # No offset reused: whatever was acked after a restart lies above everything acked
    # before the crash, partition by partition.
    for killed_at, ready_at in rounds:
        for p in range(PARTITIONS):
            before = [a.offset for a in acks if a.partition == p and a.at < killed_at]
            after = [a.offset for a in acks if a.partition == p and a.at > ready_at]
            assert before and after, f"partition {p}: no acks on one side of the crash"
            assert min(after) > max(before), (
                f"partition {p}: offset {min(after)} acked after the restart, "
                f"but {max(before)} was acked before the crash"
            )
    distinct = len({a.value for a in acks})
    assert sum(high.values()) >= distinct
    # Shown with -s or on failure: how hard the crash hit (retried duplicates are legal).
    kills = [sum(a.at < killed_at for a in acks) for killed_at, _ in rounds]
    print(
        f"sent {producer.sent}, acked {len(acks)} ({distinct} distinct), "
        f"log holds {sum(high.values())}, killed after {kills} acks"
    )


@pytest.mark.timeout(180)
def test_sigterm_mid_stream_is_graceful(broker_factory: BrokerFactory, topic_name: str) -> None:
    """SIGTERM drains: the broker exits 0 on its own, nothing acked is lost, and the next
    run continues the offsets."""
    broker: BrokerProcess = broker_factory(env={"PRODUCE_COMMIT_INTERVAL_MS": 50})
    create_topic(broker.bootstrap, topic_name, PARTITIONS)
    producer = ProducerThread(broker.bootstrap, topic_name)
    producer.start()
    try:
        wait_until(
            lambda: producer.acked_count() >= ACKS_PER_ROUND or producer.error,
            60,
            "acks before SIGTERM",
        )
        code = broker.terminate()
        assert not broker.needed_sigkill, "the broker ignored SIGTERM"
        assert code == 0, f"graceful shutdown exited with {code}"
        stopped_at = time.monotonic()
        time.sleep(0.5)
        broker.start()
        ready_at = time.monotonic()
        target = producer.acked_count() + ACKS_PER_ROUND
        wait_until(
            lambda: producer.acked_count() >= target or producer.error, 60, "acks after the restart"
        )
    finally:
        producer.join(timeout=120)
    assert producer.unflushed == 0
    assert not producer.failures, f"delivery failures: {producer.failures[:5]}"
    acks = list(producer.acks)
    check_log(broker.bootstrap, topic_name, acks)
    for p in range(PARTITIONS):
        before = [a.offset for a in acks if a.partition == p and a.at < stopped_at]
        after = [a.offset for a in acks if a.partition == p and a.at > ready_at]
        assert before and after
        assert min(after) > max(before)


@pytest.mark.timeout(120)
@pytest.mark.parametrize("client_gone", [False, True], ids=["client-waiting", "client-gone"])
def test_sigterm_with_pending_long_poll_fetch(
    broker_factory: BrokerFactory, topic_name: str, client_gone: bool
) -> None:
    """A Fetch waiting for data (max_wait 10 s at the high watermark) must neither hold up
    shutdown nor outlive the coordinator: SIGTERM exits 0 within seconds and logs no
    traceback, whether the fetching client is still connected or already went away."""
    from e2e_wire import WireClient, fetch_v4

    broker: BrokerProcess = broker_factory()
    create_topic(broker.bootstrap, topic_name, 1)
    client = WireClient(broker.port)
    try:
        client.send_raw(encode_request(1, 4, 1, fetch_v4(topic_name, 0, 0, max_wait_ms=10_000)))
        time.sleep(0.5)  # the fetch is parked in the broker, waiting for records
        if client_gone:
            client.close()
        started = time.monotonic()
        code = broker.terminate(timeout=15)
        took = time.monotonic() - started
    finally:
        client.close()
    assert not broker.needed_sigkill and code == 0, f"exit code {code}"
    # Kafka completes parked fetches at shutdown; waiting out their max_wait is not graceful.
    assert took < 5, f"shutdown took {took:.1f}s with a fetch parked for 10 s"
    assert not broker.tracebacks(), "\n\n".join(broker.tracebacks())
