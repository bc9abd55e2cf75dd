"""A plain producer (no idempotence, no retries) whose requests are in flight at a broker
that pauses after committing them, long enough to be fenced: nothing may be written twice.

The danger is the client, not the log: librdkafka drops its connection to a broker that
Metadata stops naming and sends what was in flight there again, elsewhere, without
counting a retry. The paused broker had committed those batches, so they would land twice.
The survivors keep naming a broker fenced for silence (leading nothing) for
`broker_fenced_linger_ms`, so the requests stay in flight until the paused broker wakes and
answers them (or they time out, which a producer with retries=0 reports as a failure).
With `BROKER_FENCED_LINGER_MS=0` this test stored 81 records for 41 sent: librdkafka logged
"Decommissioning this broker", failed the ProduceRequest with "MsgNotPersisted" and sent
it again to the survivor."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from cluster_support import (
    assert_unique_values,
    high_watermarks,
    metadata_brokers,
    metadata_view,
    read_log,
)
from confluent_kafka import KafkaError, Message, Producer
from e2e_harness import BrokerProcess, create_topic, free_port, wait_until

PARTITIONS = 16
"""Placement hashes the (random) topic id: with 4 partitions one broker led none of them in
1 run of 8. With 16, both brokers lead some but in 1 of 32,768."""
RECORDS = 40
CLUSTER = {
    "BROKER_SESSION_TIMEOUT_MS": 2000,
    "BROKER_HEARTBEAT_INTERVAL_MS": 200,
    "PRODUCE_COMMIT_INTERVAL_MS": 20,
}
SUSPECTED = {
    # Paused past the failover time but inside the session: suspected (its partitions
    # move), never fenced.
    "BROKER_SESSION_TIMEOUT_MS": 60_000,
    "BROKER_ZONE_FAILOVER_MS": 2000,
}
ACK_DELAY_MS = 5000


def _cluster(tmp_path: Path, env: dict[str, object]) -> tuple[BrokerProcess, BrokerProcess]:
    data = tmp_path / "data"
    healthy = BrokerProcess(
        data, env={**CLUSTER, **env, "BROKER_ID": 0}, port=free_port(), name="healthy"
    ).start()
    paused = BrokerProcess(
        data,
        env={**CLUSTER, **env, "BROKER_ID": 1, "FAULT_ACK_DELAY_MS": ACK_DELAY_MS},
        port=free_port(),
        name="paused",
    ).start()
    for broker in (healthy, paused):
        wait_until(
            lambda b=broker: metadata_brokers(b.bootstrap, "probe") == {0, 1},
            20,
            f"{broker.name} to name both brokers",
        )
    return healthy, paused


def _run(
    tmp_path: Path, topic: str, env: dict[str, object], moved_when: str
) -> tuple[int, int, list[str]]:
    """(records stored, records acknowledged, delivery errors); the partition moves when
    the healthy broker logs `moved_when`."""
    healthy, paused = _cluster(tmp_path, env)
    bootstrap = f"{healthy.bootstrap},{paused.bootstrap}"
    try:
        create_topic(healthy.bootstrap, topic, PARTITIONS)
        leaders = metadata_view(bootstrap, "probe", topic).leaders
        partition = min(p for p, leader in leaders.items() if leader == 1)
        other = min(p for p, leader in leaders.items() if leader == 0)
        acked: list[Message] = []
        errors: list[str] = []

        def delivered(err: KafkaError | None, msg: Message) -> None:
            (errors.append(str(err)) if err is not None else acked.append(msg))

        producer = Producer(
            {
                "bootstrap.servers": bootstrap,
                "enable.idempotence": False,
                "retries": 0,
                "linger.ms": 0,
                "acks": "all",
                "topic.metadata.refresh.interval.ms": 500,
                "request.timeout.ms": 30_000,
                "message.timeout.ms": 60_000,
            }
        )
        # A connection to the healthy broker too, so Metadata can come from there.
        producer.produce(topic, value=b"warm-up", partition=other, on_delivery=delivered)
        producer.flush(30)
        acked.clear()
        for i in range(RECORDS):
            producer.produce(
                topic, value=f"rec-{i:04d}".encode(), partition=partition, on_delivery=delivered
            )
            producer.poll(0)
        producer.poll(0)
        producer.flush(0)

        # Committed (visible through the other broker), not yet answered: pause the broker.
        wait_until(
            lambda: (
                high_watermarks(healthy.bootstrap, "hw", topic, PARTITIONS)[partition] >= RECORDS
            ),
            30,
            "the paused broker to commit every record",
        )
        paused.pause()
        try:
            wait_until(lambda: moved_when in healthy.log_text(), 30, moved_when)
            assert metadata_view(healthy.bootstrap, "probe", topic).leaders[partition] == 0
            # Let the producer refresh its Metadata from the survivor a few times.
            refreshed = time.monotonic() + 3
            while time.monotonic() < refreshed:
                producer.poll(0.1)
        finally:
            paused.resume()
        producer.flush(90)
        high = high_watermarks(healthy.bootstrap, "hw", topic, PARTITIONS)
        log = read_log(healthy.bootstrap, "reader", topic, high)
        stored = sum(len(records) for records in log.values())
        assert_unique_values(log)
        return stored, len(acked), errors
    finally:
        paused.close()
        healthy.close()


@pytest.mark.timeout(180)
@pytest.mark.parametrize(
    ("env", "moved_when"),
    [
        pytest.param({}, "fenced broker 1", id="fenced"),
        pytest.param(SUSPECTED, "broker 1 looks gone", id="suspected"),
    ],
)
def test_requests_in_flight_at_a_paused_broker_are_not_resent(
    tmp_path: Path, topic_name: str, env: dict[str, object], moved_when: str
) -> None:
    stored, acked, errors = _run(tmp_path, topic_name, env, moved_when)
    print(f"stored {stored}, acknowledged {acked}, failed {len(errors)}: {set(errors)}")
    assert stored == RECORDS + 1  # and the warm-up record
    assert acked + len(errors) == RECORDS
