"""The schema registry part of the batch coordinator contract: schemas by global id, the
versions of each subject, and the registry's settings. The registry's rules (parsing,
normalizing, compatibility) live in `lakelog.registry`; the coordinator stores what they
decided and keeps ids global, so every broker answers the same."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class SchemaReference:
    """A schema's reference to another subject's version, under the name it imports."""

    name: str
    subject: str
    version: int


@dataclass(frozen=True, slots=True)
class StoredSchema:
    id: int
    schema_type: str
    schema: str
    references: tuple[SchemaReference, ...] = ()


@dataclass(frozen=True, slots=True)
class SubjectVersion:
    """One version of a subject and the schema id it names."""

    subject: str
    version: int
    schema_id: int
    deleted: bool = False


@dataclass(frozen=True, slots=True)
class RegisterSchema:
    """Add `schema` to `subject` unless a live version already holds it.

    The caller checked compatibility against the live versions it read (`seen`); the
    coordinator registers only if they are still those, so two brokers registering at once
    cannot both pass a check against a state the other changed."""

    subject: str
    schema_type: str
    schema: str
    references: tuple[SchemaReference, ...]
    fingerprint: str
    seen: tuple[tuple[int, int], ...]
    """The subject's live (version, schema id) pairs the compatibility check saw."""
    wanted_id: int = -1
    """IMPORT mode: the id the caller chose (-1: the next free one)."""
    wanted_version: int = -1
    """IMPORT mode: the version the caller chose (-1: after the subject's last)."""
    max_subjects: int = 10_000
    max_versions: int = 1_000


@dataclass(frozen=True, slots=True)
class RegisterOutcome:
    outcome: str
    """"ok", "exists" (a live version already held it), "changed" (the subject's versions
    are not those seen: check again), "too_many_subjects", "too_many_versions",
    "id_taken" (IMPORT: the id names another schema), "version_taken" (IMPORT)."""
    schema_id: int = -1
    version: int = -1


@dataclass(frozen=True, slots=True)
class RegistryConfig:
    """A compatibility level, a mode and whether schemas are normalized ('true'/'false'),
    any of which may be unset (None)."""

    compatibility: str | None = None
    mode: str | None = None
    normalize: str | None = None
