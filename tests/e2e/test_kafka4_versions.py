"""Kafka 4.1's versions of the data APIs: Produce v13 and Fetch v13-18 name topics by id
(KIP-516), ListOffsets v9-10 (KIP-1005's LATEST_TIERED_TIMESTAMP). kafka-python picks the
highest version both sides speak, so its producer, consumer and offset lookups run on them,
and it infers the broker's version from them. Raw frames cover what clients never send:
unknown and null topic ids, names and ids mixed with unknown topics.

Error codes: UNKNOWN_TOPIC_OR_PARTITION=3, UNKNOWN_TOPIC_ID=100."""

from __future__ import annotations

import datetime
import time
import uuid
from typing import Any

from cluster_support import metric_sum, scrape
from confluent_kafka import Consumer
from confluent_kafka import TopicPartition as CTopicPartition
from e2e_harness import BrokerProcess, create_topic, now_ms
from e2e_wire import WireClient, parse_records, record_batch, request_class
from kafka import KafkaConsumer, KafkaProducer, TopicPartition

UNKNOWN_TOPIC_OR_PARTITION = 3
UNKNOWN_TOPIC_ID = 100


def _topic_id(port: int, name: str) -> uuid.UUID:
    m = request_class(3, 12)
    with WireClient(port) as c:
        response = c.request(
            3,
            12,
            m.MetadataRequest(
                topics=(m.MetadataRequestTopic(topic_id=None, name=m.TopicName(name)),),
                allow_auto_topic_creation=False,
                include_topic_authorized_operations=False,
            ),
        )
    (topic,) = response.topics
    assert topic.error_code == 0 and topic.topic_id is not None
    return topic.topic_id


def _produce_v13(topics: dict[uuid.UUID | None, dict[int, bytes]]) -> Any:
    m = request_class(0, 13)
    return m.ProduceRequest(
        transactional_id=None,
        acks=m.i16(-1),
        timeout=datetime.timedelta(seconds=10),
        topic_data=tuple(
            m.TopicProduceData(
                topic_id=topic_id,
                partition_data=tuple(
                    m.PartitionProduceData(index=m.i32(p), records=records)
                    for p, records in parts.items()
                ),
            )
            for topic_id, parts in topics.items()
        ),
    )


def _fetch(version: int, topics: dict[uuid.UUID, list[int]]) -> Any:
    m = request_class(1, version)
    return m.FetchRequest(
        max_wait=datetime.timedelta(milliseconds=0),
        min_bytes=m.i32(0),
        max_bytes=m.i32(1 << 20),
        isolation_level=m.i8(0),
        session_id=m.i32(0),
        session_epoch=m.i32(-1),
        topics=tuple(
            m.FetchTopic(
                topic_id=topic_id,
                partitions=tuple(
                    m.FetchPartition(
                        partition=m.i32(p),
                        fetch_offset=m.i64(0),
                        partition_max_bytes=m.i32(1 << 20),
                    )
                    for p in parts
                ),
            )
            for topic_id, parts in topics.items()
        ),
        forgotten_topics_data=(),
        rack_id="",
    )


def test_clients_on_the_new_versions(broker_factory: Any, topic_name: str) -> None:
    """kafka-python infers Kafka 4.1 and produces; librdkafka consumes with Fetch v13+
    (topic ids); kafka-python's offset lookups still answer."""
    broker: BrokerProcess = broker_factory(metrics=True)
    create_topic(broker.bootstrap, topic_name, partitions=2)
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap, acks="all", linger_ms=5)
    try:
        assert producer.config["api_version"] >= (4, 1)  # inferred from ApiVersions
        sent = [
            producer.send(topic_name, key=b"k%d" % i, value=b"v%d" % i, partition=i % 2)
            for i in range(200)
        ]
        offsets = [f.get(timeout=30).offset for f in sent]
    finally:
        producer.close()
    assert offsets[0::2] == list(range(100)) and offsets[1::2] == list(range(100))

    consumer = Consumer(
        {"bootstrap.servers": broker.bootstrap, "group.id": "unused", "log_level": 3}
    )
    got: list[tuple[int, int, bytes]] = []
    try:
        consumer.assign([CTopicPartition(topic_name, p, 0) for p in (0, 1)])
        deadline = time.monotonic() + 30
        while len(got) < 200 and time.monotonic() < deadline:
            for m in consumer.consume(200, timeout=0.5):
                assert m.error() is None, m.error()
                got.append((m.partition(), m.offset(), m.value()))
    finally:
        consumer.close()
    assert sorted(got) == sorted((i % 2, i // 2, b"v%d" % i) for i in range(200))
    assert [g[1] for g in got if g[0] == 0] == list(range(100))  # in order

    lookup = KafkaConsumer(bootstrap_servers=broker.bootstrap)
    try:
        parts = [TopicPartition(topic_name, p) for p in (0, 1)]
        assert lookup.end_offsets(parts) == {parts[0]: 100, parts[1]: 100}
        assert lookup.offsets_for_times({parts[0]: 0})[parts[0]].offset == 0
    finally:
        lookup.close()

    samples = scrape(broker.metrics_port or 0)
    by_id = sum(
        metric_sum(samples, "lakelog_requests_total", api="fetch", version=str(v))
        for v in range(13, 19)
    )
    assert by_id > 0  # librdkafka 2.16 fetches by topic id


def test_produce_and_fetch_by_topic_id(shared_broker: BrokerProcess, topic_name: str) -> None:
    create_topic(shared_broker.bootstrap, topic_name, partitions=2)
    known = _topic_id(shared_broker.port, topic_name)
    stranger = uuid.uuid4()
    values = [b"a", b"b", b"c"]
    with WireClient(shared_broker.port) as c:
        response = c.request(
            0,
            13,
            _produce_v13(
                {
                    known: {0: record_batch(values, now_ms()), 7: record_batch([b"x"], now_ms())},
                    stranger: {0: record_batch([b"y"], now_ms())},
                    None: {0: record_batch([b"z"], now_ms())},
                }
            ),
        )
        answers = {
            (t.topic_id, p.index): (p.error_code, p.base_offset)
            for t in response.responses
            for p in t.partition_responses
        }
        assert answers == {
            (known, 0): (0, 0),
            (known, 7): (UNKNOWN_TOPIC_OR_PARTITION, -1),
            (stranger, 0): (UNKNOWN_TOPIC_ID, -1),
            (None, 0): (UNKNOWN_TOPIC_ID, -1),
        }
        for version in (13, 15, 16, 17, 18):
            fetched = c.request(1, version, _fetch(version, {known: [0, 1], stranger: [0]}))
            by_topic = {t.topic_id: t.partitions for t in fetched.responses}
            p0, p1 = by_topic[known]
            assert (p0.error_code, p0.high_watermark, p1.high_watermark) == (0, 3, 0)
            assert [r.value for r in parse_records(p0.records)] == values
            (s0,) = by_topic[stranger]
            assert s0.error_code == UNKNOWN_TOPIC_ID


def test_list_offsets_latest_tiered_is_minus_one(
    shared_broker: BrokerProcess, topic_name: str
) -> None:
    """Nothing is ever tiered: -5 answers offset -1 (as Kafka for a topic without remote
    storage) on v9+, and stays INVALID_REQUEST (42) on older versions."""
    create_topic(shared_broker.bootstrap, topic_name, partitions=1)
    with WireClient(shared_broker.port) as c:
        for version, expected in ((10, (0, -1)), (9, (0, -1)), (8, (42, -1))):
            m = request_class(2, version)
            fields: dict[str, Any] = {
                "replica_id": m.BrokerId(-1),
                "isolation_level": m.i8(0),
                "topics": (
                    m.ListOffsetsTopic(
                        name=m.TopicName(topic_name),
                        partitions=(
                            m.ListOffsetsPartition(partition_index=m.i32(0), timestamp=m.i64(-5)),
                        ),
                    ),
                ),
            }
            if version >= 10:
                fields["timeout"] = datetime.timedelta(seconds=5)
            request = m.ListOffsetsRequest(**fields)
            response = c.request(2, version, request)
            (p,) = response.topics[0].partitions
            assert (p.error_code, p.offset) == expected, version
