"""Building kio messages across API versions."""

from __future__ import annotations

from typing import Any


def build(cls: type, **fields: Any) -> Any:
    """Instantiate a kio dataclass with only the fields its version has."""
    names = cls.__dataclass_fields__
    return cls(**{k: v for k, v in fields.items() if k in names})
