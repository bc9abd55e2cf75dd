"""Table topics read values in Confluent's wire format with the built-in schema registry:
records serialized by confluent-kafka's AvroSerializer with two versions of the writer's
schema land as typed rows (each read with the schema it was written with and resolved to
the table's: a field the writer lacked takes its default), and a record naming an id the
topic's subject does not hold goes to the dead-letter table with that reason. JSON
Schema-serialized values likewise, read after their header."""

from __future__ import annotations

import json
import struct
from typing import Any

import pytest
from confluent_kafka import Producer
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroSerializer
from confluent_kafka.schema_registry.json_schema import JSONSerializer
from confluent_kafka.serialization import MessageField, SerializationContext
from e2e_fixtures import BrokerFactory
from e2e_harness import BrokerProcess
from pyspark.sql import SparkSession
from tables_support import new_table_topic, read_dlq, read_table

from lakelog.pipeline.tables import run_tables
from pipeline_jobs import run_job

TABLE = {
    "type": "record",
    "name": "Reading",
    "fields": [
        {"name": "sensor", "type": "string"},
        {"name": "value", "type": "double"},
        {"name": "unit", "type": ["null", "string"], "default": None},
    ],
}
WRITER_V1 = {"type": "record", "name": "Reading", "fields": TABLE["fields"][:2]}
WRITER_V2 = {
    "type": "record",
    "name": "Reading",
    "fields": [*TABLE["fields"], {"name": "extra", "type": "string", "default": ""}],
}
ORDER = {
    "type": "object",
    "properties": {"id": {"type": "integer"}, "name": {"type": "string"}},
    "required": ["id", "name"],
}


@pytest.fixture
def registry_broker(broker_factory: BrokerFactory) -> BrokerProcess:
    return broker_factory(registry=True)


def produce_values(broker: BrokerProcess, topic: str, values: list[bytes]) -> None:
    producer = Producer({"bootstrap.servers": broker.bootstrap})
    for i, value in enumerate(values):
        producer.produce(topic, value, partition=i % 2)
    assert producer.flush(30) == 0


def test_avro_values_are_read_with_their_writers_schema(
    registry_broker: BrokerProcess, spark: SparkSession
) -> None:
    topic = new_table_topic(
        registry_broker,
        "reg-avro",
        {
            "lakelog.iceberg.mode": "value_schema",
            "lakelog.iceberg.value.schema": json.dumps(TABLE),
            "lakelog.iceberg.value.schema.type": "avro",
        },
    )
    client = SchemaRegistryClient({"url": registry_broker.registry_url})
    ctx = SerializationContext(topic.name, MessageField.VALUE)
    v1 = AvroSerializer(client, json.dumps(WRITER_V1))
    v2 = AvroSerializer(client, json.dumps(WRITER_V2))
    old = [v1({"sensor": f"old{i}", "value": i / 2}, ctx) for i in range(6)]
    new = [v2({"sensor": f"new{i}", "value": i, "unit": "C", "extra": "x"}, ctx) for i in range(4)]
    assert old[0] is not None and new[0] is not None and old[0][1:5] != new[0][1:5]
    stray = b"\x00" + struct.pack(">I", 99_999) + old[0][5:]
    produce_values(registry_broker, topic.name, [*old, *new, stray])

    summary: Any = run_job(registry_broker, spark, lambda c: run_tables(c, [topic.name]))
    assert (summary.rows_written, summary.dlq_rows) == (10, 1)
    rows = read_table(topic).sort_values("sensor")
    got = {
        r.sensor: (r.value, r.unit if isinstance(r.unit, str) else None) for r in rows.itertuples()
    }
    assert got == {
        **{f"old{i}": (i / 2, None) for i in range(6)},  # v1 had no unit: its default
        **{f"new{i}": (float(i), "C") for i in range(4)},
    }
    [reason] = list(read_dlq(topic)["reason"])
    assert f"schema id 99999 is not registered under {topic.name}-value" in reason


def test_json_schema_values_are_read_after_their_header(
    registry_broker: BrokerProcess, spark: SparkSession
) -> None:
    topic = new_table_topic(
        registry_broker,
        "reg-json",
        {
            "lakelog.iceberg.mode": "value_schema",
            "lakelog.iceberg.value.schema": json.dumps(ORDER),
            "lakelog.iceberg.value.schema.type": "json",
        },
    )
    client = SchemaRegistryClient({"url": registry_broker.registry_url})
    ctx = SerializationContext(topic.name, MessageField.VALUE)
    serialize = JSONSerializer(json.dumps(ORDER), client)
    values = [serialize({"id": i, "name": f"o{i}"}, ctx) for i in range(5)]
    assert all(v is not None and v[0] == 0 for v in values)
    produce_values(registry_broker, topic.name, values)  # type: ignore[arg-type]

    summary: Any = run_job(registry_broker, spark, lambda c: run_tables(c, [topic.name]))
    assert (summary.rows_written, summary.dlq_rows) == (5, 0)
    rows = read_table(topic).sort_values("id")
    assert list(rows["name"]) == [f"o{i}" for i in range(5)]
