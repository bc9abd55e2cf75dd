"""Transactions with real clients against a real broker: commit and abort, zombie fencing,
the transaction timeout, offsets sent inside a transaction, and the transaction admin APIs.

Each client library drives the APIs at its own versions (measured: confluent-kafka 2.16
InitProducerId v4, AddPartitionsToTxn v0, AddOffsetsToTxn v0, TxnOffsetCommit v3, EndTxn
v1; kafka-python 3.0.12 v4/v3/v3/v3/v3; aiokafka 0.14 v0 everywhere).
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Callable

import pytest
from cluster_support import metric_sum, scrape
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from e2e_fixtures import BrokerFactory
from e2e_harness import BrokerProcess, create_topic, kafka_admin, wait_until
from e2e_wire import WireClient
from txn_wire import UNSTABLE_OFFSET_COMMIT, offset_fetch

TXN_ENV = {"TRANSACTION_ABORT_TIMED_OUT_TRANSACTION_CLEANUP_INTERVAL_MS": 1000}
FENCED = -144
"""librdkafka's KafkaError._FENCED."""


def _producer(bootstrap: str, transactional_id: str, **extra: object) -> Producer:
    producer = Producer(
        {"bootstrap.servers": bootstrap, "transactional.id": transactional_id, "linger.ms": 0}
        | extra
    )
    producer.init_transactions(30)
    return producer


def _read_all(
    bootstrap: str,
    topic: str,
    partitions: int,
    isolation: str,
    until: Callable[[list[tuple[int, bytes]]], bool],
    timeout: float = 30.0,
) -> list[tuple[int, bytes]]:
    """(partition, value) of every record from the beginning, once `until` holds."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"reader-{uuid.uuid4().hex[:8]}",
            "enable.auto.commit": False,
            "isolation.level": isolation,
            "fetch.wait.max.ms": 100,
        }
    )
    consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    got: list[tuple[int, bytes]] = []
    try:

        def done() -> bool:
            for msg in consumer.consume(500, 0.2):
                if msg.error() is None:
                    got.append((msg.partition(), msg.value()))
            return until(got)

        wait_until(done, timeout, f"{isolation} records of {topic}", interval=0)
        return got
    finally:
        consumer.close()


def _has(*values: bytes) -> Callable[[list[tuple[int, bytes]]], bool]:
    return lambda got: set(values) <= {v for _, v in got}


def _txn_broker(broker_factory: BrokerFactory, **env: object) -> BrokerProcess:
    return broker_factory({**TXN_ENV, **env}, metrics=True)


# ------------------------------------------------------------------- commit and abort


def test_committed_records_only_for_read_committed(broker_factory: BrokerFactory) -> None:
    broker = _txn_broker(broker_factory)
    topic = "txn-basic"
    create_topic(broker.bootstrap, topic, 2)
    producer = _producer(broker.bootstrap, "basic")
    producer.begin_transaction()
    for i in range(4):
        producer.produce(topic, value=b"committed-%d" % i, partition=i % 2)
    producer.commit_transaction(30)
    producer.begin_transaction()
    for i in range(4):
        producer.produce(topic, value=b"aborted-%d" % i, partition=i % 2)
    producer.flush(30)
    producer.abort_transaction(30)
    producer.begin_transaction()
    producer.produce(topic, value=b"last", partition=0)
    producer.commit_transaction(30)

    committed = _read_all(broker.bootstrap, topic, 2, "read_committed", _has(b"last"))
    assert sorted(committed) == sorted(
        [(i % 2, b"committed-%d" % i) for i in range(4)] + [(0, b"last")]
    )
    everything = _read_all(broker.bootstrap, topic, 2, "read_uncommitted", _has(b"last"))
    assert {v for _, v in everything} == {v for _, v in committed} | {
        b"aborted-%d" % i for i in range(4)
    }
    samples = scrape(broker.metrics_port or 0)
    assert metric_sum(samples, "lakelog_transaction_commits_total") == 2
    assert metric_sum(samples, "lakelog_transaction_aborts_total", reason="client") == 1


def _kafka_python_transactions(bootstrap: str, topic: str) -> None:
    from kafka import KafkaProducer

    producer = KafkaProducer(bootstrap_servers=bootstrap, transactional_id="kp-txn")
    try:
        producer.init_transactions()
        producer.begin_transaction()
        producer.send(topic, value=b"kp-aborted", partition=0)
        producer.flush()
        producer.abort_transaction()
        producer.begin_transaction()
        producer.send(topic, value=b"kp-committed", partition=0)
        producer.commit_transaction()
    finally:
        producer.close()


def _aiokafka_transactions(bootstrap: str, topic: str) -> None:
    from aiokafka import AIOKafkaProducer

    async def run() -> None:
        producer = AIOKafkaProducer(bootstrap_servers=bootstrap, transactional_id="aio-txn")
        await producer.start()
        try:
            await producer.begin_transaction()
            await producer.send_and_wait(topic, value=b"aio-aborted", partition=0)
            await producer.abort_transaction()
            async with producer.transaction():
                await producer.send_and_wait(topic, value=b"aio-committed", partition=0)
        finally:
            await producer.stop()

    asyncio.run(run())


@pytest.mark.parametrize(
    ("client", "prefix"),
    [(_kafka_python_transactions, b"kp"), (_aiokafka_transactions, b"aio")],
    ids=["kafka-python", "aiokafka"],
)
def test_other_clients_commit_and_abort(
    broker_factory: BrokerFactory, client: Callable[[str, str], None], prefix: bytes
) -> None:
    broker = _txn_broker(broker_factory)
    topic = "txn-clients"
    create_topic(broker.bootstrap, topic, 1)
    client(broker.bootstrap, topic)
    committed = _read_all(
        broker.bootstrap, topic, 1, "read_committed", _has(prefix + b"-committed")
    )
    assert committed == [(0, prefix + b"-committed")]
    everything = _read_all(
        broker.bootstrap, topic, 1, "read_uncommitted", _has(prefix + b"-committed")
    )
    assert everything == [(0, prefix + b"-aborted"), (0, prefix + b"-committed")]


# ------------------------------------------------------------------- fencing


def test_second_producer_fences_the_first(broker_factory: BrokerFactory) -> None:
    broker = _txn_broker(broker_factory)
    topic = "txn-zombie"
    create_topic(broker.bootstrap, topic, 1)
    zombie = _producer(broker.bootstrap, "zombie")
    zombie.begin_transaction()
    zombie.produce(topic, value=b"before-fence", partition=0)
    zombie.flush(30)

    successor = _producer(broker.bootstrap, "zombie")  # fences and aborts the zombie's txn
    with pytest.raises(KafkaException) as sent:
        zombie.produce(topic, value=b"after-fence", partition=0)
        zombie.flush(30)
    assert sent.value.args[0].code() == FENCED
    with pytest.raises(KafkaException) as committed:
        zombie.commit_transaction(30)
    assert committed.value.args[0].code() == FENCED and committed.value.args[0].fatal()

    successor.begin_transaction()
    successor.produce(topic, value=b"successor", partition=0)
    successor.commit_transaction(30)
    seen = _read_all(broker.bootstrap, topic, 1, "read_committed", _has(b"successor"))
    assert seen == [(0, b"successor")]
    everything = _read_all(broker.bootstrap, topic, 1, "read_uncommitted", _has(b"successor"))
    assert b"after-fence" not in {v for _, v in everything}
    assert metric_sum(scrape(broker.metrics_port or 0), "lakelog_txn_rejected_batches_total") >= 1


# ------------------------------------------------------------------- timeout


def test_abandoned_transaction_is_aborted_after_its_timeout(broker_factory: BrokerFactory) -> None:
    broker = _txn_broker(broker_factory)
    topic = "txn-timeout"
    create_topic(broker.bootstrap, topic, 1)
    timeout_ms = 6000
    abandoned = _producer(broker.bootstrap, "abandoned", **{"transaction.timeout.ms": timeout_ms})
    abandoned.begin_transaction()
    abandoned.produce(topic, value=b"abandoned", partition=0)
    abandoned.flush(30)
    began = time.monotonic()

    other = _producer(broker.bootstrap, "other")
    other.begin_transaction()
    other.produce(topic, value=b"other", partition=0)
    other.commit_transaction(30)

    def lso_lag() -> float:
        samples = scrape(broker.metrics_port or 0)
        return metric_sum(samples, "lakelog_lso_lag", topic=topic, partition="0")

    # Open: the committed record waits behind the abandoned transaction's first offset.
    assert wait_until(lambda: lso_lag() > 0, 5, "LSO lag while the transaction is open")
    assert metric_sum(scrape(broker.metrics_port or 0), "lakelog_transactions_open") == 1

    seen = _read_all(broker.bootstrap, topic, 1, "read_committed", _has(b"other"), timeout=30)
    waited = time.monotonic() - began
    assert seen == [(0, b"other")]
    assert waited >= timeout_ms / 1000 - 1.0, f"LSO moved after {waited:.1f}s"

    with kafka_admin(broker.bootstrap) as admin:
        described = admin.describe_transactions(["abandoned"])["abandoned"]  # type: ignore[attr-defined]
    assert described.state.value == "CompleteAbort"
    assert described.producer_epoch == 1  # bumped: the abandoning producer is fenced
    with pytest.raises(KafkaException) as ended:
        abandoned.commit_transaction(30)
    assert ended.value.args[0].code() == FENCED

    samples = scrape(broker.metrics_port or 0)
    assert metric_sum(samples, "lakelog_transaction_aborts_total", reason="timeout") == 1
    assert metric_sum(samples, "lakelog_transactions_open") == 0
    assert wait_until(lambda: lso_lag() == 0, 5, "LSO lag gone after the abort") is not None


# ------------------------------------------------------------------- offsets


def test_offsets_sent_in_a_transaction_count_only_on_commit(
    broker_factory: BrokerFactory,
) -> None:
    broker = _txn_broker(broker_factory)
    topic, group = "txn-offsets", "txn-offsets-group"
    create_topic(broker.bootstrap, topic, 1)
    seed = Producer({"bootstrap.servers": broker.bootstrap})
    for i in range(10):
        seed.produce(topic, value=b"in-%d" % i, partition=0)
    assert seed.flush(30) == 0

    consumer = Consumer(
        {
            "bootstrap.servers": broker.bootstrap,
            "group.id": group,
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "isolation.level": "read_committed",
        }
    )
    consumer.subscribe([topic])
    wait_until(
        lambda: any(m.error() is None for m in consumer.consume(10, 0.5)), 30, "group joined"
    )
    producer = _producer(broker.bootstrap, "offsets")

    try:
        producer.begin_transaction()
        offsets = [TopicPartition(topic, 0, 4)]
        producer.send_offsets_to_transaction(offsets, consumer.consumer_group_metadata(), 30)
        with WireClient(broker.port) as wire:
            # Staged, not committed; a consumer that asks for stable offsets must wait.
            assert offset_fetch(wire, group, topic, [0], False) == {0: (0, -1)}
            assert offset_fetch(wire, group, topic, [0], True) == {0: (UNSTABLE_OFFSET_COMMIT, -1)}
            producer.abort_transaction(30)
            assert offset_fetch(wire, group, topic, [0], True) == {0: (0, -1)}

            producer.begin_transaction()
            offsets = [TopicPartition(topic, 0, 7)]
            producer.send_offsets_to_transaction(offsets, consumer.consumer_group_metadata(), 30)
            assert offset_fetch(wire, group, topic, [0], False) == {0: (0, -1)}
            producer.commit_transaction(30)
            assert offset_fetch(wire, group, topic, [0], True) == {0: (0, 7)}
        assert consumer.committed([TopicPartition(topic, 0)], 10)[0].offset == 7
    finally:
        consumer.close()


# ------------------------------------------------------------------- admin


def test_describe_and_list_transactions_and_producers(broker_factory: BrokerFactory) -> None:
    from kafka.errors import TransactionalIdNotFoundError
    from kafka.structs import TopicPartition as KafkaTopicPartition

    broker = _txn_broker(broker_factory)
    topic = "txn-admin"
    create_topic(broker.bootstrap, topic, 2)
    open_txn = _producer(broker.bootstrap, "admin-open", **{"transaction.timeout.ms": 45_000})
    open_txn.begin_transaction()
    open_txn.produce(topic, value=b"x", partition=1)
    open_txn.flush(30)
    done = _producer(broker.bootstrap, "admin-done")
    done.begin_transaction()
    done.produce(topic, value=b"y", partition=0)
    done.commit_transaction(30)

    with kafka_admin(broker.bootstrap) as admin:
        described = admin.describe_transactions(["admin-open", "admin-done"])  # type: ignore[attr-defined]
        ongoing, finished = described["admin-open"], described["admin-done"]
        assert ongoing.state.value == "Ongoing"
        assert ongoing.transaction_timeout_ms == 45_000
        assert ongoing.topic_partitions == {KafkaTopicPartition(topic, 1)}
        assert 0 < time.time() * 1000 - ongoing.transaction_start_time_ms < 60_000
        assert finished.state.value == "CompleteCommit"
        with pytest.raises(TransactionalIdNotFoundError):
            admin.describe_transactions(["never-used"])  # type: ignore[attr-defined]

        listed = admin.list_transactions()  # type: ignore[attr-defined]
        by_id = {t.transactional_id: t for rows in listed.values() for t in rows}
        assert by_id["admin-open"].state.value == "Ongoing"
        assert by_id["admin-done"].state.value == "CompleteCommit"
        assert by_id["admin-open"].producer_id == ongoing.producer_id
        only_ongoing = admin.list_transactions(state_filters=["Ongoing"])  # type: ignore[attr-defined]
        assert [t.transactional_id for rows in only_ongoing.values() for t in rows] == [
            "admin-open"
        ]
        by_pattern = admin.list_transactions(transactional_id_pattern="admin-d.*")  # type: ignore[attr-defined]
        assert [t.transactional_id for rows in by_pattern.values() for t in rows] == ["admin-done"]
        long_running = admin.list_transactions(duration_filter_ms=3_600_000)  # type: ignore[attr-defined]
        assert [t for rows in long_running.values() for t in rows] == []

        producers = admin.describe_producers(  # type: ignore[attr-defined]
            [KafkaTopicPartition(topic, 0), KafkaTopicPartition(topic, 1)]
        )
        active = producers[KafkaTopicPartition(topic, 1)].active_producers
        assert [(p.producer_id, p.current_transaction_start_offset) for p in active] == [
            (ongoing.producer_id, 0)
        ]
        finished_p0 = producers[KafkaTopicPartition(topic, 0)].active_producers
        assert [(p.producer_id, p.current_transaction_start_offset) for p in finished_p0] == [
            (finished.producer_id, -1)
        ]
    open_txn.abort_transaction(30)
