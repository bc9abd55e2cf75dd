"""Encoding parts of a response apart, to splice answers from pieces that are encoded once
(Metadata's topic entries, CreateTopics' config lists) instead of on every request."""

from __future__ import annotations

import functools
import io
from typing import Any

from kio.serial import entity_writer
from kio.serial.writers import write_unsigned_varint


@functools.cache
def _writer(cls: type) -> Any:
    return entity_writer(cls)


def encode_entity(cls: type, value: Any) -> bytes:
    """One kio entity (a struct inside a response), encoded as kio would inside the whole."""
    out = io.BytesIO()
    _writer(cls)(out, value)
    return out.getvalue()


def compact_length(count: int) -> bytes:
    """The length prefix of a flexible version's array of `count` items."""
    out = io.BytesIO()
    write_unsigned_varint(out, count + 1)
    return out.getvalue()
