"""Nulls where the protocol allows none.

kio reads a null array (length -1, or compact length 0) into None whether or not the
field is nullable in Kafka's schema. Kafka's own parser rejects such a request as
malformed ("non-nullable field ... was serialized as null"); `wrong_null` finds the first
such field so the request is treated as undecodable instead of reaching a handler that
iterates it.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from collections.abc import Callable
from functools import cache
from typing import Any

Check = Callable[[Any], str | None]


_METADATA_KEY = 3


def wrong_null(entity: Any, api_key: int = -1, api_version: int = -1) -> str | None:
    """The dotted path of the first field of kio object `entity` (a request) that is None
    although Kafka's schema says non-nullable, or None when there is none."""
    found = _checker(type(entity))(entity)
    if (
        found is None
        and api_key == _METADATA_KEY
        and 10 <= api_version < 12
        and any(t.name is None for t in entity.topics or ())
    ):
        # Metadata v10-11 requests may carry null names but their responses cannot (the
        # topic id lookup came with v12): Kafka refuses them as invalid requests.
        return "topics.name (before v12)"
    return found


def _optional(hint: Any) -> bool:
    return typing.get_origin(hint) in (types.UnionType, typing.Union) and type(None) in (
        typing.get_args(hint)
    )


def _inner(hint: Any) -> tuple[type | None, bool]:
    """(the kio class inside `hint` if it holds entities, whether it is a list)."""
    if _optional(hint):
        hint = next(a for a in typing.get_args(hint) if a is not type(None))
    if typing.get_origin(hint) is tuple:
        item = typing.get_args(hint)[0]
        return (item if dataclasses.is_dataclass(item) else None), True
    return (hint if dataclasses.is_dataclass(hint) else None), False


@cache
def _checker(cls: type) -> Check:
    required: list[str] = []
    nested: list[tuple[str, type, bool]] = []
    for f in dataclasses.fields(cls):
        if not _optional(f.type) and "tag" not in f.metadata:
            required.append(f.name)
        inner, is_list = _inner(f.type)
        if inner is not None:
            nested.append((f.name, inner, is_list))

    def check(entity: Any) -> str | None:
        for name in required:
            if getattr(entity, name) is None:
                return name
        for name, inner, is_list in nested:
            value = getattr(entity, name)
            if value is None:
                continue
            sub = _checker(inner)
            for item in value if is_list else (value,):
                found = sub(item)
                if found is not None:
                    return f"{name}.{found}"
        return None

    return check
