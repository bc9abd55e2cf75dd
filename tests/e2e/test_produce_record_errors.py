"""Produce record_errors (KIP-467) over the wire: a compacted topic refuses the records
without a key as Kafka's LogValidator does. The partition fails with INVALID_RECORD; from
Produce v8 the response lists each keyless record's index in its batch with the message
"Compacted topic cannot accept message without key in topic partition <topic>-<partition>",
and error_message summarises them ("... due to N record errors in total, and only showing
the first three errors at most: [RecordError(batchIndex=i, message='...'), ...]"). Nothing
of the refused batch is stored; other partitions of the request are unaffected."""

from __future__ import annotations

import datetime
from typing import Any

import pytest
from e2e_harness import BrokerProcess, create_topic, now_ms
from e2e_wire import (
    WireClient,
    fetch_v4,
    parse_batch_header,
    parse_records,
    record_batch,
    request_class,
)

pytestmark = pytest.mark.timeout(120)

NONE = 0
INVALID_RECORD = 87


def produce_request(version: int, topic: str, parts: dict[int, bytes]) -> Any:
    m = request_class(0, version)
    return m.ProduceRequest(
        transactional_id=None,
        acks=m.i16(-1),
        timeout=datetime.timedelta(seconds=10),
        topic_data=(
            m.TopicProduceData(
                name=m.TopicName(topic),
                partition_data=tuple(
                    m.PartitionProduceData(index=m.i32(p), records=records)
                    for p, records in parts.items()
                ),
            ),
        ),
    )


def produce(broker: BrokerProcess, version: int, topic: str, parts: dict[int, bytes]) -> Any:
    """{partition: PartitionProduceResponse}."""
    with WireClient(broker.port) as client:
        response = client.request(0, version, produce_request(version, topic, parts))
    (answer,) = response.responses
    return {int(p.index): p for p in answer.partition_responses}


def expected_message(topic: str, partition: int, indexes: list[int]) -> str:
    why = (
        f"Compacted topic cannot accept message without key in topic partition {topic}-{partition}"
    )
    shown = ", ".join(f"RecordError(batchIndex={i}, message='{why}')" for i in indexes[:3])
    return (
        f"One or more records have been rejected due to {len(indexes)} record errors in total,"
        f" and only showing the first three errors at most: [{shown}]"
    )


@pytest.mark.parametrize("version", [8, 9, 10])
def test_keyless_records_are_listed_in_record_errors(
    shared_broker: BrokerProcess, topic_name: str, version: int
) -> None:
    create_topic(shared_broker.bootstrap, topic_name, 2, {"cleanup.policy": "compact"})
    keys: list[bytes | None] = [b"a", None, b"", None, b"b", None, None]
    bad = record_batch([b"v%d" % i for i in range(len(keys))], now_ms(), keys=keys)
    good = record_batch([b"kept"], now_ms(), keys=[b"k"])
    got = produce(shared_broker, version, topic_name, {0: bad, 1: good})

    refused = got[0]
    assert int(refused.error_code) == INVALID_RECORD
    assert int(refused.base_offset) == -1
    why = f"Compacted topic cannot accept message without key in topic partition {topic_name}-0"
    assert [(int(e.batch_index), e.batch_index_error_message) for e in refused.record_errors] == [
        (1, why),
        (3, why),
        (5, why),
        (6, why),
    ]
    assert refused.error_message == expected_message(topic_name, 0, [1, 3, 5, 6])
    # The other partition of the same request is stored.
    assert (int(got[1].error_code), int(got[1].base_offset)) == (NONE, 0)
    assert list(got[1].record_errors) == []
    assert got[1].error_message is None

    # Nothing of the refused batch was stored: the next keyed batch gets offset 0.
    keyed = record_batch([b"x", b"y"], now_ms(), keys=[b"x", b"y"])
    again = produce(shared_broker, version, topic_name, {0: keyed})[0]
    assert (int(again.error_code), int(again.base_offset)) == (NONE, 0)
    with WireClient(shared_broker.port) as client:
        fetched = client.request(1, 4, fetch_v4(topic_name, 0, 0))
    data = bytes(fetched.responses[0].partitions[0].records or b"")
    assert parse_batch_header(data).size == len(data)
    assert [r.key for r in parse_records(data)] == [b"x", b"y"]


def test_before_v8_only_the_error_code(shared_broker: BrokerProcess, topic_name: str) -> None:
    create_topic(shared_broker.bootstrap, topic_name, 1, {"cleanup.policy": "compact,delete"})
    bad = record_batch([b"1", b"2"], now_ms(), keys=[None, b"k"])
    refused = produce(shared_broker, 7, topic_name, {0: bad})[0]
    assert int(refused.error_code) == INVALID_RECORD
    assert not hasattr(refused, "record_errors")


def test_delete_policy_takes_keyless_records(shared_broker: BrokerProcess, topic_name: str) -> None:
    create_topic(shared_broker.bootstrap, topic_name, 1)
    batch = record_batch([b"1", b"2"], now_ms(), keys=[None, None])
    stored = produce(shared_broker, 10, topic_name, {0: batch})[0]
    assert (int(stored.error_code), int(stored.base_offset)) == (NONE, 0)
    assert list(stored.record_errors) == []


def test_confluent_kafka_fails_keyless_records_as_invalid(
    shared_broker: BrokerProcess, topic_name: str
) -> None:
    """librdkafka sends keyed and keyless records in one batch. With record_errors it
    reports INVALID_RECORD for the keyless records only; their keyed neighbours fail with
    its local _INVALID_DIFFERENT_RECORD (Kafka stores none of a refused batch).

    The four records must travel as one batch. librdkafka sends a batch when it holds
    `batch.num.messages` records or its linger ends, so the batch waits for the fourth record
    however long the test thread stalls (a 200 ms linger split it on a loaded CI machine), and
    the topic's metadata is fetched first: records produced before it is known sit in
    librdkafka's unassigned queue and can leave it one batch each."""
    from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition

    create_topic(shared_broker.bootstrap, topic_name, 1, {"cleanup.policy": "compact"})
    producer = Producer(
        {
            "bootstrap.servers": shared_broker.bootstrap,
            "linger.ms": 20000,
            "batch.num.messages": 4,
            "retries": 0,
        }
    )
    producer.list_topics(topic_name, timeout=30)
    reports: list[tuple[bytes | None, int | None]] = []

    def report(err: KafkaError | None, msg: Any) -> None:
        reports.append((msg.key(), None if err is None else err.code()))

    for key in (b"a", None, b"b", None):
        producer.produce(topic_name, key=key, value=b"v", partition=0, on_delivery=report)
    assert producer.flush(30) == 0
    assert reports == [
        (b"a", KafkaError._INVALID_DIFFERENT_RECORD),
        (None, KafkaError.INVALID_RECORD),
        (b"b", KafkaError._INVALID_DIFFERENT_RECORD),
        (None, KafkaError.INVALID_RECORD),
    ]
    consumer = Consumer({"bootstrap.servers": shared_broker.bootstrap, "group.id": topic_name})
    try:
        assert consumer.get_watermark_offsets(TopicPartition(topic_name, 0), timeout=30) == (0, 0)
    finally:
        consumer.close()
