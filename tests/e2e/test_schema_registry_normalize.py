"""The registry's `normalize` (on register and lookup, and as a config) and subjects that
hold a `/`, through confluent-kafka's SchemaRegistryClient against a real broker: with
normalization, differently written equivalent schemas (Avro names with and without their
namespace, JSON keys in another order, Protobuf fields in another order) get one id; the
client URL-encodes subjects (`/` as %2F), and every subject endpoint takes them."""

from __future__ import annotations

import json
import urllib.parse
import uuid

import pytest
from confluent_kafka.schema_registry import Schema, SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer
from confluent_kafka.schema_registry.error import SchemaRegistryError
from e2e_fixtures import BrokerFactory
from e2e_harness import BrokerProcess
from registry_support import http, post_json

PERSON_SHORT = json.dumps(
    {
        "type": "record",
        "name": "Person",
        "namespace": "norm",
        "fields": [
            {"name": "name", "type": "string"},
            {"name": "friend", "type": ["null", "Person"], "default": None},
        ],
    }
)
PERSON_MIXED = json.dumps(
    {
        "fields": [
            {"type": "string", "name": "name"},
            {"default": None, "name": "friend", "type": ["null", "norm.Person"]},
        ],
        "namespace": "norm",
        "name": "Person",
        "type": "record",
    },
    indent=4,
)
JSON_A = '{"type": "object", "properties": {"a": {"type": "string", "maxLength": 5}}}'
JSON_B = '{"properties": {"a": {"type": "string", "maxLength": 5}}, "type": "object"}'
PROTO_A = 'syntax = "proto3";\npackage norm;\nmessage M { int32 a = 1; string b = 2; }\n'
PROTO_B = 'syntax = "proto3";\npackage norm;\n\nmessage M {\n  string b = 2;\n  int32 a = 1;\n}\n'


@pytest.fixture
def registry_broker(broker_factory: BrokerFactory) -> BrokerProcess:
    return broker_factory(registry=True)


def subject() -> str:
    return f"norm-{uuid.uuid4().hex[:8]}-value"


@pytest.mark.parametrize(
    ("kind", "first", "second"),
    [
        ("AVRO", PERSON_SHORT, PERSON_MIXED),
        ("JSON", JSON_A, JSON_B),
        ("PROTOBUF", PROTO_A, PROTO_B),
    ],
)
def test_normalize_gives_equivalent_schemas_one_id(
    registry_broker: BrokerProcess, kind: str, first: str, second: str
) -> None:
    sr = SchemaRegistryClient({"url": registry_broker.registry_url})
    name = subject()
    schema_id = sr.register_schema(name, Schema(first, kind), normalize_schemas=True)
    # Not normalized, the other spelling is another schema: the lookup does not find it.
    with pytest.raises(SchemaRegistryError) as missing:
        SchemaRegistryClient({"url": registry_broker.registry_url}).lookup_schema(
            name, Schema(second, kind)
        )
    assert missing.value.error_code == 40403
    found = sr.lookup_schema(name, Schema(second, kind), normalize_schemas=True)
    assert (found.schema_id, found.version) == (schema_id, 1)
    assert sr.register_schema(name, Schema(second, kind), normalize_schemas=True) == schema_id
    assert sr.get_versions(name) == [1]


def test_normalized_avro_is_stored_with_full_names(registry_broker: BrokerProcess) -> None:
    sr = SchemaRegistryClient({"url": registry_broker.registry_url})
    schema_id = sr.register_schema(subject(), Schema(PERSON_SHORT, "AVRO"), normalize_schemas=True)
    stored = json.loads(sr.get_schema(schema_id).schema_str)
    assert stored["name"] == "norm.Person" and "namespace" not in stored
    assert stored["fields"][1]["type"] == ["null", "norm.Person"]


def test_a_schema_registered_plain_is_found_by_a_normalized_lookup(
    registry_broker: BrokerProcess,
) -> None:
    sr = SchemaRegistryClient({"url": registry_broker.registry_url})
    name = subject()
    schema_id = sr.register_schema(name, Schema(JSON_A, "JSON"))
    found = sr.lookup_schema(name, Schema(JSON_B, "JSON"), normalize_schemas=True)
    assert found.schema_id == schema_id
    assert sr.register_schema(name, Schema(JSON_B, "JSON"), normalize_schemas=True) == schema_id
    assert sr.get_versions(name) == [1]


def test_the_normalize_config(registry_broker: BrokerProcess) -> None:
    url = registry_broker.registry_url
    name = subject()
    assert post_json(f"{url}/config/{name}", {"normalize": True}, "PUT") == (
        200,
        {"normalize": True},
    )
    status, body, _ = http(f"{url}/config/{name}")
    assert (status, body) == (200, {"compatibilityLevel": "BACKWARD", "normalize": True})
    sr = SchemaRegistryClient({"url": url})
    schema_id = sr.register_schema(name, Schema(PROTO_A, "PROTOBUF"))
    assert sr.register_schema(name, Schema(PROTO_B, "PROTOBUF")) == schema_id
    assert sr.lookup_schema(name, Schema(PROTO_B, "PROTOBUF")).schema_id == schema_id
    # Both settings at once, and a bad value.
    assert post_json(f"{url}/config", {"compatibility": "full", "normalize": False}, "PUT") == (
        200,
        {"compatibility": "FULL", "normalize": False},
    )
    status, body = post_json(f"{url}/config/{name}", {"normalize": "yes"}, "PUT")
    assert (status, body["error_code"]) == (422, 42203)
    status, body = post_json(f"{url}/config", {"compatibility": "FULL", "normalize": 1}, "PUT")
    assert (status, body["error_code"]) == (422, 422)
    # DELETE drops the subject's settings: the global normalize (false) applies again.
    assert http(f"{url}/config/{name}", "DELETE")[0] == 200
    with pytest.raises(SchemaRegistryError):
        SchemaRegistryClient({"url": url}).lookup_schema(name, Schema(PROTO_B, "PROTOBUF"))
    post_json(f"{url}/config", {"compatibility": "BACKWARD"}, "PUT")


def test_subjects_with_a_slash(registry_broker: BrokerProcess) -> None:
    url = registry_broker.registry_url
    sr = SchemaRegistryClient({"url": url})
    name = f"team/{uuid.uuid4().hex[:6]}/orders-value"
    schema = Schema(PERSON_SHORT, "AVRO")
    schema_id = sr.register_schema(name, schema)
    assert name in sr.get_subjects()
    assert sr.get_versions(name) == [1]
    latest = sr.get_latest_version(name)
    assert (latest.subject, latest.version, latest.schema_id) == (name, 1, schema_id)
    assert sr.get_version(name, 1).schema_id == schema_id
    assert sr.lookup_schema(name, schema).version == 1
    assert sr.test_compatibility(name, schema)
    assert sr.set_compatibility(name, "FULL") == {"compatibility": "FULL"}
    assert sr.get_compatibility(name) == "FULL"
    quoted = urllib.parse.quote(name, safe="")
    assert http(f"{url}/subjects/{quoted}/versions/1/schema")[1] == json.loads(
        sr.get_schema(schema_id).schema_str
    )
    assert http(f"{url}/subjects/{quoted}/versions/1/referencedby")[:2] == (200, [])
    assert post_json(f"{url}/mode/{quoted}", {"mode": "READONLY"}, "PUT") == (
        200,
        {"mode": "READONLY"},
    )
    assert http(f"{url}/mode/{quoted}")[:2] == (200, {"mode": "READONLY"})
    assert http(f"{url}/mode/{quoted}", "DELETE")[:2] == (200, {"mode": "READONLY"})
    assert http(f"{url}/schemas/ids/{schema_id}/versions")[1] == [{"subject": name, "version": 1}]
    # The serializers with a subject naming strategy that makes a subject with slashes.
    ctx_subject = lambda ctx, record: name  # noqa: E731
    serialize = AvroSerializer(
        sr,
        PERSON_SHORT,
        conf={
            "auto.register.schemas": False,
            "use.latest.version": True,
            "subject.name.strategy": ctx_subject,
        },
    )
    from confluent_kafka.serialization import MessageField, SerializationContext

    ctx = SerializationContext("orders", MessageField.VALUE)
    data = serialize({"name": "ada", "friend": None}, ctx)
    assert data[1:5] == schema_id.to_bytes(4, "big")
    assert AvroDeserializer(sr)(data, ctx) == {"name": "ada", "friend": None}
    assert sr.delete_version(name, 1) == 1
    assert sr.delete_subject(name, permanent=True) == [1]
    assert name not in sr.get_subjects()
    # A subject of nothing but slashes' neighbours: versions/ inside a subject name.
    odd = "a/versions"
    odd_id = sr.register_schema(odd, Schema('"string"', "AVRO"))
    assert sr.get_latest_version(odd).schema_id == odd_id
    assert sr.get_versions(odd) == [1]
