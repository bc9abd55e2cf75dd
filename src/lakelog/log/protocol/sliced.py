"""Encoding a response with a long top-level array entry by entry, with a pause point after
each entry (the caller's `pause` yields to the loop when its time budget is used).

kio encodes a whole response in one call. A DescribeGroups or DescribeConfigs answering tens
of thousands of entries took 150-350 ms of the event loop in one piece (measured under the
fuzzer), and every other client waited that long. Here the top-level fields are written with
kio's own field writers, and an array of entities longer than `SLICE_ITEMS` entry by entry
with `await pause()` after each. The bytes are exactly kio's
(tests/unit/protocol/test_sliced.py compares them).

Only the top level is sliced: the long arrays of Kafka's responses are at the top (groups,
results, topics); an entry with a long nested array is written in one piece.
"""

from __future__ import annotations

import io
from collections.abc import Awaitable, Callable
from dataclasses import fields
from functools import cache
from typing import Any

from kio.serial import entity_writer
from kio.serial._introspect import EntityTupleField, classify_field, get_field_tag
from kio.serial._serialize import get_field_writer
from kio.serial.writers import (
    write_compact_array_length,
    write_legacy_array_length,
    write_unsigned_varint,
)
from kio.static.primitive import i32, uvarint

SLICE_ITEMS = 256
"""Arrays longer than this are written with pause points (shorter ones take well under a
millisecond)."""

Writer = Callable[[Any, Any], None]
FieldPlan = tuple[str, Writer, Writer | None]
"""A field's name, its kio writer, and for an array of entities the entry writer."""


@cache
def _plan(entity_type: type) -> tuple[FieldPlan, ...] | None:
    """How to write `entity_type` field by field; None when it has tagged fields (kio
    writes those itself, in one piece)."""
    flexible = bool(entity_type.__flexible__)
    plan: list[FieldPlan] = []
    for field in fields(entity_type):
        if get_field_tag(field) is not None:
            return None
        writer = get_field_writer(field, flexible=flexible, is_request_header=False, is_tag=False)
        kind = classify_field(field)
        entry = entity_writer(kind.type_) if isinstance(kind, EntityTupleField) else None
        plan.append((field.name, writer, entry))
    return tuple(plan)


def has_long_array(entity: Any) -> bool:
    """Whether `entity` has a top-level array long enough to be worth slicing."""
    for field in fields(entity):
        value = getattr(entity, field.name)
        if isinstance(value, tuple) and len(value) > SLICE_ITEMS:
            return True
    return False


async def write_sliced(out: io.BytesIO, entity: Any, pause: Callable[[], Awaitable[None]]) -> None:
    """Write `entity` as kio would, with a pause point after each entry of its long
    top-level arrays."""
    entity_type = type(entity)
    plan = _plan(entity_type)
    if plan is None:
        entity_writer(entity_type)(out, entity)
        return
    flexible = bool(entity_type.__flexible__)
    for name, writer, entry_writer in plan:
        value = getattr(entity, name)
        if entry_writer is None or value is None or len(value) <= SLICE_ITEMS:
            writer(out, value)
            continue
        if flexible:
            write_compact_array_length(out, len(value))
        else:
            write_legacy_array_length(out, i32(len(value)))
        for item in value:
            entry_writer(out, item)
            await pause()
    if flexible:
        write_unsigned_varint(out, uvarint(0))  # no tagged fields
