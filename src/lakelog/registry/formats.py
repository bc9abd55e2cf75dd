"""What every schema type provides: parse a schema (with the schemas it references) into
its normalized text and a model, and list why a reader schema cannot read a writer's data."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol


@dataclass(frozen=True, slots=True)
class ParsedSchema:
    schema_type: str
    canonical: str
    """The normalized text stored and answered (whitespace and key order as Confluent
    prints them), so the same schema registered twice is the same schema."""
    identity: str
    """What two registrations must share to be the same schema (hashed with references)."""
    model: Any = field(compare=False)
    """The type's own parsed form, for compatibility checks."""


class SchemaFormat(Protocol):
    name: str

    def parse(self, text: str, references: Mapping[str, ParsedSchema]) -> ParsedSchema:
        """The parsed schema, or InvalidSchema saying why not. `references` maps each
        reference's name to the referenced schema, parsed."""
        ...

    def incompatibilities(self, reader: ParsedSchema, writer: ParsedSchema) -> list[str]:
        """Why data written with `writer` cannot be read with `reader` (empty: it can)."""
        ...
