"""Produce-time schema validation (Confluent Server's `confluent.key.schema.validation` and
`confluent.value.schema.validation` topic configs): a record's key or value must be in the
wire format (magic byte 0, then a 4-byte big-endian schema id) with an id registered under
the subject the topic's naming strategy gives (`confluent.key.subject.name.strategy`,
`confluent.value.subject.name.strategy`): TopicNameStrategy (`<topic>-key`,
`<topic>-value`, the default), RecordNameStrategy (the record's full name) or
TopicRecordNameStrategy (`<topic>-<record name>`). A record name is the Avro record's
full name, the Protobuf file's first message (with its package) or a JSON Schema's title.

The ids of a subject are cached per broker; an id not in the cache refreshes it (at most
once per REFRESH_S per subject), so a schema registered a moment ago on any broker is
accepted, and a producer of unknown ids costs at most one coordinator read per interval."""

from __future__ import annotations

import base64
import binascii
import json
import re
import time
from collections import OrderedDict
from collections.abc import Sequence

from google.protobuf import descriptor_pb2
from google.protobuf.message import DecodeError

from lakelog.coordinator.interface import BatchCoordinator
from lakelog.coordinator.registry_types import StoredSchema
from lakelog.log.protocol.record_prefixes import Prefix

MAGIC = 0
REFRESH_S = 0.2
MAX_SUBJECTS_CACHED = 10_000
MAX_NAMES_CACHED = 10_000
_PACKAGE = re.compile(r"^\s*package\s+([\w.]+)\s*;", re.M)
_MESSAGE = re.compile(r"^\s*message\s+(\w+)", re.M)


def record_name(stored: StoredSchema) -> str | None:
    """The name a record strategy files the schema under (None: it has none)."""
    try:
        if stored.schema_type == "AVRO":
            doc = json.loads(stored.schema)
            if not isinstance(doc, dict) or not isinstance(doc.get("name"), str):
                return None
            name, space = doc["name"], doc.get("namespace")
            return name if "." in name or not space else f"{space}.{name}"
        if stored.schema_type == "JSON":
            doc = json.loads(stored.schema)
            title = doc.get("title") if isinstance(doc, dict) else None
            return title if isinstance(title, str) else None
        text = stored.schema.strip()
        if "{" not in text and ";" not in text:
            file = descriptor_pb2.FileDescriptorProto.FromString(base64.b64decode(text))
            if not file.message_type:
                return None
            first = file.message_type[0].name
            return f"{file.package}.{first}" if file.package else first
        message = _MESSAGE.search(text)
        package = _PACKAGE.search(text)
        if message is None:
            return None
        return f"{package.group(1)}.{message.group(1)}" if package else message.group(1)
    except (ValueError, binascii.Error, DecodeError):
        return None


class SubjectIds:
    def __init__(self, coordinator: BatchCoordinator) -> None:
        self._coordinator = coordinator
        self._cache: OrderedDict[str, tuple[float, frozenset[int]]] = OrderedDict()
        self._names: OrderedDict[int, str | None] = OrderedDict()

    async def record_name(self, schema_id: int) -> str | None:
        """The record name of the schema with this id (None: no such schema, or none)."""
        if schema_id in self._names:
            return self._names[schema_id]
        found = await self._coordinator.registry_schemas([schema_id])
        name = record_name(found[0]) if found else None
        if found:  # an unknown id may be registered later: not cached
            self._names[schema_id] = name
            while len(self._names) > MAX_NAMES_CACHED:
                self._names.popitem(last=False)
        return name

    async def registered(self, subject: str, schema_id: int) -> bool:
        """Is `schema_id` the id of a live version of `subject`?"""
        cached = self._cache.get(subject)
        now = time.monotonic()
        if cached is not None and (schema_id in cached[1] or now - cached[0] < REFRESH_S):
            self._cache.move_to_end(subject)
            return schema_id in cached[1]
        versions = await self._coordinator.registry_subject_versions(subject)
        ids = frozenset(v.schema_id for v in versions if not v.deleted)
        self._cache[subject] = (now, ids)
        self._cache.move_to_end(subject)
        while len(self._cache) > MAX_SUBJECTS_CACHED:
            self._cache.popitem(last=False)
        return schema_id in ids


async def _problem(
    ids: SubjectIds, topic: str, what: str, strategy: str, prefix: Prefix
) -> str | None:
    if prefix is None or len(prefix) < 5 or prefix[0] != MAGIC:
        return f"{what} is not in the schema registry's wire format (magic byte 0, schema id)"
    schema_id = int.from_bytes(prefix[1:5], "big")
    if strategy in ("", "TopicNameStrategy"):
        subject = f"{topic}-{what}"
    else:
        name = await ids.record_name(schema_id)
        if name is None:
            return f"{what} schema id {schema_id} names no registered record schema"
        subject = name if strategy == "RecordNameStrategy" else f"{topic}-{name}"
    if not await ids.registered(subject, schema_id):
        return f"{what} schema id {schema_id} is not registered under subject {subject}"
    return None


async def invalid_records(
    ids: SubjectIds,
    topic: str,
    prefixes: Sequence[tuple[Prefix, Prefix]],
    key_strategy: str | None,
    value_strategy: str | None,
) -> list[tuple[int, str]]:
    """(batch index, why) of each record whose key or value the topic refuses; a strategy
    of None leaves that part unchecked."""
    refused: list[tuple[int, str]] = []
    for index, (key, value) in enumerate(prefixes):
        why = None
        if key_strategy is not None:
            why = await _problem(ids, topic, "key", key_strategy, key)
        if why is None and value_strategy is not None:
            why = await _problem(ids, topic, "value", value_strategy, value)
        if why is not None:
            refused.append((index, why))
    return refused
