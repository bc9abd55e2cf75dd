"""Protobuf: a schema is `.proto` text (compiled with grpcio-tools' protoc) or, as
confluent-kafka's Python serializer sends it, a base64 FileDescriptorProto (checked by
building it in a descriptor pool). Either way the model is the FileDescriptorProto, whose
deterministic bytes make the identity, so the same file sent either way is one schema.
Compatibility follows Confluent's rules for Protobuf: a removed message, a changed
package, a field whose number now has another kind, scalar type (outside Confluent's
wire-compatible groups), named type or label, a field that left a oneof or moved into an
existing one, and added or removed required fields are incompatible; added and removed
plain fields, renames and enum constants are not."""

from __future__ import annotations

import ast
import base64
import binascii
import os
import tempfile
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import PurePosixPath

import grpc_tools
from google.protobuf import (
    any_pb2,
    api_pb2,
    descriptor_pb2,
    descriptor_pool,
    duration_pb2,
    empty_pb2,
    field_mask_pb2,
    source_context_pb2,
    struct_pb2,
    timestamp_pb2,
    type_pb2,
    wrappers_pb2,
)
from google.protobuf.message import DecodeError
from grpc_tools import _protoc_compiler  # type: ignore[attr-defined]

from lakelog.registry.errors import InvalidSchema
from lakelog.registry.formats import ParsedSchema

FDP = descriptor_pb2.FileDescriptorProto
FieldProto = descriptor_pb2.FieldDescriptorProto
MAIN_FILE = "schema.proto"
WELL_KNOWN = {
    m.DESCRIPTOR.name: m.DESCRIPTOR
    for m in (
        any_pb2,
        api_pb2,
        descriptor_pb2,
        duration_pb2,
        empty_pb2,
        field_mask_pb2,
        source_context_pb2,
        struct_pb2,
        timestamp_pb2,
        type_pb2,
        wrappers_pb2,
    )
}
_INCLUDE = os.path.join(os.path.dirname(grpc_tools.__file__), "_proto")
COMPATIBLE_SCALARS = (
    {FieldProto.TYPE_INT32, FieldProto.TYPE_UINT32, FieldProto.TYPE_INT64}
    | {FieldProto.TYPE_UINT64, FieldProto.TYPE_BOOL},
    {FieldProto.TYPE_SINT32, FieldProto.TYPE_SINT64},
    {FieldProto.TYPE_FIXED32, FieldProto.TYPE_SFIXED32},
    {FieldProto.TYPE_FIXED64, FieldProto.TYPE_SFIXED64},
    {FieldProto.TYPE_STRING, FieldProto.TYPE_BYTES},
)
NAMED = {FieldProto.TYPE_MESSAGE, FieldProto.TYPE_ENUM, FieldProto.TYPE_GROUP}


@dataclass(frozen=True, slots=True)
class ProtoModel:
    file: descriptor_pb2.FileDescriptorProto
    dependencies: dict[str, descriptor_pb2.FileDescriptorProto]
    """Every file it imports (references, theirs, well-known types), by name."""
    text: str | None
    """The `.proto` text when it was given as text."""


def serialized(schema: ParsedSchema) -> str:
    """The schema as base64 FileDescriptorProto (Confluent's `format=serialized`)."""
    return base64.b64encode(schema.model.file.SerializeToString(deterministic=True)).decode()


def _safe_name(name: str) -> str:
    path = PurePosixPath(name)
    if path.is_absolute() or ".." in path.parts or not name or "\\" in name:
        raise InvalidSchema(f"reference name {name!r} is not a relative .proto path")
    return name


def _compile(text: str, references: Mapping[str, ParsedSchema]) -> FDP:
    with tempfile.TemporaryDirectory(prefix="lakelog-proto-") as tmp:
        for name, ref in references.items():
            if ref.model.text is None:
                raise InvalidSchema(f"reference {name!r} was registered as a descriptor, not text")
            target = os.path.join(tmp, _safe_name(name))
            os.makedirs(os.path.dirname(target), exist_ok=True)
            with open(target, "w", encoding="utf-8") as out:
                out.write(ref.model.text)
        with open(os.path.join(tmp, MAIN_FILE), "w", encoding="utf-8") as out:
            out.write(text)
        try:
            generated = _protoc_compiler.get_protos(
                MAIN_FILE.encode(), [tmp.encode(), _INCLUDE.encode()]
            )
        except Exception as exc:  # ProtocErrors: each error with its line and column
            raise InvalidSchema(_protoc_message(exc).replace(tmp + "/", "")) from exc
    for name, source in generated:
        if name.decode() == MAIN_FILE.replace(".proto", "_pb2.py"):
            return FDP.FromString(_serialized_file(source.decode()))
    raise InvalidSchema("protoc produced no descriptor")


def _protoc_message(exc: Exception) -> str:
    """protoc's errors as text. Not `str(exc)`: grpc-tools decodes them as ASCII, so an
    error quoting a non-ASCII character would raise instead of saying what is wrong."""
    try:
        found = exc.errors()  # type: ignore[attr-defined]
        return (
            "; ".join(
                f"{bytes(e.filename).decode('utf-8', 'replace')}:{e.line}:{e.column}: "
                f"{bytes(e.message).decode('utf-8', 'replace')}"
                for e in found
            )
            or "the .proto file does not compile"
        )
    except Exception:
        return "the .proto file does not compile"


def _serialized_file(source: str) -> bytes:
    """The FileDescriptorProto bytes protoc embedded in the Python module it generated."""
    for node in ast.walk(ast.parse(source)):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "AddSerializedFile"
            and node.args
            and isinstance(node.args[0], ast.Constant)
            and isinstance(node.args[0].value, bytes)
        ):
            return node.args[0].value
    raise InvalidSchema("protoc produced no descriptor")


def _dependencies(references: Mapping[str, ParsedSchema]) -> dict[str, FDP]:
    found: dict[str, FDP] = {}
    for name, ref in references.items():
        found.update(ref.model.dependencies)
        dep = FDP()
        dep.CopyFrom(ref.model.file)
        dep.name = name
        found[name] = dep
    return found


def _check_in_pool(file: FDP, dependencies: Mapping[str, FDP]) -> None:
    pool = descriptor_pool.DescriptorPool()
    added: set[str] = set()

    def add(name: str, depth: int) -> None:
        if name in added or depth > 32:
            return
        if name in WELL_KNOWN:
            proto = FDP()
            WELL_KNOWN[name].CopyToProto(proto)
        elif name in dependencies:
            proto = dependencies[name]
        else:
            raise InvalidSchema(f"import {name!r} is neither a reference nor a well-known type")
        for dep in proto.dependency:
            add(dep, depth + 1)
        pool.Add(proto)
        added.add(name)

    try:
        for dep in file.dependency:
            add(dep, 0)
        pool.Add(file)
        pool.FindFileByName(file.name)
    except InvalidSchema:
        raise
    except Exception as exc:
        raise InvalidSchema(str(exc)) from exc


def _identity(file: FDP) -> str:
    copy = FDP()
    copy.CopyFrom(file)
    copy.name = ""
    copy.ClearField("source_code_info")
    for message in _messages(copy.message_type):
        for field in message.field:
            field.ClearField("json_name")
    return base64.b64encode(copy.SerializeToString(deterministic=True)).decode()


def sorted_identity(file: FDP) -> str:
    """The identity of a file whose fields are in field-number order and whose imports are
    sorted (what normalization ignores)."""
    copy = FDP()
    copy.CopyFrom(file)
    imports = sorted(copy.dependency)
    del copy.dependency[:]
    copy.dependency.extend(imports)
    for message in _messages(copy.message_type):
        fields = sorted(message.field, key=lambda f: f.number)
        del message.field[:]
        message.field.extend(fields)
    return _identity(copy)


def _messages(messages: object, prefix: str = "") -> Iterator[descriptor_pb2.DescriptorProto]:
    for message in messages:  # type: ignore[attr-defined]
        yield message
        yield from _messages(message.nested_type)


def _named(messages: object, prefix: str) -> Iterator[tuple[str, descriptor_pb2.DescriptorProto]]:
    for message in messages:  # type: ignore[attr-defined]
        full = f"{prefix}.{message.name}" if prefix else message.name
        yield full, message
        yield from _named(message.nested_type, full)


class ProtobufFormat:
    name = "PROTOBUF"

    def parse(self, text: str, references: Mapping[str, ParsedSchema]) -> ParsedSchema:
        dependencies = _dependencies(references)
        stripped = text.strip()
        file: FDP | None = None
        if stripped and "{" not in stripped and ";" not in stripped:
            try:
                file = FDP.FromString(base64.b64decode(stripped, validate=True))
            except (binascii.Error, DecodeError, ValueError) as exc:
                raise InvalidSchema(f"neither .proto text nor a base64 descriptor: {exc}") from exc
            _check_in_pool(file, dependencies)
            model = ProtoModel(file, dependencies, None)
        else:
            file = _compile(text, references)
            model = ProtoModel(file, dependencies, stripped)
        return ParsedSchema(self.name, stripped, _identity(file), model)

    def incompatibilities(self, reader: ParsedSchema, writer: ParsedSchema) -> list[str]:
        new, old = reader.model.file, writer.model.file
        problems: list[str] = []
        if new.package != old.package:
            problems.append(f"package changed from {old.package!r} to {new.package!r}")
        new_messages = dict(_named(new.message_type, ""))
        new_enums = {e.name for e in new.enum_type}
        for e in old.enum_type:
            if e.name not in new_enums:
                problems.append(f"enum {e.name} removed")
        for name, message in _named(old.message_type, ""):
            if name not in new_messages:
                problems.append(f"message {name} removed")
                continue
            problems.extend(_fields(name, message, new_messages[name]))
        return problems


def _oneof(message: descriptor_pb2.DescriptorProto, field: FieldProto) -> str | None:
    if not field.HasField("oneof_index") or field.proto3_optional:
        return None
    return message.oneof_decl[field.oneof_index].name


def _fields(
    name: str, old: descriptor_pb2.DescriptorProto, new: descriptor_pb2.DescriptorProto
) -> list[str]:
    problems: list[str] = []
    new_fields = {f.number: f for f in new.field}
    old_oneofs = {o.name for o in old.oneof_decl}
    moved: dict[str, int] = {}
    for field in old.field:
        where = f"{name}.{field.name} ({field.number})"
        now = new_fields.get(field.number)
        was_in = _oneof(old, field)
        if now is None:
            if was_in is not None:
                problems.append(f"{where}: removed from oneof {was_in}")
            if field.label == FieldProto.LABEL_REQUIRED:
                problems.append(f"{where}: required field removed")
            continue
        if (field.type in NAMED) != (now.type in NAMED):
            problems.append(f"{where}: kind changed")
        elif field.type in NAMED:
            if (
                field.type != now.type
                or field.type_name.split(".")[-1] != now.type_name.split(".")[-1]
            ):
                problems.append(f"{where}: named type changed to {now.type_name}")
        elif field.type != now.type and not any(
            {field.type, now.type} <= group for group in COMPATIBLE_SCALARS
        ):
            problems.append(f"{where}: scalar type changed")
        if (field.label == FieldProto.LABEL_REPEATED) != (now.label == FieldProto.LABEL_REPEATED):
            problems.append(f"{where}: repeated label changed")
        if (field.label == FieldProto.LABEL_REQUIRED) != (now.label == FieldProto.LABEL_REQUIRED):
            problems.append(f"{where}: required label changed")
        is_in = _oneof(new, now)
        if was_in is not None and is_in is None:
            problems.append(f"{where}: left oneof {was_in}")
        elif was_in is None and is_in is not None:
            if is_in in old_oneofs:
                problems.append(f"{where}: moved into existing oneof {is_in}")
            moved[is_in] = moved.get(is_in, 0) + 1
    for oneof, count in moved.items():
        if count > 1:
            problems.append(f"{name}: {count} fields moved into oneof {oneof}")
    old_numbers = {f.number for f in old.field}
    for number, field in new_fields.items():
        if number not in old_numbers and field.label == FieldProto.LABEL_REQUIRED:
            problems.append(f"{name}.{field.name} ({number}): required field added")
    return problems


PROTOBUF = ProtobufFormat()
