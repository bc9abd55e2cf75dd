"""Strings too long for the legacy (int16-length) string encoding of older API versions.

Names in requests are at most 32,767 bytes, but an answer can build longer ones from them:
an error message that quotes a 32 KB topic or config name, a member id made of a 32 KB
client id and a UUID. kio refuses to encode such a response; `clip_strings` gives a copy
whose strings fit, so the client gets its answer instead of a dropped connection.
"""

from __future__ import annotations

import dataclasses
from typing import Any

LEGACY_STRING_MAX_BYTES = 32767


def clip_strings(entity: Any, max_bytes: int = LEGACY_STRING_MAX_BYTES) -> Any:
    """A copy of kio object `entity` whose every string is at most `max_bytes` UTF-8
    bytes (cut at a character boundary); `entity` itself when none is longer."""
    changes: dict[str, Any] = {}
    for f in dataclasses.fields(entity):
        value = getattr(entity, f.name)
        clipped = _clip(value, max_bytes)
        if clipped is not value:
            changes[f.name] = clipped
    return dataclasses.replace(entity, **changes) if changes else entity


def _clip(value: Any, max_bytes: int) -> Any:
    if isinstance(value, str):
        data = value.encode()
        if len(data) <= max_bytes:
            return value
        return type(value)(data[:max_bytes].decode("utf-8", "ignore"))
    if isinstance(value, tuple):
        items = tuple(_clip(v, max_bytes) for v in value)
        return items if any(a is not b for a, b in zip(items, value, strict=True)) else value
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return clip_strings(value, max_bytes)
    return value
