"""The paced phase: a producer at a fixed rate while a consumer tails the topic, for the
end-to-end latency a user sees when the broker is not saturated.
"""

from __future__ import annotations

import os
import threading
import time
from array import array

from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition

from clients import Deliveries, consumer_conf, drain_producer, producer_conf
from common import STALL_S, BenchError, MiB, lat_summary


class Tail(threading.Thread):
    """Tailing consumer: end-to-end latency = receive time - send time in the value."""

    def __init__(self, bootstrap: str, topic: str, partitions: int) -> None:
        super().__init__(name="tail-consumer", daemon=True)
        self.bootstrap, self.topic, self.partitions = bootstrap, topic, partitions
        self.e2e = array("d")
        self.received = 0
        self.errors = 0
        self.first_error: str | None = None
        self.ready = threading.Event()  # the warm-up record (send time 0) arrived
        self.stop_at: float | None = None  # monotonic deadline, set when producing ends
        self.expected: int | None = None
        self.crash: BaseException | None = None

    def run(self) -> None:
        try:
            self._run()
        except BaseException as exc:  # reported by the main thread
            self.crash = exc

    def _run(self) -> None:
        c = Consumer(consumer_conf(self.bootstrap, tail=True))
        try:
            c.assign(
                [TopicPartition(self.topic, p, OFFSET_BEGINNING) for p in range(self.partitions)]
            )
            hard_stop = time.monotonic() + 600  # bounded whatever the main thread does
            while time.monotonic() < hard_stop:
                if self.stop_at is not None and (
                    time.monotonic() > self.stop_at
                    or (self.expected is not None and self.received >= self.expected)
                ):
                    return
                # consume(n, timeout) waits until n records or the timeout: at low rates
                # that held each record up to 100 ms. Take what is there, else block for
                # one record, which returns the moment it arrives.
                msgs = c.consume(num_messages=5_000, timeout=0) or c.consume(1, timeout=0.1)
                if not msgs:
                    continue
                now = time.time_ns()
                for m in msgs:
                    if m.error() is not None:
                        self.errors += 1
                        self.first_error = self.first_error or str(m.error())
                        continue
                    sent = int.from_bytes(m.value()[:8], "big")
                    if sent == 0:
                        self.ready.set()
                        continue
                    self.received += 1
                    self.e2e.append((now - sent) / 1e9)
        finally:
            c.close()


def phase_paced(
    bootstrap: str,
    topic: str,
    partitions: int,
    record_bytes: int,
    mibs: float,
    seconds: float,
    queue_mib: int,
) -> dict:
    """Produce at a fixed rate while a consumer tails the topic: e2e and produce latency."""
    pad = os.urandom(record_bytes - 8)
    tail = Tail(bootstrap, topic, partitions)
    tail.start()
    dr = Deliveries()
    p = Producer(producer_conf(bootstrap, queue_mib, dr))
    try:
        p.produce(topic, bytes(8) + pad)  # warm-up marker: send time 0
        drain_producer(p, dr, 1, "paced warm-up")
        if dr.errors:
            raise BenchError(f"paced warm-up failed: {dr.first_error}")
        if not tail.ready.wait(STALL_S):
            raise BenchError(
                f"paced: the tailing consumer did not see the warm-up record in {STALL_S:.0f} s"
                f" (consumer errors: {tail.errors}, first: {tail.first_error}, crash: "
                f"{tail.crash!r})"
            )
        dr.latencies = array("d")
        dr.ok = 0
        rate = mibs * MiB / record_bytes  # records per second
        total = int(rate * seconds)
        produce, poll, now_ns = p.produce, p.poll, time.time_ns
        sent = full = 0
        t0 = time.perf_counter()
        limit = t0 + seconds * 2 + STALL_S
        while sent < total:
            now = time.perf_counter()
            if now > limit:
                raise BenchError(f"paced: sent only {sent} of {total} records in time")
            due = min(total, int((now - t0) * rate) + 1)
            while sent < due:
                try:
                    produce(topic, now_ns().to_bytes(8, "big") + pad)
                    sent += 1
                except BufferError:
                    full += 1
                    poll(0.005)
                    break
            poll(0)
            if dr.errors:
                raise BenchError(f"paced: delivery error: {dr.first_error}")
            if sent >= due:
                time.sleep(0.001)
        send_elapsed = time.perf_counter() - t0
        drain_producer(p, dr, total, "paced")
        if dr.errors:
            raise BenchError(f"paced: {dr.errors} delivery errors, first: {dr.first_error}")
        tail.expected = total
        tail.stop_at = time.monotonic() + STALL_S
        tail.join(STALL_S + 5)
    finally:
        tail.stop_at = tail.stop_at or time.monotonic()
        tail.join(15)
    if tail.crash is not None:
        raise BenchError(f"paced: tailing consumer failed: {tail.crash!r}")
    if tail.received != total:
        raise BenchError(
            f"paced: consumer saw {tail.received} of {total} records "
            f"(errors: {tail.errors}, first: {tail.first_error})"
        )
    return {
        "target_mib_s": mibs,
        "achieved_mib_s": round(total * record_bytes / MiB / send_elapsed, 1),
        "seconds": round(send_elapsed, 2),
        "records": total,
        "mib": round(total * record_bytes / MiB, 1),
        "queue_full_events": full,
        "e2e": lat_summary(tail.e2e),
        "produce_latency": lat_summary(dr.latencies),
    }
