"""Retention and DeleteRecords: records below the new log start vanish from fetch, and the
WAL objects that no live batch points into are deleted from object storage, while objects
still holding live batches stay.

Each produce phase is one hand-built batch in one Produce request, so each phase lands in
an object of its own and the test knows exactly which objects must go.
"""

from __future__ import annotations

import time
from typing import Any

import pytest
from e2e_fixtures import BrokerFactory
from e2e_harness import BrokerProcess, create_topic, kafka_admin, now_ms, wait_until
from e2e_wire import (
    WireClient,
    fetch_v4,
    list_offsets_v1,
    produce_errors,
    produce_v7,
    record_batch,
)

FAST_BACKGROUND = {
    "RETENTION_CHECK_INTERVAL_MS": 200,
    "FILE_DELETE_GRACE_MS": 100,
    "PRODUCE_COMMIT_INTERVAL_MS": 50,
    # The object path: each produce phase must make WAL objects of its own, whose deletion
    # the tests watch (inline batches are not objects until moved).
    "PRODUCE_INLINE": False,
}
OFFSET_OUT_OF_RANGE = 1
EARLIEST, LATEST = -2, -1

pytestmark = pytest.mark.timeout(120)


def produce_phase(
    broker: BrokerProcess, topic: str, tag: str, count: int, base_timestamp: int
) -> tuple[int, set[str], list[bytes]]:
    """One batch of `count` records in one request. Returns its base offset, the WAL
    objects that appeared meanwhile, and the values."""
    values = [f"{tag}-{i}".encode() for i in range(count)]
    before = broker.wal_objects()
    with WireClient(broker.port) as client:
        response = client.request(
            0, 7, produce_v7({topic: {0: record_batch(values, base_timestamp)}}, acks=-1)
        )
    error, base = produce_errors(response)[topic, 0]
    assert error == 0, f"produce {tag}: error {error}"
    created = broker.wal_objects() - before
    assert created, f"produce {tag} was acknowledged but no new object is in objects/wal/"
    return base, created, values


def list_offset(broker: BrokerProcess, topic: str, timestamp: int) -> int:
    with WireClient(broker.port) as client:
        response = client.request(2, 1, list_offsets_v1(topic, 0, timestamp))
    (part,) = response.topics[0].partitions
    assert int(part.error_code) == 0, part.error_code
    return int(part.offset)


def fetch_error(broker: BrokerProcess, topic: str, offset: int) -> int:
    with WireClient(broker.port) as client:
        response = client.request(1, 4, fetch_v4(topic, 0, offset))
    return int(response.responses[0].partitions[0].error_code)


def consume_all(bootstrap: str, topic: str, expected: int) -> list[tuple[int, bytes]]:
    """(offset, value) of every record kafka-python reads from the beginning."""
    from kafka import KafkaConsumer, TopicPartition

    consumer = KafkaConsumer(
        bootstrap_servers=bootstrap,
        group_id=None,
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        fetch_max_wait_ms=100,
    )
    out: list[tuple[int, bytes]] = []
    try:
        tp = TopicPartition(topic, 0)
        consumer.assign([tp])
        consumer.seek_to_beginning(tp)
        deadline = time.monotonic() + 30
        while len(out) < expected and time.monotonic() < deadline:
            for records in consumer.poll(timeout_ms=300).values():
                out.extend((r.offset, r.value) for r in records)
        # One more short poll: nothing beyond `expected` may show up.
        for records in consumer.poll(timeout_ms=300).values():
            out.extend((r.offset, r.value) for r in records)
    finally:
        consumer.close()
    return out


def test_time_retention_drops_old_records_and_their_objects(
    broker_factory: BrokerFactory, topic_name: str
) -> None:
    broker = broker_factory(env=FAST_BACKGROUND)
    retention_ms = 30_000
    create_topic(broker.bootstrap, topic_name, 1, {"retention.ms": str(retention_ms)})

    # Old records expire ~4 s after the produce; new ones not before the test ends.
    old_base, old_objects, _ = produce_phase(
        broker, topic_name, "old", 300, now_ms() - retention_ms + 4_000
    )
    new_base, new_objects, new_values = produce_phase(broker, topic_name, "new", 300, now_ms())
    assert (old_base, new_base) == (0, 300)
    assert not old_objects & new_objects

    wait_until(
        lambda: list_offset(broker, topic_name, EARLIEST) == 300,
        30,
        "retention to move the log start to 300",
    )
    assert list_offset(broker, topic_name, LATEST) == 600
    assert fetch_error(broker, topic_name, 0) == OFFSET_OUT_OF_RANGE
    got = consume_all(broker.bootstrap, topic_name, 300)
    assert got == [(300 + i, v) for i, v in enumerate(new_values)]

    wait_until(
        lambda: not (old_objects & broker.wal_objects()),
        30,
        f"expired objects {sorted(old_objects)} to be deleted",
    )
    assert new_objects <= broker.wal_objects(), "an object with live batches was deleted"
    assert consume_all(broker.bootstrap, topic_name, 300) == got


def test_delete_records(broker_factory: BrokerFactory, topic_name: str) -> None:
    from kafka import TopicPartition
    from kafka.errors import OffsetOutOfRangeError

    broker = broker_factory(env=FAST_BACKGROUND)
    create_topic(broker.bootstrap, topic_name, 1)
    phases: list[tuple[int, set[str], list[bytes]]] = [
        produce_phase(broker, topic_name, tag, 200, now_ms()) for tag in ("p1", "p2", "p3")
    ]
    assert [base for base, _, _ in phases] == [0, 200, 400]
    (_, objects1, _), (_, objects2, values2), (_, objects3, values3) = phases

    tp = TopicPartition(topic_name, 0)
    with kafka_admin(broker.bootstrap) as admin:
        result: Any = admin.delete_records({tp: 250})  # type: ignore[attr-defined]
        assert result[tp]["low_watermark"] == 250, result
        # Above the high watermark: OFFSET_OUT_OF_RANGE, and nothing changes.
        with pytest.raises(OffsetOutOfRangeError):
            admin.delete_records({tp: 601})  # type: ignore[attr-defined]
        # Never lowers the log start.
        lower: Any = admin.delete_records({tp: 100})  # type: ignore[attr-defined]
        assert lower[tp]["low_watermark"] == 250, lower

    assert list_offset(broker, topic_name, EARLIEST) == 250
    assert list_offset(broker, topic_name, LATEST) == 600
    assert fetch_error(broker, topic_name, 100) == OFFSET_OUT_OF_RANGE
    assert fetch_error(broker, topic_name, 250) == 0
    want = [(200 + i, v) for i, v in enumerate(values2)][50:]
    want += [(400 + i, v) for i, v in enumerate(values3)]
    assert consume_all(broker.bootstrap, topic_name, 350) == want

    wait_until(
        lambda: not (objects1 & broker.wal_objects()),
        30,
        f"objects wholly below the log start {sorted(objects1)} to be deleted",
    )
    on_disk = broker.wal_objects()
    assert objects2 <= on_disk, "the object holding offset 250 was deleted"
    assert objects3 <= on_disk
    assert consume_all(broker.bootstrap, topic_name, 350) == want
