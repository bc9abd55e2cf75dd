"""Steady clients for chaos tests: an idempotent producer whose delivery callbacks are the
ground truth of what was acknowledged, and a consumer tailing the log through the fault."""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Collection
from dataclasses import dataclass, field


@dataclass
class SteadyProducer:
    """An idempotent acks=all producer writing `p<n>-<i>` ids round-robin over the
    partitions until stopped; delivery callbacks are the ground truth of what was acked."""

    n: int
    bootstrap: str
    topic: str
    partitions: int
    acks: list[tuple[bytes, int, int, float]] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)
    sent: int = 0
    stop: threading.Event = field(default_factory=threading.Event)
    error: BaseException | None = None
    fatal: str | None = None
    unflushed: int = -1
    client_id: str | None = None
    """Default `chaos-producer-<n>`; a `lakelog_az=<zone>` one pins it to a zone."""
    config: dict[str, object] = field(default_factory=dict)
    """More librdkafka settings, over the defaults below."""

    def __post_init__(self) -> None:
        self.thread = threading.Thread(target=self._run, name=f"producer-{self.n}", daemon=True)

    def acked_since(self, sent: int, partitions: Collection[int] | None = None) -> list[float]:
        """When the records numbered `sent` and later (produced once `self.sent` was
        `sent`) were acknowledged; only those of `partitions`, if given."""
        return [
            a[3]
            for a in self.acks
            if int(a[0].split(b"-")[1]) >= sent and (partitions is None or a[1] in partitions)
        ]

    def _run(self) -> None:
        from confluent_kafka import KafkaError, Producer

        def on_error(err: KafkaError) -> None:
            if err.fatal():
                self.fatal = str(err)

        try:
            producer = Producer(
                {
                    "bootstrap.servers": self.bootstrap,
                    "client.id": self.client_id or f"chaos-producer-{self.n}",
                    "enable.idempotence": True,
                    "acks": "all",
                    "linger.ms": 5,
                    "message.timeout.ms": 45_000,
                    "reconnect.backoff.ms": 50,
                    "reconnect.backoff.max.ms": 500,
                    "topic.metadata.refresh.interval.ms": 1000,
                    "error_cb": on_error,
                    **self.config,
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
                        partition=i % self.partitions,
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
    partitions: int
    seen: dict[int, list[tuple[int, bytes]]] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)
    stop: threading.Event = field(default_factory=threading.Event)
    error: BaseException | None = None

    def __post_init__(self) -> None:
        self.seen = {p: [] for p in range(self.partitions)}
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
                [TopicPartition(self.topic, p, OFFSET_BEGINNING) for p in range(self.partitions)]
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

    def close(self) -> None:
        """Stop following the log (idempotent; the thread closes its consumer)."""
        self.stop.set()
        if self.thread.is_alive():
            self.thread.join(15)

    def caught_up(self, high: dict[int, int]) -> bool:
        return all(len(self.seen[p]) >= high[p] for p in range(self.partitions))


def total_acks(producers: list[SteadyProducer]) -> int:
    return sum(len(p.acks) for p in producers)


def healthy(producers: list[SteadyProducer]) -> bool:
    return all(p.error is None and p.fatal is None for p in producers)
