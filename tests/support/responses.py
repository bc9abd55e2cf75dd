"""Reading decoded (kio) responses in tests."""

from __future__ import annotations

import dataclasses
from typing import Any

from lakelog.util.errors import ErrorCode


def error_codes(obj: Any) -> list[ErrorCode]:
    """Every error code anywhere in a decoded response, in field order."""
    found: list[ErrorCode] = []
    if dataclasses.is_dataclass(obj):
        for f in dataclasses.fields(obj):
            value = getattr(obj, f.name)
            if isinstance(value, ErrorCode):
                found.append(value)
            else:
                found.extend(error_codes(value))
    elif isinstance(obj, tuple):
        for item in obj:
            found.extend(error_codes(item))
    return found
