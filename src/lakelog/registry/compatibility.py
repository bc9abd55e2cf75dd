"""Compatibility levels: which earlier versions a new schema is checked against, and in
which direction. BACKWARD: the new schema reads data written with the old; FORWARD: the
old reads the new's; FULL: both. The _TRANSITIVE levels check every live version, the
others only the latest; NONE checks nothing."""

from __future__ import annotations

from collections.abc import Sequence

from lakelog.registry.formats import ParsedSchema, SchemaFormat

LEVELS = (
    "NONE",
    "BACKWARD",
    "BACKWARD_TRANSITIVE",
    "FORWARD",
    "FORWARD_TRANSITIVE",
    "FULL",
    "FULL_TRANSITIVE",
)
MODES = ("READWRITE", "READONLY", "READONLY_OVERRIDE", "IMPORT")


def incompatibilities(
    fmt: SchemaFormat, level: str, new: ParsedSchema, earlier: Sequence[ParsedSchema]
) -> list[str]:
    """Why `new` may not follow `earlier` (oldest first) at `level` (empty: it may)."""
    if level == "NONE" or not earlier:
        return []
    against = earlier if level.endswith("_TRANSITIVE") else earlier[-1:]
    base = level.removesuffix("_TRANSITIVE")
    problems: list[str] = []
    for old in reversed(against):
        if old.schema_type != new.schema_type:
            problems.append(f"schema type changed from {old.schema_type} to {new.schema_type}")
            continue
        if base in ("BACKWARD", "FULL"):
            problems += [f"backward: {p}" for p in fmt.incompatibilities(new, old)]
        if base in ("FORWARD", "FULL"):
            problems += [f"forward: {p}" for p in fmt.incompatibilities(old, new)]
    return problems
