"""The confluent-kafka (librdkafka) side of the benchmarks: topic creation, client settings,
the saturating produce phase and the read-from-the-beginning consume phase.

One place for the client settings, so every bench drives the broker the same way.
"""

from __future__ import annotations

import time
from array import array
from collections.abc import Callable, Mapping
from typing import Any

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from common import STALL_S, BenchError, MiB, lat_summary

LOG_LEVEL = 3  # librdkafka: errors only; its per-reconnect INFO lines drown the table


def common_conf(bootstrap: str) -> dict[str, Any]:
    return {"bootstrap.servers": bootstrap, "log_level": LOG_LEVEL}


def create_topic(bootstrap: str, name: str, partitions: int) -> None:
    """Create the topic and wait until metadata shows all its partitions."""
    admin = AdminClient(common_conf(bootstrap))
    futures = admin.create_topics(
        [NewTopic(name, num_partitions=partitions, replication_factor=1)],
        operation_timeout=15,
        request_timeout=15,
    )
    try:
        futures[name].result(timeout=30)
    except Exception as exc:
        raise BenchError(f"CreateTopics {name}: {exc!r}") from exc
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        md = admin.list_topics(topic=name, timeout=5)
        t = md.topics.get(name)
        if t is not None and t.error is None and len(t.partitions) == partitions:
            return
        time.sleep(0.2)
    raise BenchError(f"topic {name} never showed {partitions} partitions in Metadata")


def producer_conf(bootstrap: str, queue_mib: int, on_delivery: Callable[..., None]) -> dict:
    """The brief's producer: acks=all, linger 5 ms, 1 MB batches, no compression."""
    return common_conf(bootstrap) | {
        "acks": "all",
        "linger.ms": 5,
        "batch.size": 1_000_000,
        "compression.type": "none",
        "queue.buffering.max.messages": 10_000_000,
        "queue.buffering.max.kbytes": queue_mib * 1024,
        "on_delivery": on_delivery,
    }


def consumer_conf(bootstrap: str, tail: bool = False) -> dict[str, Any]:
    """Manual-assign consumer with big fetches; group.id is set but never used."""
    return common_conf(bootstrap) | {
        "group.id": "lakelog-bench",
        "enable.auto.commit": False,
        "enable.auto.offset.store": False,
        "auto.offset.reset": "earliest",
        "fetch.max.bytes": 64 * MiB,
        "max.partition.fetch.bytes": 16 * MiB,
        "receive.message.max.bytes": 64 * MiB + 1 * MiB,
        "queued.max.messages.kbytes": 512 * 1024,
        # librdkafka postpones the next fetch by this much (default 1000 ms) once its queue
        # passes queued.min.messages; with 1 KiB records one big fetch does: the consumer
        # then sits idle half the time. Measured here: 200 MiB/s at the default, 414 at 0.
        "fetch.queue.backoff.ms": 0,
        "fetch.wait.max.ms": 500 if tail else 100,
    }


class Deliveries:
    """Delivery-callback sink: latencies (produce() to callback) and errors."""

    def __init__(self) -> None:
        self.latencies = array("d")
        self.ok = 0
        self.errors = 0
        self.first_error: str | None = None

    def __call__(self, err: KafkaError | None, msg: Any) -> None:
        if err is not None:
            self.errors += 1
            if self.first_error is None:
                self.first_error = str(err)
            return
        self.ok += 1
        lat = msg.latency()
        if lat is not None:
            self.latencies.append(lat)

    @property
    def done(self) -> int:
        return self.ok + self.errors


def drain_producer(p: Producer, dr: Deliveries, expected: int, what: str) -> None:
    """Flush until every record has its delivery report; fail if nothing moves for 30 s."""
    last, last_change = dr.done, time.monotonic()
    while dr.done < expected:
        p.flush(0.5)
        if dr.done != last:
            last, last_change = dr.done, time.monotonic()
        elif time.monotonic() - last_change > STALL_S:
            raise BenchError(
                f"{what}: {expected - dr.done} of {expected} records without a delivery "
                f"report after {STALL_S:.0f} s without progress"
            )


def phase_produce(
    bootstrap: str,
    topic: str,
    n: int,
    value: bytes,
    queue_mib: int,
    extra_conf: Mapping[str, Any] | None = None,
    ready: Callable[[], None] | None = None,
) -> dict:
    """Produce n records as fast as the client's queue allows; MiB/s and latency.

    `extra_conf` adds client settings (e.g. a `client.id` naming a zone); `ready` is called
    after the warm-up record, just before timing starts, so several producers can start
    together.
    """
    dr = Deliveries()
    p = Producer(producer_conf(bootstrap, queue_mib, dr) | dict(extra_conf or {}))
    # One record first, so connection setup and metadata are not in the timing.
    p.produce(topic, value)
    drain_producer(p, dr, 1, "produce warm-up")
    if dr.errors:
        raise BenchError(f"produce warm-up failed: {dr.first_error}")
    dr.latencies = array("d")
    dr.ok = 0
    if ready is not None:
        ready()
    produce = p.produce
    t0 = time.perf_counter()
    last_progress = time.monotonic()
    for i in range(n):
        while True:
            try:
                produce(topic, value)
                break
            except BufferError:
                before = dr.done
                p.poll(0.005)
                if dr.done != before:
                    last_progress = time.monotonic()
                elif time.monotonic() - last_progress > STALL_S:
                    raise BenchError(
                        f"produce: client queue full and no delivery for {STALL_S:.0f} s "
                        f"({dr.ok} delivered, {dr.errors} failed: {dr.first_error})"
                    ) from None
        if i & 1023 == 0:
            p.poll(0)
        if dr.errors:
            break
    if not dr.errors:
        drain_producer(p, dr, n, "produce")
    elapsed = time.perf_counter() - t0
    if dr.errors:
        raise BenchError(f"produce: {dr.errors} delivery errors, first: {dr.first_error}")
    mib = n * len(value) / MiB
    return {
        "records": n,
        "records_in_topic": n + 1,  # the warm-up record too
        "mib": round(mib, 1),
        "seconds": round(elapsed, 3),
        "mib_s": round(mib / elapsed, 1),
        "latency": lat_summary(dr.latencies),
    }


def phase_consume(bootstrap: str, topic: str, partitions: int, n: int) -> dict:
    """Read the topic from the beginning (manual assign) until all n records arrived.

    Timed from the first record: librdkafka waits ~0.5 s after assign() before its first
    ListOffsets (its offset-query backoff), a fixed client cost reported separately.
    """
    c = Consumer(consumer_conf(bootstrap))
    try:
        t0 = time.perf_counter()
        c.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
        got = nbytes = errors = 0
        first_error: str | None = None
        t_first: float | None = None
        first_bytes = 0  # bytes of the first consume() answer: they arrived before t_first
        last_change = time.monotonic()
        while got < n:
            msgs = c.consume(num_messages=10_000, timeout=0.5)
            if msgs and t_first is None:
                t_first = time.perf_counter()
                first_bytes = -1
            if not msgs:
                if time.monotonic() - last_change > STALL_S:
                    raise BenchError(
                        f"consume: stuck at {got} of {n} records for {STALL_S:.0f} s "
                        f"(errors: {errors}, first: {first_error})"
                    )
                continue
            last_change = time.monotonic()
            for m in msgs:
                err = m.error()
                if err is not None:
                    errors += 1
                    first_error = first_error or str(err)
                    if errors > 100:
                        raise BenchError(f"consume: {errors} errors, first: {first_error}")
                    continue
                got += 1
                nbytes += len(m.value())
            if first_bytes < 0:
                first_bytes = nbytes
        t_end = time.perf_counter()
    finally:
        c.close()
    if got != n:
        raise BenchError(f"consume: read {got} records, expected {n}")
    assert t_first is not None
    streamed = t_end - t_first
    mib_s = (nbytes - first_bytes) / MiB / streamed if streamed > 0.05 else None
    return {
        "records": got,
        "mib": round(nbytes / MiB, 1),
        "seconds": round(t_end - t0, 3),
        "first_record_s": round(t_first - t0, 3),
        "mib_s": round(mib_s if mib_s is not None else nbytes / MiB / (t_end - t0), 1),
        "mib_s_from_assign": round(nbytes / MiB / (t_end - t0), 1),
        "errors": errors,
    }
