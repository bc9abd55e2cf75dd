"""Query-string values the console accepts, checked before any request reaches the cluster:
a bad one is a 400 page naming the parameter, never a crash."""

from __future__ import annotations

import datetime
from collections.abc import Mapping

INT64_MAX = (1 << 63) - 1
MAX_TEXT = 256


class BadInput(ValueError):
    """A query-string value the console cannot use (400)."""


def text(query: Mapping[str, str], name: str, default: str = "") -> str:
    value = query.get(name, default)
    if len(value) > MAX_TEXT:
        raise BadInput(f"{name} is longer than {MAX_TEXT} characters")
    return value


def integer(
    query: Mapping[str, str], name: str, default: int | None, low: int = 0, high: int = INT64_MAX
) -> int | None:
    raw = text(query, name).strip()
    if not raw:
        return default
    try:
        if not raw.isascii():  # int() would take other scripts' digits
            raise ValueError(raw)
        value = int(raw, 10)
    except ValueError:
        raise BadInput(f"{name} must be a whole number, not {raw[:40]!r}") from None
    if not low <= value <= high:
        raise BadInput(f"{name} must be between {low} and {high}")
    return value


def timestamp_ms(query: Mapping[str, str], name: str) -> int | None:
    """Milliseconds since the epoch, or an ISO 8601 time (UTC when it names no zone, as the
    console shows every time in UTC)."""
    raw = text(query, name).strip()
    if not raw:
        return None
    if raw.isdigit():
        return integer(query, name, None)
    try:
        moment = datetime.datetime.fromisoformat(raw)
    except ValueError:
        raise BadInput(f"{name} must be an ISO 8601 time or epoch milliseconds") from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=datetime.UTC)
    ms = int(moment.timestamp() * 1000)
    if not 0 <= ms <= INT64_MAX:
        raise BadInput(f"{name} is out of range")
    return ms
