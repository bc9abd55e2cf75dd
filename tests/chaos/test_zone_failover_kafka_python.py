"""Zone failover under kafka-python: SIGKILL zone-a's only broker under a zone-a producer.

kafka-python asks only brokers Metadata named once it has an answer, and never goes back to
its bootstrap servers, so it fails over only if Metadata named the other zones' brokers
(leading nothing) before the kill. The survivors notice the kill slowly here (2.5-7.5 s),
well after the client has found zone-a's broker gone.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from cluster_support import (
    FAILOVER_ENV,
    assert_dense,
    assert_unique_values,
    bootstrap_of,
    high_watermarks,
    read_log,
    start_cluster,
    zone_client_id,
)
from e2e_fixtures import BrokerFactory
from e2e_harness import create_topic, wait_until
from steady_clients import SteadyProducer
from test_zone_failover import SLOW_DETECTION, ZONES

PARTITIONS = 4
RESUME_WITHIN_S = 20.0


class KafkaPythonProducer(SteadyProducer):
    """`SteadyProducer`'s stream (`p<n>-<i>` round-robin, callbacks as the ground truth)
    from an idempotent acks=all kafka-python producer instead of librdkafka."""

    def _run(self) -> None:
        from kafka import KafkaProducer

        try:
            producer = KafkaProducer(
                bootstrap_servers=self.bootstrap,
                client_id=self.client_id,
                acks="all",
                enable_idempotence=True,
                linger_ms=5,
                reconnect_backoff_max_ms=500,
                metadata_max_age_ms=1000,
                delivery_timeout_ms=60_000,
            )

            def acked(value: bytes, metadata: object) -> None:
                self.acks.append(
                    (value, metadata.partition, metadata.offset, time.monotonic())  # type: ignore[attr-defined]
                )

            i = 0
            while not self.stop.is_set():
                value = f"p{self.n}-{i}".encode()
                future = producer.send(self.topic, value=value, partition=i % self.partitions)
                future.add_callback(lambda metadata, v=value: acked(v, metadata))
                future.add_errback(lambda exc: self.failures.append(repr(exc)))
                i += 1
                self.sent = i
                time.sleep(0.005)
            producer.flush(90)
            producer.close(10)
        except BaseException as exc:
            self.error = exc


@pytest.mark.timeout(240)
def test_kafka_python_fails_over_to_another_zone(
    broker_factory: BrokerFactory, tmp_path: Path, topic_name: str
) -> None:
    brokers = start_cluster(
        broker_factory, tmp_path / "cluster", ZONES, env={**FAILOVER_ENV, **SLOW_DETECTION}
    )
    victim = brokers[0]
    bootstrap = bootstrap_of(brokers)
    create_topic(victim.bootstrap, topic_name, PARTITIONS)
    client_id = zone_client_id("kp-producer", "zone-a")
    producer = KafkaPythonProducer(0, bootstrap, topic_name, PARTITIONS, client_id=client_id)
    producer.thread.start()
    try:
        wait_until(lambda: len(producer.acks) >= 300 or producer.error, 60, "300 acks")
        assert producer.error is None, producer.error
        sent_at_kill = producer.sent
        victim.kill()
        killed_at = time.monotonic()

        def resumed() -> float | None:
            return min(producer.acked_since(sent_at_kill), default=None)

        first = wait_until(lambda: resumed() or producer.error, 60, "an ack after the kill")
        assert producer.error is None, producer.error
        resume_s = first - killed_at
        print(f"kafka-python's produce resumed {resume_s:.2f}s after the kill")
        assert resume_s < RESUME_WITHIN_S, f"produce resumed only after {resume_s:.1f}s"
        wait_until(lambda: len(producer.acks) >= sent_at_kill + 300, 60, "300 acks more")
    finally:
        producer.stop.set()
        producer.thread.join(120)
    assert not producer.thread.is_alive(), "the producer did not finish"
    assert producer.error is None, producer.error
    assert not producer.failures, f"{len(producer.failures)} failed: {producer.failures[:5]}"
    assert len(producer.acks) == producer.sent, (len(producer.acks), producer.sent)

    # Every acknowledged record stored once, where the producer was told, in order,
    # read from the survivors by a zone-b client.
    survivors = bootstrap_of(brokers[1:])
    reader = zone_client_id("kp-reader", "zone-b")
    high = high_watermarks(survivors, reader, topic_name, PARTITIONS)
    log = read_log(survivors, reader, topic_name, high)
    assert_dense(log, high)
    assert_unique_values(log)
    stored = {value: (p, offset) for p, records in log.items() for offset, value in records}
    acked = {value: (p, offset) for value, p, offset, _ in producer.acks}
    assert stored == acked, "the log differs from what the producer was acknowledged"
    for p, records in log.items():
        ids = [int(v.split(b"-")[1]) for _, v in records]
        assert ids == sorted(ids), f"partition {p}: records out of order"
