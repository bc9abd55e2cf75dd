"""`lakelog pipeline tables` in value_schema mode on the test's backend: JSON values (and
Avro ones, bare and in Confluent's wire format) decoded into typed columns, records that
do not decode in the dead-letter table with their offset and reason, aborted ones absent;
schema evolution adds a column, and an incompatible schema is refused in one line."""

from __future__ import annotations

import io
import json
import struct
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import fastavro
import pandas as pd
import pytest
from confluent_kafka import KafkaException
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewTopic,
)
from confluent_kafka.admin import ResourceType as CResourceType
from e2e_harness import BrokerProcess, Rec
from pipeline_clients import consume, produce, produce_transactions
from pyspark.sql import SparkSession
from tables_support import (
    MIDNIGHT,
    PARTITIONS,
    TableTopic,
    new_table_topic,
    read_dlq,
    read_table,
    run_job_process,
)

from lakelog.pipeline.tables import run_tables
from pipeline_jobs import run_job

TIMEOUT = 60
ORDER = {
    "type": "object",
    "properties": {
        "id": {"type": "integer"},
        "name": {"type": "string"},
        "amount": {"type": "number"},
        "tags": {"type": "array", "items": {"type": "string"}},
    },
    "required": ["id", "name"],
}
AVRO = {
    "type": "record",
    "name": "Reading",
    "fields": [
        {"name": "sensor", "type": "string"},
        {"name": "value", "type": "double"},
        {"name": "unit", "type": ["null", "string"], "default": None},
        {"name": "count", "type": "int"},
    ],
}


def _configs(schema: dict[str, Any], kind: str = "json") -> dict[str, str]:
    return {
        "lakelog.iceberg.mode": "value_schema",
        "lakelog.iceberg.value.schema": json.dumps(schema),
        "lakelog.iceberg.value.schema.type": kind,
    }


@pytest.fixture
def admin(shared_broker_process: BrokerProcess) -> AdminClient:
    return AdminClient({"bootstrap.servers": shared_broker_process.bootstrap})


def _alter(admin: AdminClient, topic: str, name: str, value: str) -> None:
    resource = ConfigResource(
        CResourceType.TOPIC,
        topic,
        incremental_configs=[ConfigEntry(name, value, incremental_operation=AlterConfigOpType.SET)],
    )
    admin.incremental_alter_configs([resource])[resource].result(timeout=TIMEOUT)


def _refusal(action: Any) -> str:
    with pytest.raises(KafkaException) as info:
        action()
    error = info.value.args[0]
    assert error.name() == "INVALID_CONFIG", error
    message = error.str()
    assert "\n" not in message and message
    return message


@pytest.fixture
def orders(shared_broker_process: BrokerProcess) -> Iterator[TableTopic]:
    yield new_table_topic(shared_broker_process, "orders", _configs(ORDER))


def test_json_values_to_typed_columns_and_bad_ones_to_the_dead_letter_table(
    orders: TableTopic, admin: AdminClient, spark: SparkSession, tmp_path: Path
) -> None:
    good = [
        {"id": i, "name": f"order-{i}", "amount": i * 1.5, "tags": ["a", str(i)]} for i in range(40)
    ]
    good[3] = {"id": 3, "name": "no amount"}  # optional fields may be missing
    bad = [
        (b"{not json", "not UTF-8 JSON"),
        (json.dumps({"id": "seven", "name": "x"}).encode(), "id"),
        (json.dumps({"id": 8}).encode(), "name"),
        (b"\xff\xfe", "not UTF-8 JSON"),
        (None, "null"),
    ]
    records = [
        Rec(i % PARTITIONS, f"k{i}".encode(), json.dumps(v).encode(), (), MIDNIGHT + i)
        for i, v in enumerate(good)
    ]
    records += [
        Rec(i % PARTITIONS, b"bad", value, (), MIDNIGHT + 100 + i)
        for i, (value, _) in enumerate(bad)
    ]
    produce(orders.bootstrap, orders.name, records)
    aborted = [Rec(0, b"txn", json.dumps({"id": 999, "name": "aborted"}).encode(), (), MIDNIGHT)]
    produce_transactions(orders.bootstrap, orders.name, [(aborted, False)])

    run_job_process(orders, tmp_path)
    consumed = consume(orders.bootstrap, orders.name, PARTITIONS, len(records))
    table = read_table(orders).sort_values(["_partition", "_offset"])
    by_offset = {(r.partition, r.offset): r for r in consumed}
    decoded = [r for r in consumed if r.key != b"bad"]
    rows = table.to_dict("records")
    assert [(r["_partition"], r["_offset"]) for r in rows] == [
        (r.partition, r.offset) for r in decoded
    ]
    for row in rows:
        record = by_offset[(row["_partition"], row["_offset"])]
        source = json.loads(record.value or b"")
        assert (row["id"], row["name"]) == (source["id"], source["name"])
        assert row["_key"] == record.key
        assert round(row["_timestamp"].timestamp() * 1000) == record.timestamp
        if "amount" in source:
            assert row["amount"] == source["amount"]
            assert json.loads(row["tags"]) == source["tags"]
        else:
            assert pd.isna(row["amount"]) and row["tags"] is None
    assert 999 not in set(table["id"])

    dlq = read_dlq(orders).sort_values(["partition", "offset"])
    rejected = [r for r in consumed if r.key == b"bad"]
    assert [(int(p), int(o)) for p, o in zip(dlq["partition"], dlq["offset"], strict=True)] == [
        (r.partition, r.offset) for r in rejected
    ]
    reasons = {r.value: reason for r, reason in zip(rejected, dlq["reason"], strict=True)}
    for value, why in bad:
        assert why in reasons[value], (value, reasons[value])
        assert "\n" not in reasons[value]
    assert list(dlq["value"]) == [r.value for r in rejected]

    # Evolution: a new optional field adds a column; older rows have it null.
    evolved = {**ORDER, "properties": {**ORDER["properties"], "note": {"type": "string"}}}
    _alter(admin, orders.name, "lakelog.iceberg.value.schema", json.dumps(evolved))
    later = Rec(
        0, b"k-later", json.dumps({"id": 100, "name": "n", "note": "hi"}).encode(), (), MIDNIGHT
    )
    produce(orders.bootstrap, orders.name, [later])
    summary = run_job(orders.broker, spark, lambda ctx: run_tables(ctx, [orders.name]))
    assert summary.columns_added == 1  # type: ignore[attr-defined]
    table = read_table(orders)
    assert len(table) == len(decoded) + 1
    assert list(table[table["id"] == 100]["note"]) == ["hi"]
    assert table[table["id"] != 100]["note"].isna().all()
    assert len(read_dlq(orders)) == len(bad)  # nothing again

    # Incompatible changes are refused at config time, with one line.
    retyped = {**ORDER, "properties": {**ORDER["properties"], "id": {"type": "string"}}}
    message = _refusal(
        lambda: _alter(admin, orders.name, "lakelog.iceberg.value.schema", json.dumps(retyped))
    )
    assert "cannot change type from long to string" in message
    dropped = {**ORDER, "required": ["id"], "properties": {"id": {"type": "integer"}}}
    message = _refusal(
        lambda: _alter(admin, orders.name, "lakelog.iceberg.value.schema", json.dumps(dropped))
    )
    assert "cannot remove required field 'name'" in message


def test_a_wrong_schema_config_is_refused_in_one_line(admin: AdminClient) -> None:
    def create(configs: dict[str, str]) -> None:
        topic = NewTopic(f"bad-schema-{id(configs)}", num_partitions=1, config=configs)
        admin.create_topics([topic])[topic.topic].result(timeout=TIMEOUT)

    message = _refusal(lambda: create({"lakelog.iceberg.mode": "value_schema"}))
    assert "needs lakelog.iceberg.value.schema" in message
    message = _refusal(
        lambda: create({**_configs(ORDER), "lakelog.iceberg.value.schema": "{not json"})
    )
    assert message.startswith("lakelog.iceberg.value.schema: not JSON")
    broken = {"type": "record", "name": "R", "fields": [{"name": "x", "type": "nosuch"}]}
    message = _refusal(lambda: create(_configs(broken, "avro")))
    assert "not a valid Avro schema" in message
    message = _refusal(lambda: create({"lakelog.iceberg.mode": "tables"}))
    assert "lakelog.iceberg.mode" in message

    # Legacy AlterConfigs (the whole config replaced) is checked against the old one too.
    good = _configs(ORDER)
    topic = NewTopic(f"legacy-alter-{id(good)}", num_partitions=1, config=good)
    admin.create_topics([topic])[topic.topic].result(timeout=TIMEOUT)
    retyped = {**ORDER, "properties": {**ORDER["properties"], "name": {"type": "integer"}}}
    resource = ConfigResource(CResourceType.TOPIC, topic.topic, set_config=_configs(retyped))
    message = _refusal(lambda: admin.alter_configs([resource])[resource].result(timeout=TIMEOUT))
    assert message == (
        "lakelog.iceberg.value.schema: field 'name' cannot change type from string to long"
    )


def _avro(datum: dict[str, Any], schema: dict[str, Any] = AVRO) -> bytes:
    out = io.BytesIO()
    fastavro.schemaless_writer(out, fastavro.parse_schema(schema), datum)
    return out.getvalue()


def test_avro_values_bare_and_in_the_confluent_wire_format(
    shared_broker_process: BrokerProcess, spark: SparkSession, admin: AdminClient
) -> None:
    topic = new_table_topic(shared_broker_process, "readings", _configs(AVRO, "avro"))
    readings = [
        {"sensor": f"s{i}", "value": i / 4, "unit": "C" if i % 2 else None, "count": i}
        for i in range(20)
    ]
    values = [
        (b"\x00" + struct.pack(">I", 7) + _avro(r)) if i % 2 else _avro(r)
        for i, r in enumerate(readings)
    ]
    records = [Rec(i % PARTITIONS, None, v, (), MIDNIGHT + i) for i, v in enumerate(values)]
    records.append(Rec(0, None, b"\x02ab", (), MIDNIGHT + 50))  # truncated: no double
    produce(topic.bootstrap, topic.name, records)
    summary = run_job(topic.broker, spark, lambda ctx: run_tables(ctx, [topic.name]))
    assert (summary.rows_written, summary.dlq_rows) == (20, 1)  # type: ignore[attr-defined]
    table = read_table(topic).sort_values("sensor", key=lambda s: s.str[1:].astype(int))
    assert list(table["sensor"]) == [r["sensor"] for r in readings]
    assert list(table["value"]) == [r["value"] for r in readings]
    assert [u if isinstance(u, str) else None for u in table["unit"]] == [
        r["unit"] for r in readings
    ]
    [reason] = list(read_dlq(topic)["reason"])
    assert reason.startswith("value: does not decode")

    # Widening int to long is an allowed evolution: the column becomes a long.
    wide = {**AVRO, "fields": [*AVRO["fields"][:3], {"name": "count", "type": "long"}]}
    _alter(admin, topic.name, "lakelog.iceberg.value.schema", json.dumps(wide))
    big = {"sensor": "big", "value": 0.0, "unit": None, "count": 2**40}
    produce(topic.bootstrap, topic.name, [Rec(0, None, _avro(big, wide), (), MIDNIGHT)])
    run_job(topic.broker, spark, lambda ctx: run_tables(ctx, [topic.name]))
    table = read_table(topic)
    assert str(table["count"].dtype) == "int64" and len(table) == 21
    assert list(table[table["sensor"] == "big"]["count"]) == [2**40]
