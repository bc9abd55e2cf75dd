"""The clients of a fault run: producers whose delivery callbacks are the ground truth,
a consumer tailing the log through the faults, and the read-back of the whole log."""

from __future__ import annotations

import functools
import logging
import threading
import time
import uuid
from typing import Any

from tests.faults.history import (
    Ack,
    ProducerHistory,
    Stored,
    encode_value,
)
from tests.faults.plan import Plan


def client_logger() -> logging.Logger:
    """Where librdkafka's own log lines go: a quiet logger (they are connection noise
    here; the delivery and error callbacks carry what the checker needs)."""
    logger = logging.getLogger("faults.librdkafka")
    logger.setLevel(logging.CRITICAL)
    logger.propagate = False
    return logger


class FaultProducer:
    """A confluent-kafka producer thread at a steady rate; callbacks fill its history."""

    def __init__(self, name: str, idempotent: bool, bootstrap: str, topic: str, plan: Plan) -> None:
        self.history = ProducerHistory(name, idempotent)
        self.bootstrap = bootstrap
        self.topic = topic
        self.plan = plan
        self.stop = threading.Event()
        self.lock = threading.Lock()
        self.thread = threading.Thread(target=self._run, name=f"producer-{name}", daemon=True)

    def config(self) -> dict[str, Any]:
        conf: dict[str, Any] = {
            "bootstrap.servers": self.bootstrap,
            "client.id": f"faults-{self.history.name}",
            "acks": "all",
            "linger.ms": 5,
            "max.in.flight.requests.per.connection": 5,
            "message.timeout.ms": self.plan.message_timeout_ms,
            "request.timeout.ms": 10_000,
            "queue.buffering.max.kbytes": 32 * 1024,
            "reconnect.backoff.ms": 50,
            "reconnect.backoff.max.ms": 1000,
            "topic.metadata.refresh.interval.ms": 1000,
            "error_cb": self._on_error,
            "logger": client_logger(),
        }
        if self.history.idempotent:
            conf["enable.idempotence"] = True
        else:
            conf["enable.idempotence"] = False
            conf["retries"] = 0
        return conf

    def _on_error(self, err: Any) -> None:
        if err.fatal():
            with self.lock:
                self.history.fatal.append(str(err))

    def _delivered(self, seq: int, err: Any, msg: Any) -> None:
        with self.lock:
            if err is not None:
                self.history.failed[seq] = str(err)
            else:
                self.history.acks.append(Ack(seq, msg.partition(), msg.offset(), time.time()))

    def _run(self) -> None:
        from confluent_kafka import Producer

        h, plan = self.history, self.plan
        try:
            producer = Producer(self.config())
            interval = 1.0 / plan.rate_per_producer
            next_at = time.monotonic()
            seq = 0
            while not self.stop.is_set():
                big = seq % plan.big_every == plan.big_every - 1
                size = plan.big_size if big else plan.small_size
                partition = seq % plan.partitions
                try:
                    producer.produce(
                        self.topic,
                        value=encode_value(h.name, seq, size),
                        partition=partition,
                        on_delivery=functools.partial(self._delivered, seq),
                    )
                except BufferError:
                    producer.poll(0.1)  # the queue is full: the broker is behind
                    continue
                with self.lock:
                    h.sent[seq] = partition
                seq += 1
                next_at += interval
                producer.poll(max(0.0, next_at - time.monotonic()))
                if h.fatal:
                    break  # the client is dead: nothing more will be delivered
            h.unflushed = producer.flush(plan.flush_timeout_s)
        except BaseException as exc:
            with self.lock:
                h.fatal.append(f"producer thread crashed: {exc!r}")


class TailingConsumer:
    """Reads the topic while the faults happen, as a real consumer would: its Fetch and
    Metadata requests meet the outages too (dropped connections show in broker logs)."""

    def __init__(self, bootstrap: str, topic: str, partitions: int) -> None:
        self.bootstrap, self.topic, self.partitions = bootstrap, topic, partitions
        self.records = 0
        self.errors: list[str] = []
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, name="tail", daemon=True)

    def _run(self) -> None:
        from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

        try:
            consumer = Consumer(
                {
                    "bootstrap.servers": self.bootstrap,
                    "client.id": "faults-tail",
                    "group.id": f"tail-{uuid.uuid4().hex}",
                    "enable.auto.commit": False,
                    "fetch.wait.max.ms": 200,
                    "topic.metadata.refresh.interval.ms": 1000,
                    "reconnect.backoff.max.ms": 1000,
                    "logger": client_logger(),
                }
            )
            consumer.assign(
                [TopicPartition(self.topic, p, OFFSET_BEGINNING) for p in range(self.partitions)]
            )
            while not self.stop.is_set():
                for m in consumer.consume(num_messages=500, timeout=0.2):
                    if m.error() is not None:
                        self.errors.append(str(m.error()))
                    else:
                        self.records += 1
            consumer.close()
        except BaseException as exc:
            self.errors.append(f"consumer crashed: {exc!r}")


def read_back(
    bootstrap: str, topic: str, partitions: int, timeout: float
) -> tuple[dict[int, list[Stored]], dict[int, int], dict[int, int]]:
    """The whole log (values cut to their identifying head), high watermarks, log starts."""
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "client.id": "faults-reader",
            "group.id": f"read-{uuid.uuid4().hex}",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "fetch.wait.max.ms": 100,
        }
    )
    log: dict[int, list[Stored]] = {p: [] for p in range(partitions)}
    try:
        low: dict[int, int] = {}
        high: dict[int, int] = {}
        for p in range(partitions):
            lo, hi = consumer.get_watermark_offsets(
                TopicPartition(topic, p), timeout=30, cached=False
            )
            low[p], high[p] = lo, hi
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
        deadline = time.monotonic() + timeout
        last: dict[int, int] = {p: -1 for p in range(partitions)}
        while time.monotonic() < deadline and any(last[p] + 1 < high[p] for p in last):
            for m in consumer.consume(num_messages=1000, timeout=0.5):
                if m.error() is not None:
                    continue  # e.g. partition EOF; the offsets tell whether all arrived
                value = m.value()
                log[m.partition()].append(Stored(m.offset(), value[:64] if value else value))
                last[m.partition()] = max(last[m.partition()], m.offset())
    finally:
        consumer.close()
    return log, high, low


# ------------------------------------------------------------------- the run
