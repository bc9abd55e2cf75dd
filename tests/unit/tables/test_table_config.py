"""Table topic configs: parsing, the one-line refusals, Iceberg's evolution rules, and the
per-record decoding that sends what does not fit to the dead-letter table."""

from __future__ import annotations

import datetime
import io
import json
import struct

import fastavro
import pytest

from lakelog.config import Settings
from lakelog.log import topic_config
from lakelog.tables.decode import DecodeFailure, Decoder
from lakelog.tables.table_config import (
    Column,
    TableConfigError,
    check_change,
    table_spec,
)

SCHEMA = {
    "type": "object",
    "properties": {
        "id": {"type": "integer"},
        "name": {"type": ["string", "null"]},
        "at": {"type": "string", "format": "date-time"},
        "extra": {"type": "object"},
    },
    "required": ["id"],
}
AVRO = {
    "type": "record",
    "name": "R",
    "fields": [
        {"name": "n", "type": "int"},
        {"name": "s", "type": ["null", "string"]},
        {"name": "t", "type": {"type": "long", "logicalType": "timestamp-millis"}},
    ],
}


def configs(schema: object, kind: str = "json", **more: str) -> dict[str, str]:
    return {
        "lakelog.iceberg.mode": "value_schema",
        "lakelog.iceberg.value.schema": json.dumps(schema),
        "lakelog.iceberg.value.schema.type": kind,
        **more,
    }


def test_specs_from_json_schema_and_avro() -> None:
    spec = table_spec(configs(SCHEMA))
    assert spec.mode == "value_schema" and spec.partition == "day(timestamp)"
    assert spec.value is not None and spec.value.columns == (
        Column("id", "long", True),
        Column("name", "string", False),
        Column("at", "timestamp", False),
        Column("extra", "json", False),
    )
    avro = table_spec(configs(AVRO, "avro", **{"lakelog.iceberg.partition": "none"}))
    assert avro.value is not None and [(c.type, c.required) for c in avro.value.columns] == [
        ("int", True),
        ("string", False),
        ("timestamp", True),
    ]
    assert not table_spec({}).enabled


@pytest.mark.parametrize(
    ("given", "why"),
    [
        ({"lakelog.iceberg.mode": "on"}, "lakelog.iceberg.mode: must be one of"),
        ({"lakelog.iceberg.mode": "value_schema"}, "needs lakelog.iceberg.value.schema"),
        (configs({"type": "string"}), "must describe an object"),
        (configs({"type": "object", "properties": {"a": {"type": 3}}}), "not a valid JSON Schema"),
        (configs({"type": "object", "properties": {"_offset": {}}}), "'_offset' clashes"),
        ({**configs(SCHEMA), "lakelog.iceberg.partition": "week(x)"}, "lakelog.iceberg.partition"),
    ],
)
def test_bad_configs_are_one_line(given: dict[str, str], why: str) -> None:
    with pytest.raises(TableConfigError) as info:
        table_spec(given)
    assert why in str(info.value) and "\n" not in str(info.value)
    assert check_change({}, given) == str(info.value)


def test_topic_config_names_and_defaults_are_known() -> None:
    assert topic_config.validate({"lakelog.iceberg.mode": "key_value"}) is None
    assert "must be one of" in (topic_config.validate({"lakelog.iceberg.mode": "x"}) or "")
    assert topic_config.defaults(Settings())["lakelog.iceberg.mode"] == "disabled"


def evolve(**properties: object) -> str | None:
    after = {**SCHEMA, "properties": {**SCHEMA["properties"], **properties}}  # type: ignore[dict-item]
    return check_change(configs(SCHEMA), configs(after))


def test_evolution_rules() -> None:
    assert evolve(note={"type": "string"}) is None
    assert "cannot change type from long to string" in (evolve(id={"type": "string"}) or "")
    required = {**SCHEMA, "properties": {**SCHEMA["properties"], "new": {"type": "string"}}}
    required["required"] = ["id", "new"]
    assert "must be optional" in (check_change(configs(SCHEMA), configs(required)) or "")
    dropped = {"type": "object", "properties": {"name": {"type": "string"}}}
    assert "cannot remove required field 'id'" in (
        check_change(configs(SCHEMA), configs(dropped)) or ""
    )
    narrowed = {**SCHEMA, "required": []}
    assert check_change(configs(SCHEMA), configs(narrowed)) is None  # required -> optional
    assert "cannot become required" in (check_change(configs(narrowed), configs(SCHEMA)) or "")
    switch = check_change(configs(SCHEMA), {"lakelog.iceberg.mode": "key_value"})
    assert switch is not None and "cannot change from value_schema to key_value" in switch
    assert check_change({"retention.ms": "1"}, {"retention.ms": "2"}) is None


def test_json_decoding_and_its_failures() -> None:
    spec = table_spec(configs(SCHEMA)).value
    assert spec is not None
    decoder = Decoder(spec)
    row = decoder.decode(b'{"id": 7, "at": "2026-03-01T10:00:00Z", "extra": {"a": [1]}}')
    assert row == {
        "id": 7,
        "name": None,
        "at": datetime.datetime(2026, 3, 1, 10, tzinfo=datetime.UTC),
        "extra": '{"a":[1]}',
    }
    for payload, why in [
        (b"{", "not UTF-8 JSON"),
        (b'{"name": "x"}', "'id' is a required property"),
        (b'{"id": true}', "id: True is not of type 'integer'"),
        (b'{"id": 99999999999999999999}', "out of range"),
        (b'{"id": 1, "at": "yesterday"}', "not an ISO 8601 date-time"),
        (None, "null"),
        (b'{"id": 1, "name": "\\ud800"}', "surrogates not allowed"),
    ]:
        with pytest.raises(DecodeFailure) as info:
            decoder.decode(payload)
        assert why in str(info.value), (payload, str(info.value))


def test_avro_decoding_bare_framed_and_broken() -> None:
    spec = table_spec(configs(AVRO, "avro")).value
    assert spec is not None
    decoder = Decoder(spec)
    out = io.BytesIO()
    moment = datetime.datetime(2026, 3, 1, tzinfo=datetime.UTC)
    fastavro.schemaless_writer(out, fastavro.parse_schema(AVRO), {"n": 0, "s": "x", "t": moment})
    bare = out.getvalue()
    expected = {"n": 0, "s": "x", "t": moment}
    assert bare[0] == 0  # a bare datum may start with 0 too
    assert decoder.decode(bare) == expected
    assert decoder.decode(b"\x00" + struct.pack(">I", 42) + bare) == expected
    with pytest.raises(DecodeFailure, match="bytes left after the datum"):
        decoder.decode(bare + b"junk")
    with pytest.raises(DecodeFailure, match="does not decode"):
        decoder.decode(b"\x02")
