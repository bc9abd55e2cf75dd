"""The console's decoding parts that need no broker: Confluent's Protobuf message indexes,
the Avro, JSON and Protobuf decoders built from schemas parsed by the registry's own
parsers, and how the console reaches the registry (URL, login)."""

from __future__ import annotations

import io
import json

import fastavro
import pytest

from lakelog.cli.console.decoding import (
    BUILDERS,
    Undecodable,
    message_indexes,
)
from lakelog.cli.console.registry_client import RegistryReader, default_registry_url, quote
from lakelog.registry.avro import AVRO
from lakelog.registry.json_schema import JSON_SCHEMA
from lakelog.registry.protobuf import PROTOBUF
from lakelog.security.client_config import ClientSecurity


def test_message_indexes() -> None:
    assert message_indexes(b"\x00rest") == ([0], 1)
    # Two indexes [1, 0]: count 2 (zigzag 4), then 1 (zigzag 2) and 0.
    assert message_indexes(b"\x04\x02\x00rest") == ([1, 0], 3)
    with pytest.raises(Undecodable):
        message_indexes(b"\x04\x02")
    with pytest.raises(Undecodable):
        message_indexes(b"\xfe\x01")  # 127 indexes: more than the cap


def test_avro_decoder_reads_binary_and_refuses_leftovers() -> None:
    schema = {"type": "record", "name": "R", "fields": [{"name": "b", "type": "bytes"}]}
    parsed = AVRO.parse(json.dumps(schema), {})
    out = io.BytesIO()
    fastavro.schemaless_writer(out, fastavro.parse_schema(schema), {"b": b"\x00\xff"})
    decode = BUILDERS["AVRO"](parsed)
    assert json.loads(decode(out.getvalue())) == {"b": "\u0000\u00ff"}
    with pytest.raises(Undecodable):
        decode(out.getvalue() + b"\x01")


def test_json_decoder() -> None:
    decode = BUILDERS["JSON"](JSON_SCHEMA.parse('{"type": "object"}', {}))
    assert decode(b'{"a":1}') == '{\n  "a": 1\n}'
    with pytest.raises(Undecodable):
        decode(b"{")


def test_protobuf_decoder_follows_the_message_indexes() -> None:
    parsed = PROTOBUF.parse(
        'syntax = "proto3";\npackage t;\nmessage A { int32 x = 1; }\n'
        "message B { message C { string s = 1; } }\n",
        {},
    )
    decode = BUILDERS["PROTOBUF"](parsed)
    assert decode(b"\x00" + b"\x08\x05") == 't.A {\n  "x": 5\n}'
    assert decode(b"\x04\x02\x00" + b"\x0a\x02hi") == 't.B.C {\n  "s": "hi"\n}'
    with pytest.raises(Undecodable):
        decode(b"\x02\x08" + b"\x08\x05")  # index 4: no fifth message


def test_registry_url_and_login() -> None:
    assert default_registry_url("b1:9092,b2:9092") == "http://b1:10093"
    assert quote("team/orders-value") == "team%2Forders-value"
    reader = RegistryReader(
        "http://r:1/",
        ClientSecurity("SASL_PLAINTEXT", "SCRAM-SHA-256", "ada", "pw"),
    )
    assert reader.url == "http://r:1"
    assert reader._headers["Authorization"] == "Basic YWRhOnB3"
    assert "Authorization" not in RegistryReader("http://r:1", ClientSecurity())._headers
