"""Sample requests for every API and version the broker serves, built from kio's schemas
and encoded with kio's own writer (a value for every field, tagged fields included)."""

from __future__ import annotations

import dataclasses
import datetime
import io
import types
import typing
import uuid
from typing import Any

from kio.index import load_request_schema
from kio.schema.errors import ErrorCode
from kio.serial import entity_writer

import lakelog.server.api  # noqa: F401  (fills the handler table)
from lakelog.server.api.registry import HANDLERS

_VALUES: dict[str, Any] = {
    "bool": True,
    "int8": 1,
    "uint8": 1,
    "int16": 2,
    "uint16": 2,
    "int32": 3,
    "uint32": 3,
    "int64": 4,
    "uint64": 4,
    "float64": 1.5,
    "string": "ab",
    "bytes": b"xyz",
    "records": b"records",
    "uuid": uuid.UUID(int=0x1234),
    "error_code": ErrorCode.none,
    "timedelta_i32": datetime.timedelta(milliseconds=5),
    "timedelta_i64": datetime.timedelta(milliseconds=6),
    "datetime_i64": datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC),
}


def handled_versions() -> list[tuple[int, int]]:
    """Every (api key, version) in the handler table."""
    return [
        (key, version)
        for key, spec in sorted(HANDLERS.items())
        for version in range(spec.min_version, spec.max_version + 1)
    ]


def _optional(tp: Any) -> tuple[Any, bool]:
    if typing.get_origin(tp) in (types.UnionType, typing.Union):
        args = [a for a in typing.get_args(tp) if a is not type(None)]
        return args[0], True
    return tp, False


def sample(cls: type, *, count: int = 2, null: bool = False) -> Any:
    """An instance of `cls`: arrays of `count` elements; nullable fields None when `null`."""
    values: dict[str, Any] = {}
    for field in dataclasses.fields(cls):
        tp, nullable = _optional(field.type)
        if "tag" in field.metadata:
            nullable = False  # a tagged field is written only when it is not its default
        if nullable and null:
            values[field.name] = None
            continue
        if typing.get_origin(tp) is tuple:
            inner, _ = _optional(typing.get_args(tp)[0])
            if dataclasses.is_dataclass(inner):
                values[field.name] = tuple(
                    sample(inner, count=count, null=null) for _ in range(count)
                )
            else:
                values[field.name] = (_VALUES[field.metadata["kafka_type"]],) * count
        elif dataclasses.is_dataclass(tp):
            values[field.name] = sample(tp, count=count, null=null)
        else:
            values[field.name] = _VALUES[field.metadata["kafka_type"]]
    return cls(**values)


def encode(obj: Any) -> bytes:
    out = io.BytesIO()
    entity_writer(type(obj))(out, obj)
    return out.getvalue()


def sample_body(api_key: int, version: int, *, count: int = 2, null: bool = False) -> bytes:
    """The encoded body (no header) of a sample request."""
    return encode(sample(load_request_schema(api_key, version), count=count, null=null))


def frame(api_key: int, version: int, body: bytes, correlation_id: int = 7) -> bytes:
    """A request frame without its 4-byte size prefix: the header for that version, then
    `body`."""
    cls = load_request_schema(api_key, version)
    header_cls = cls.__header_schema__
    values = {
        "request_api_key": api_key,
        "request_api_version": version,
        "correlation_id": correlation_id,
        "client_id": "sample",
    }
    return encode(header_cls(**values)) + body
