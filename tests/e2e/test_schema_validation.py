"""Produce-time schema validation (`confluent.value.schema.validation` and
`confluent.key.schema.validation`): a record whose value (key) is not in the wire format
with an id registered under `<topic>-value` (`-key`) is refused with INVALID_RECORD and a
record error naming why; good records are stored. Through the wire (record_errors),
confluent-kafka and kafka-python."""

from __future__ import annotations

import datetime
import json
import uuid
from typing import Any

import pytest
from confluent_kafka import KafkaError, Producer
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroSerializer
from confluent_kafka.serialization import MessageField, SerializationContext
from e2e_fixtures import BrokerFactory
from e2e_harness import BrokerProcess, create_topic, now_ms
from e2e_wire import WireClient, record_batch, request_class
from registry_support import consume

pytestmark = pytest.mark.timeout(180)

INVALID_RECORD = 87
SCHEMA = json.dumps({"type": "record", "name": "V", "fields": [{"name": "n", "type": "int"}]})


@pytest.fixture
def broker(broker_factory: BrokerFactory) -> BrokerProcess:
    return broker_factory(registry=True)


def setup(broker: BrokerProcess, configs: dict[str, str]) -> tuple[str, Any]:
    topic = f"sv-{uuid.uuid4().hex[:8]}"
    create_topic(broker.bootstrap, topic, 1, configs)
    registry = SchemaRegistryClient({"url": broker.registry_url})
    serializer = AvroSerializer(registry, SCHEMA)
    return topic, serializer


def wire_produce(broker: BrokerProcess, topic: str, batch: bytes) -> Any:
    m = request_class(0, 9)
    request = m.ProduceRequest(
        transactional_id=None,
        acks=m.i16(-1),
        timeout=datetime.timedelta(seconds=10),
        topic_data=(
            m.TopicProduceData(
                name=m.TopicName(topic),
                partition_data=(m.PartitionProduceData(index=m.i32(0), records=batch),),
            ),
        ),
    )
    with WireClient(broker.port) as client:
        response = client.request(0, 9, request)
    return response.responses[0].partition_responses[0]


def test_wire_record_errors(broker: BrokerProcess) -> None:
    topic, serializer = setup(broker, {"confluent.value.schema.validation": "true"})
    good = serializer({"n": 1}, SerializationContext(topic, MessageField.VALUE))
    unknown = b"\x00" + (424242).to_bytes(4, "big") + good[5:]
    answer = wire_produce(broker, topic, record_batch([good, b"plain", unknown, None], now_ms()))
    assert int(answer.error_code) == INVALID_RECORD
    errors = [(int(e.batch_index), e.batch_index_error_message) for e in answer.record_errors]
    assert [i for i, _ in errors] == [1, 2, 3]
    assert "wire format" in errors[0][1]
    assert f"schema id 424242 is not registered under subject {topic}-value" in errors[1][1]
    assert (
        "4 record errors" not in answer.error_message and "3 record errors" in answer.error_message
    )
    stored = wire_produce(broker, topic, record_batch([good, good], now_ms()))
    assert (int(stored.error_code), int(stored.base_offset)) == (0, 0)


def test_confluent_kafka(broker: BrokerProcess) -> None:
    topic, serializer = setup(
        broker,
        {"confluent.value.schema.validation": "true", "confluent.key.schema.validation": "false"},
    )
    good = serializer({"n": 7}, SerializationContext(topic, MessageField.VALUE))
    producer = Producer({"bootstrap.servers": broker.bootstrap, "retries": 0, "linger.ms": 0})
    reports: list[tuple[bytes, Any]] = []

    def report(err: Any, msg: Any) -> None:
        reports.append((msg.value(), None if err is None else err.code()))

    for value in (good, b"not framed", b"\x00\x00\x0f\x42\x40rest"):
        producer.produce(topic, value=value, key=b"any key", on_delivery=report)
        producer.flush(30)
    assert reports == [
        (good, None),
        (b"not framed", KafkaError.INVALID_RECORD),
        (b"\x00\x00\x0f\x42\x40rest", KafkaError.INVALID_RECORD),
    ]
    assert consume(broker.bootstrap, topic, 1, lambda value, ctx: value) == [good]


def test_kafka_python(broker: BrokerProcess) -> None:
    from kafka import KafkaProducer
    from kafka.errors import InvalidRecordError

    topic, serializer = setup(broker, {"confluent.key.schema.validation": "true"})
    key = serializer({"n": 1}, SerializationContext(topic, MessageField.KEY))
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap, retries=0)
    try:
        # The key's schema was registered under <topic>-key: accepted, whatever the value.
        producer.send(topic, key=key, value=b"free text").get(timeout=30)
        with pytest.raises(InvalidRecordError):
            producer.send(topic, key=b"plain key", value=b"v").get(timeout=30)
    finally:
        producer.close()


def test_off_by_default(broker: BrokerProcess) -> None:
    topic = f"sv-{uuid.uuid4().hex[:8]}"
    create_topic(broker.bootstrap, topic, 1)
    answer = wire_produce(broker, topic, record_batch([b"anything"], now_ms()))
    assert int(answer.error_code) == 0


def test_record_name_strategies(broker: BrokerProcess) -> None:
    """RecordNameStrategy: the value's id must be registered under the record's full name
    (as confluent-kafka's serializer with record_subject_name_strategy registers it);
    TopicRecordNameStrategy: under `<topic>-<record name>`."""
    from confluent_kafka.schema_registry import (
        record_subject_name_strategy,
        topic_record_subject_name_strategy,
    )

    registry = SchemaRegistryClient({"url": broker.registry_url})
    for strategy, make in (
        ("RecordNameStrategy", record_subject_name_strategy),
        (
            "io.confluent.kafka.serializers.subject.TopicRecordNameStrategy",
            topic_record_subject_name_strategy,
        ),
    ):
        topic = f"sv-{uuid.uuid4().hex[:8]}"
        create_topic(
            broker.bootstrap,
            topic,
            1,
            {
                "confluent.value.schema.validation": "true",
                "confluent.value.subject.name.strategy": strategy,
            },
        )
        ctx = SerializationContext(topic, MessageField.VALUE)
        by_record = AvroSerializer(registry, SCHEMA, conf={"subject.name.strategy": make})
        by_topic = AvroSerializer(registry, SCHEMA.replace('"V"', '"W"'))
        good = by_record({"n": 1}, ctx)
        other = by_topic({"n": 2}, ctx)  # registered under <topic>-value only
        answer = wire_produce(broker, topic, record_batch([good, other], now_ms()))
        assert int(answer.error_code) == INVALID_RECORD
        (error,) = [(int(e.batch_index), e.batch_index_error_message) for e in answer.record_errors]
        subject = "W" if strategy == "RecordNameStrategy" else f"{topic}-W"
        other_id = int.from_bytes(other[1:5], "big")
        why = f"value schema id {other_id} is not registered under subject {subject}"
        assert error == (1, why)
        assert int(wire_produce(broker, topic, record_batch([good], now_ms())).error_code) == 0


def test_unknown_strategy_is_refused(broker: BrokerProcess) -> None:
    from kafka.errors import InvalidConfigurationError

    with pytest.raises(InvalidConfigurationError):
        create_topic(
            broker.bootstrap,
            f"sv-{uuid.uuid4().hex[:8]}",
            1,
            {"confluent.value.subject.name.strategy": "MadeUpStrategy"},
        )


@pytest.mark.parametrize("codec", ["gzip", "lz4", "zstd", "snappy"])
def test_compressed_batches(broker: BrokerProcess, codec: str) -> None:
    topic, serializer = setup(broker, {"confluent.value.schema.validation": "true"})
    good = serializer({"n": 3}, SerializationContext(topic, MessageField.VALUE))
    producer = Producer(
        {
            "bootstrap.servers": broker.bootstrap,
            "retries": 0,
            "linger.ms": 0,
            "compression.type": codec,
        }
    )
    reports: list[Any] = []
    for value in (good, b"x" * 2000):
        producer.produce(
            topic, value=value, on_delivery=lambda err, msg: reports.append(err and err.code())
        )
        producer.flush(30)
    assert reports == [None, KafkaError.INVALID_RECORD]
