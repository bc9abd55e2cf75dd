"""The built-in schema registry through confluent-kafka: its SchemaRegistryClient and the
Avro, JSON Schema and Protobuf serializers produce and consume through the broker that
serves the registry; two brokers on one coordinator give the same ids, and a restarted
broker the same answers."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import pytest
from confluent_kafka.schema_registry import Schema, SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer
from confluent_kafka.schema_registry.error import SchemaRegistryError
from confluent_kafka.schema_registry.json_schema import JSONDeserializer, JSONSerializer
from confluent_kafka.schema_registry.protobuf import ProtobufDeserializer, ProtobufSerializer
from e2e_fixtures import BrokerFactory
from e2e_harness import BrokerProcess, create_topic
from registry_support import compile_proto, consume, http, produce

USER_AVRO = json.dumps(
    {
        "type": "record",
        "name": "User",
        "namespace": "e2e",
        "fields": [{"name": "name", "type": "string"}, {"name": "age", "type": "int"}],
    }
)
USER_AVRO_V2 = json.dumps(
    {
        "type": "record",
        "name": "User",
        "namespace": "e2e",
        "fields": [
            {"name": "name", "type": "string"},
            {"name": "age", "type": "long"},
            {"name": "email", "type": ["null", "string"], "default": None},
        ],
    }
)
USER_JSON = json.dumps(
    {
        "type": "object",
        "properties": {"name": {"type": "string"}, "age": {"type": "integer"}},
        "required": ["name"],
    }
)


@pytest.fixture
def registry_broker(broker_factory: BrokerFactory) -> BrokerProcess:
    return broker_factory(registry=True)


def client(broker: BrokerProcess) -> SchemaRegistryClient:
    return SchemaRegistryClient({"url": broker.registry_url})


def topic() -> str:
    return f"sr-{uuid.uuid4().hex[:8]}"


def test_avro_produce_and_consume(registry_broker: BrokerProcess) -> None:
    name = topic()
    create_topic(registry_broker.bootstrap, name, partitions=1)
    sr = client(registry_broker)
    users = [{"name": f"u{i}", "age": i} for i in range(20)]
    produce(registry_broker.bootstrap, name, users, AvroSerializer(sr, USER_AVRO))
    got = consume(registry_broker.bootstrap, name, 20, AvroDeserializer(sr))
    assert got == users
    latest = sr.get_latest_version(f"{name}-value")
    assert latest.version == 1 and latest.schema.schema_type == "AVRO"
    # A reader with the evolved schema reads the old records (schema resolution).
    v2 = sr.register_schema(f"{name}-value", Schema(USER_AVRO_V2, "AVRO"))
    assert v2 != latest.schema_id
    reader = AvroDeserializer(sr, USER_AVRO_V2)
    assert consume(registry_broker.bootstrap, name, 20, reader)[0] == {
        "name": "u0",
        "age": 0,
        "email": None,
    }


def test_json_schema_produce_and_consume(registry_broker: BrokerProcess) -> None:
    name = topic()
    create_topic(registry_broker.bootstrap, name, partitions=1)
    sr = client(registry_broker)
    docs = [{"name": f"u{i}", "age": i} for i in range(10)]
    produce(registry_broker.bootstrap, name, docs, JSONSerializer(USER_JSON, sr))
    got = consume(
        registry_broker.bootstrap, name, 10, JSONDeserializer(None, schema_registry_client=sr)
    )
    assert got == docs
    assert sr.get_latest_version(f"{name}-value").schema.schema_type == "JSON"


def test_protobuf_produce_and_consume(registry_broker: BrokerProcess, tmp_path: Path) -> None:
    module = compile_proto(
        tmp_path,
        "sr_e2e_user",
        'syntax = "proto3";\npackage sre2e;\nimport "google/protobuf/timestamp.proto";\n'
        "message User { string name = 1; int32 age = 2; google.protobuf.Timestamp at = 3; }\n",
    )
    name = topic()
    create_topic(registry_broker.bootstrap, name, partitions=1)
    sr = client(registry_broker)
    users = [module.User(name=f"u{i}", age=i) for i in range(10)]
    for user in users:
        user.at.seconds = 1_700_000_000
    serializer = ProtobufSerializer(module.User, sr, {"use.deprecated.format": False})
    produce(registry_broker.bootstrap, name, users, serializer)
    deserializer = ProtobufDeserializer(module.User, {"use.deprecated.format": False})
    assert consume(registry_broker.bootstrap, name, 10, deserializer) == users
    registered = sr.get_latest_version(f"{name}-value")
    assert registered.schema.schema_type == "PROTOBUF"
    # The same file as .proto text is the same schema: the same id.
    text = (tmp_path / "sr_e2e_user.proto").read_text()
    assert sr.lookup_schema(f"{name}-value", Schema(text, "PROTOBUF")).schema_id == (
        registered.schema_id
    )


def test_client_api(registry_broker: BrokerProcess) -> None:
    sr = client(registry_broker)
    subject = f"{topic()}-value"
    first = sr.register_schema(subject, Schema(USER_AVRO, "AVRO"))
    assert sr.register_schema(subject, Schema(USER_AVRO, "AVRO")) == first
    assert sr.get_subjects() == [subject]
    assert sr.get_versions(subject) == [1]
    assert sr.lookup_schema(subject, Schema(USER_AVRO, "AVRO")).version == 1
    assert sr.get_schema(first).schema_str == json.dumps(
        json.loads(USER_AVRO), separators=(",", ":")
    )
    assert sr.get_compatibility() == "BACKWARD"
    incompatible = Schema(USER_AVRO.replace('"int"', '"string"'), "AVRO")
    assert not sr.test_compatibility(subject, incompatible)
    with pytest.raises(SchemaRegistryError) as refused:
        sr.register_schema(subject, incompatible)
    assert (refused.value.http_status_code, refused.value.error_code) == (409, 409)
    sr.set_compatibility(subject, "NONE")
    assert sr.get_compatibility(subject) == "NONE"
    second = sr.register_schema(subject, incompatible)
    assert sr.get_versions(subject) == [1, 2] and second != first
    assert sr.delete_version(subject, 2) == 2
    assert sr.get_versions(subject) == [1]
    assert sr.delete_subject(subject) == [1]
    with pytest.raises(SchemaRegistryError) as gone:
        sr.get_versions(subject)
    assert gone.value.error_code == 40401
    assert sr.delete_subject(subject, permanent=True) == [1, 2]
    with pytest.raises(SchemaRegistryError) as unknown:
        client(registry_broker).get_schema(first)  # a fresh client: no cached answer
    assert unknown.value.error_code == 40403


def test_references(registry_broker: BrokerProcess) -> None:
    url = registry_broker.registry_url
    base = {
        "type": "record",
        "name": "Address",
        "namespace": "e2e",
        "fields": [{"name": "city", "type": "string"}],
    }
    status, body, _ = http(
        f"{url}/subjects/address/versions",
        "POST",
        json.dumps({"schema": json.dumps(base)}).encode(),
    )
    assert status == 200
    person = {
        "type": "record",
        "name": "Person",
        "namespace": "e2e",
        "fields": [{"name": "home", "type": "e2e.Address"}],
    }
    request = {
        "schema": json.dumps(person),
        "references": [{"name": "e2e.Address", "subject": "address", "version": 1}],
    }
    status, body, _ = http(f"{url}/subjects/person/versions", "POST", json.dumps(request).encode())
    assert status == 200, body
    status, referencing, _ = http(f"{url}/subjects/address/versions/1/referencedby")
    assert referencing == [body["id"]]
    status, refused, _ = http(f"{url}/subjects/address/versions/1", "DELETE")
    assert (status, refused["error_code"]) == (422, 42206)
    status, answer, _ = http(f"{url}/schemas/ids/{body['id']}")
    assert answer["references"] == request["references"]


def test_two_brokers_give_the_same_ids(broker_factory: BrokerFactory, tmp_path: Path) -> None:
    shared = tmp_path / "cluster"
    a = broker_factory({"BROKER_ID": 1}, registry=True, data_dir=shared)
    b = broker_factory({"BROKER_ID": 2}, registry=True, data_dir=shared)
    ra, rb = client(a), client(b)
    ids = []
    for i in range(6):
        schema = Schema(json.dumps({"type": "record", "name": f"R{i}", "fields": []}), "AVRO")
        ids.append((ra if i % 2 else rb).register_schema(f"s{i}", schema))
    assert ids == sorted(set(ids))
    for i, schema_id in enumerate(ids):
        assert json.loads(rb.get_schema(schema_id).schema_str)["name"] == f"R{i}"
        assert json.loads(ra.get_schema(schema_id).schema_str)["name"] == f"R{i}"
    assert ra.get_subjects() == rb.get_subjects() == [f"s{i}" for i in range(6)]
    # A restarted broker answers the same at once (nothing lives in the broker).
    b.restart()
    fresh = client(b)
    assert [json.loads(fresh.get_schema(i).schema_str)["name"] for i in ids] == [
        f"R{i}" for i in range(6)
    ]
    assert fresh.get_subjects() == [f"s{i}" for i in range(6)]
