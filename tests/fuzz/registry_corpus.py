"""The HTTP fuzzer's corpus: valid requests to the schema registry, one or more for every
endpoint of Confluent's API that Lakelog serves (register AVRO, JSON and PROTOBUF schemas,
with references and `normalize`; lookups; versions; schemas by id; compatibility; config;
mode; soft and hard deletes), on a few subjects, one of them with a `/` (sent as %2F, as
confluent-kafka's client sends it). Written here rather than captured: the API is small,
and each request is what Confluent's documentation shows."""

from __future__ import annotations

import json
from dataclasses import dataclass, field

CONTENT_TYPE = "application/vnd.schemaregistry.v1+json"


@dataclass(frozen=True)
class HttpSeed:
    method: str
    path: str
    """Already percent-encoded, without the query."""
    query: str = ""
    body: bytes = b""
    headers: tuple[tuple[str, str], ...] = field(default=(("Content-Type", CONTENT_TYPE),))


PERSON = json.dumps(
    {
        "type": "record",
        "name": "Person",
        "namespace": "fuzz",
        "fields": [
            {"name": "name", "type": "string"},
            {"name": "age", "type": ["null", "int"], "default": None},
            {"name": "tags", "type": {"type": "array", "items": "string"}, "default": []},
            {"name": "kind", "type": {"type": "enum", "name": "Kind", "symbols": ["A", "B"]}},
        ],
    }
)
ORDER = json.dumps(
    {
        "type": "record",
        "name": "Order",
        "namespace": "fuzz",
        "fields": [{"name": "id", "type": "long"}, {"name": "buyer", "type": "fuzz.Person"}],
    }
)
EVENT_JSON = json.dumps(
    {
        "$schema": "http://json-schema.org/draft-07/schema#",
        "title": "Event",
        "type": "object",
        "properties": {
            "kind": {"type": "string", "enum": ["click", "view"]},
            "n": {"type": "integer", "minimum": 0},
            "at": {"$ref": "#/definitions/time"},
        },
        "required": ["kind"],
        "additionalProperties": False,
        "definitions": {"time": {"type": "string", "pattern": "^[0-9:T-]+$"}},
    }
)
COMMON_PROTO = 'syntax = "proto3";\npackage fuzz.common;\nmessage Money { int64 cents = 1; }\n'
EVENT_PROTO = (
    'syntax = "proto3";\npackage fuzz;\nimport "common.proto";\n'
    'import "google/protobuf/timestamp.proto";\n'
    "message Event {\n  string kind = 1;\n  int64 n = 2;\n  fuzz.common.Money price = 3;\n"
    "  google.protobuf.Timestamp at = 4;\n  oneof who { string user = 5; int32 bot = 6; }\n"
    "  enum Level { LOW = 0; HIGH = 1; }\n  Level level = 7;\n  map<string, string> tags = 8;\n}\n"
)
SUBJECTS = ("fuzz-people-value", "fuzz-orders-value", "team%2Fevents-value", "fuzz-proto-value")


def _body(value: object) -> bytes:
    return json.dumps(value).encode()


def seeds() -> list[HttpSeed]:
    people, orders, events, proto = SUBJECTS
    ref = [{"name": "fuzz.Person", "subject": people, "version": 1}]
    proto_ref = [{"name": "common.proto", "subject": "fuzz-common", "version": 1}]
    register = [
        (people, {"schema": PERSON}),
        (orders, {"schema": ORDER, "references": ref}),
        (events, {"schema": EVENT_JSON, "schemaType": "JSON"}),
        ("fuzz-common", {"schema": COMMON_PROTO, "schemaType": "PROTOBUF"}),
        (proto, {"schema": EVENT_PROTO, "schemaType": "PROTOBUF", "references": proto_ref}),
        ("fuzz-primitive", {"schema": '"string"'}),
    ]
    found: list[HttpSeed] = []
    for subject, body in register:
        found.append(HttpSeed("POST", f"/subjects/{subject}/versions", body=_body(body)))
        found.append(HttpSeed("POST", f"/subjects/{subject}", body=_body(body)))
        found.append(
            HttpSeed("POST", f"/subjects/{subject}/versions", "normalize=true", _body(body))
        )
        found.append(HttpSeed("POST", f"/subjects/{subject}", "normalize=true", _body(body)))
        found.append(
            HttpSeed(
                "POST",
                f"/compatibility/subjects/{subject}/versions/latest",
                "verbose=true",
                _body(body),
            )
        )
        found.append(
            HttpSeed("POST", f"/compatibility/subjects/{subject}/versions", "", _body(body))
        )
    for subject in SUBJECTS:
        found += [
            HttpSeed("GET", f"/subjects/{subject}/versions"),
            HttpSeed("GET", f"/subjects/{subject}/versions", "deleted=true"),
            HttpSeed("GET", f"/subjects/{subject}/versions/latest"),
            HttpSeed("GET", f"/subjects/{subject}/versions/1"),
            HttpSeed("GET", f"/subjects/{subject}/versions/1/schema"),
            HttpSeed("GET", f"/subjects/{subject}/versions/1/referencedby"),
            HttpSeed("GET", f"/config/{subject}", "defaultToGlobal=true"),
            HttpSeed("PUT", f"/config/{subject}", body=_body({"compatibility": "FULL"})),
            HttpSeed("PUT", f"/config/{subject}", body=_body({"normalize": True})),
            HttpSeed("DELETE", f"/config/{subject}"),
            HttpSeed("GET", f"/mode/{subject}", "defaultToGlobal=true"),
            HttpSeed("PUT", f"/mode/{subject}", body=_body({"mode": "READWRITE"})),
            HttpSeed("DELETE", f"/mode/{subject}"),
            HttpSeed("DELETE", f"/subjects/{subject}/versions/1"),
            HttpSeed("DELETE", f"/subjects/{subject}/versions/1", "permanent=true"),
            HttpSeed("DELETE", f"/subjects/{subject}"),
            HttpSeed("DELETE", f"/subjects/{subject}", "permanent=true"),
        ]
    found += [
        HttpSeed("GET", "/"),
        HttpSeed("GET", "/subjects"),
        HttpSeed("GET", "/subjects", "deleted=true&subjectPrefix=fuzz"),
        HttpSeed("GET", "/schemas/types"),
        HttpSeed("GET", "/schemas/ids/1"),
        HttpSeed("GET", "/schemas/ids/1/schema"),
        HttpSeed("GET", "/schemas/ids/1/subjects", "deleted=true"),
        HttpSeed("GET", "/schemas/ids/1/versions"),
        HttpSeed("GET", "/schemas/ids/5", "format=serialized"),
        HttpSeed("GET", "/config"),
        HttpSeed("PUT", "/config", body=_body({"compatibility": "BACKWARD_TRANSITIVE"})),
        HttpSeed("DELETE", "/config"),
        HttpSeed("GET", "/mode"),
        HttpSeed("PUT", "/mode", body=_body({"mode": "READWRITE"})),
        HttpSeed("PUT", "/mode/fuzz-import", "force=true", _body({"mode": "IMPORT"})),
        HttpSeed(
            "POST",
            "/subjects/fuzz-import/versions",
            body=_body({"schema": '"long"', "id": 4242, "version": 1}),
        ),
    ]
    return found


def setup_requests() -> list[HttpSeed]:
    """What makes the seeds meaningful: the schemas they refer to, registered first."""
    return [
        s
        for s in seeds()
        if s.method == "POST"
        and s.path.startswith("/subjects/")
        and s.path.endswith("/versions")
        and not s.query
        and "import" not in s.path
    ]
