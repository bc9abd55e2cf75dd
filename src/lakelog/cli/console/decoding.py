"""The message browser's decoding of keys and values in Confluent's wire format (magic byte
0, a 4-byte big-endian schema id, then Avro binary, JSON text, or Protobuf message indexes
and the message) with the schemas the registry holds: shown as JSON text with the schema's
id, subject and type. What does not decode keeps its raw form and gets a one-line reason.

Schemas are parsed with the registry's own parsers (so references resolve as the registry
resolves them), once per id: an id's schema never changes. The cache is bounded."""

from __future__ import annotations

import asyncio
import io
import json
import struct
from collections import OrderedDict
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

import fastavro
from google.protobuf import descriptor_pb2, descriptor_pool, json_format, message_factory

from lakelog.cli.console.registry_client import (
    RegistryAnswered,
    RegistryReader,
    RegistryUnavailable,
)
from lakelog.registry.avro import AVRO
from lakelog.registry.errors import InvalidSchema, RegistryError
from lakelog.registry.formats import ParsedSchema, SchemaFormat
from lakelog.registry.json_schema import JSON_SCHEMA
from lakelog.registry.protobuf import PROTOBUF, WELL_KNOWN

FORMATS: dict[str, SchemaFormat] = {f.name: f for f in (AVRO, JSON_SCHEMA, PROTOBUF)}
MAGIC = 0
HEADER = 5
CACHED_DECODERS = 200
MAX_REFERENCE_DEPTH = 16
MAX_MESSAGE_INDEXES = 64
SHOWN_CHARS = 16_384
"""Decoded text longer than this is cut (the page says so)."""

Decoder = Callable[[bytes], str]


class Undecodable(Exception):
    """Why bytes did not decode (one line, shown next to the raw bytes)."""


@dataclass(frozen=True, slots=True)
class Decoded:
    text: str | None
    """The value as JSON text; None when it did not decode."""
    reason: str | None = None
    schema_id: int | None = None
    schema_type: str | None = None
    subject: str | None = None
    version: int | None = None
    cut: bool = False


def _avro_json(value: Any) -> Any:
    if isinstance(value, bytes):  # Avro's JSON encoding: each byte as one code point
        return value.decode("latin-1")
    return str(value)


def _avro_decoder(parsed: ParsedSchema) -> Decoder:
    writer = parsed.model[0]

    def decode(payload: bytes) -> str:
        stream = io.BytesIO(payload)
        value = fastavro.schemaless_reader(stream, writer, None)
        if stream.tell() != len(payload):
            raise Undecodable(f"{len(payload) - stream.tell()} bytes left after the Avro value")
        return json.dumps(value, indent=2, default=_avro_json, ensure_ascii=False)

    return decode


def _json_decoder(parsed: ParsedSchema) -> Decoder:
    def decode(payload: bytes) -> str:
        try:
            value = json.loads(payload)
        except ValueError as exc:
            raise Undecodable(f"not JSON: {exc}") from exc
        return json.dumps(value, indent=2, ensure_ascii=False)

    return decode


def _varint(data: bytes, at: int) -> tuple[int, int]:
    shift = value = 0
    while True:
        if at >= len(data) or shift > 63:
            raise Undecodable("a message index runs past the end")
        byte = data[at]
        value |= (byte & 0x7F) << shift
        at += 1
        if not byte & 0x80:
            return (value >> 1) ^ -(value & 1), at  # zigzag, as Confluent writes them
        shift += 7


def message_indexes(payload: bytes) -> tuple[list[int], int]:
    """Confluent's Protobuf message indexes (the path to the message type in the file) and
    where the message starts; a single 0 byte stands for [0]."""
    count, at = _varint(payload, 0)
    if count == 0:
        return [0], at
    if not 0 < count <= MAX_MESSAGE_INDEXES:
        raise Undecodable(f"{count} message indexes")
    indexes = []
    for _ in range(count):
        index, at = _varint(payload, at)
        indexes.append(index)
    return indexes, at


def _protobuf_decoder(parsed: ParsedSchema) -> Decoder:
    model = parsed.model
    pool = descriptor_pool.DescriptorPool()
    added: set[str] = set()

    def add(proto: descriptor_pb2.FileDescriptorProto, depth: int) -> None:
        if proto.name in added or depth > 32:
            return
        for dep in proto.dependency:
            if dep in WELL_KNOWN:
                if dep not in added:
                    known = descriptor_pb2.FileDescriptorProto()
                    WELL_KNOWN[dep].CopyToProto(known)
                    add(known, depth + 1)
            elif dep in model.dependencies:
                add(model.dependencies[dep], depth + 1)
        pool.Add(proto)
        added.add(proto.name)

    add(model.file, 0)

    def decode(payload: bytes) -> str:
        indexes, at = message_indexes(payload)
        candidates = list(model.file.message_type)
        name = model.file.package
        for index in indexes:
            if not 0 <= index < len(candidates):
                raise Undecodable(f"message index {index} names no message of the schema")
            name = f"{name}.{candidates[index].name}" if name else candidates[index].name
            candidates = list(candidates[index].nested_type)
        descriptor = pool.FindMessageTypeByName(name)
        message = message_factory.GetMessageClass(descriptor)()
        try:
            message.ParseFromString(payload[at:])
        except Exception as exc:  # DecodeError and friends
            raise Undecodable(f"not a {descriptor.full_name}: {exc}") from exc
        text = json_format.MessageToJson(message, preserving_proto_field_name=True, indent=2)
        return f"{descriptor.full_name} {text}"

    return decode


BUILDERS: dict[str, Callable[[ParsedSchema], Decoder]] = {
    "AVRO": _avro_decoder,
    "JSON": _json_decoder,
    "PROTOBUF": _protobuf_decoder,
}


class WireDecoder:
    def __init__(self, reader: RegistryReader) -> None:
        self.reader = reader
        self._decoders: OrderedDict[int, tuple[str, Decoder]] = OrderedDict()

    async def _parse(
        self, schema_type: str, text: str, refs: Iterable[dict[str, Any]], depth: int
    ) -> ParsedSchema:
        if depth > MAX_REFERENCE_DEPTH:
            raise Undecodable(f"references nest deeper than {MAX_REFERENCE_DEPTH}")
        found: dict[str, ParsedSchema] = {}
        for ref in refs:
            v = await self.reader.version(str(ref["subject"]), int(ref["version"]))
            found[str(ref["name"])] = await self._parse(
                v.schema_type, v.schema, v.references, depth + 1
            )
        fmt = FORMATS.get(schema_type)
        if fmt is None:
            raise Undecodable(f"schema type {schema_type!r} is not one the console decodes")
        return await asyncio.to_thread(fmt.parse, text, found)

    async def _decoder(self, schema_id: int) -> tuple[str, Decoder]:
        cached = self._decoders.get(schema_id)
        if cached is not None:
            self._decoders.move_to_end(schema_id)
            return cached
        body = await self.reader.schema(schema_id)
        kind = str(body.get("schemaType", "AVRO"))
        parsed = await self._parse(kind, str(body["schema"]), body.get("references") or [], 0)
        built = (kind, BUILDERS[kind](parsed))
        self._decoders[schema_id] = built
        while len(self._decoders) > CACHED_DECODERS:
            self._decoders.popitem(last=False)
        return built

    async def decode(
        self, data: bytes | None, subject: str, expected: bool, usages: dict[int, Any]
    ) -> Decoded | None:
        """`data` decoded; None when it is not in the wire format and `subject` (the topic's
        key or value subject) is not registered (`expected`), so nothing is amiss.
        `usages` caches, for one page, where each id is registered."""
        if data is None:
            return None
        if len(data) < HEADER or data[0] != MAGIC:
            if not expected:
                return None
            return Decoded(
                None,
                f"not in the schema registry's wire format (magic byte 0, schema id),"
                f" though subject {subject} is registered",
            )
        (schema_id,) = struct.unpack_from(">I", data, 1)
        kind: str | None = None
        try:
            kind, decode = await self._decoder(schema_id)
            if schema_id not in usages:
                usages[schema_id] = await self.reader.usages(schema_id)
            text = await asyncio.to_thread(decode, data[HEADER:])
        except RegistryAnswered as exc:
            if exc.code == 40403:
                return Decoded(None, f"schema id {schema_id} is not in the registry", schema_id)
            return Decoded(None, f"schema id {schema_id}: the registry answered {exc}", schema_id)
        except RegistryUnavailable as exc:
            return Decoded(None, f"schema id {schema_id}: {exc}", schema_id)
        except (InvalidSchema, RegistryError) as exc:
            return Decoded(None, f"schema id {schema_id} does not parse: {exc}", schema_id)
        except Undecodable as exc:
            return Decoded(None, f"does not decode with schema id {schema_id}: {exc}", schema_id)
        except Exception as exc:  # fastavro's and protobuf's many kinds of bad input
            reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            return Decoded(
                None, f"does not decode with schema id {schema_id}: {reason}", schema_id, kind
            )
        where = usages[schema_id]
        match = next((u for u in where if u[0] == subject), where[0] if where else None)
        cut = len(text) > SHOWN_CHARS
        return Decoded(
            text[:SHOWN_CHARS],
            None,
            schema_id,
            kind,
            match[0] if match else None,
            match[1] if match else None,
            cut,
        )
