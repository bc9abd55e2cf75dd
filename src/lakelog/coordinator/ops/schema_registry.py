"""The schema registry's storage: schemas by global id, subject versions (soft and hard
deleted), references, and settings. Registry writes take the global settings row's lock
first (PostgreSQL), so ids are handed out one at a time and a registration sees every
version committed before it; SQLite's one writer gives the same."""

from __future__ import annotations

import json
from collections.abc import Sequence

from lakelog.coordinator.engine import Session
from lakelog.coordinator.registry_types import (
    RegisterOutcome,
    RegisterSchema,
    RegistryConfig,
    SchemaReference,
    StoredSchema,
    SubjectVersion,
)


def _refs_json(refs: Sequence[SchemaReference]) -> str:
    return json.dumps([[r.name, r.subject, r.version] for r in refs])


def _refs(text: str) -> tuple[SchemaReference, ...]:
    return tuple(SchemaReference(str(n), str(s), int(v)) for n, s, v in json.loads(text))


async def _lock(s: Session) -> None:
    if s.dialect.for_update:
        await s.fetchall(
            "SELECT subject FROM registry_configs WHERE subject = ''" + s.dialect.for_update
        )


async def subjects(s: Session, deleted: bool) -> list[str]:
    """Subjects with a live version (with `deleted`: with any version), sorted."""
    where = "" if deleted else " WHERE deleted = 0"
    rows = await s.fetchall(
        f"SELECT DISTINCT subject FROM registry_versions{where} ORDER BY subject"
    )
    return [str(r[0]) for r in rows]


async def subject_versions(s: Session, subject: str) -> list[SubjectVersion]:
    """Every version of `subject` (live and soft-deleted), oldest first."""
    rows = await s.fetchall(
        "SELECT version, schema_id, deleted FROM registry_versions WHERE subject = ?"
        " ORDER BY version",
        (subject,),
    )
    return [SubjectVersion(subject, int(r[0]), int(r[1]), bool(r[2])) for r in rows]


async def schemas_by_id(s: Session, ids: Sequence[int]) -> list[StoredSchema]:
    """The stored schemas of `ids` that exist, by id."""
    if not ids:
        return []
    keys, params = s.dialect.keyset("k", (("i", "bigint"),), [(i,) for i in ids])
    rows = await s.fetchall(
        "SELECT id, schema_type, schema_text, refs FROM registry_schemas"
        f" WHERE id IN (SELECT k.i FROM {keys}) ORDER BY id",
        params,
    )
    return [StoredSchema(int(r[0]), str(r[1]), str(r[2]), _refs(str(r[3]))) for r in rows]


async def schema_usages(s: Session, schema_id: int) -> list[SubjectVersion]:
    """Every subject version (live and soft-deleted) that names the schema."""
    rows = await s.fetchall(
        "SELECT subject, version, deleted FROM registry_versions WHERE schema_id = ?"
        " ORDER BY subject, version",
        (schema_id,),
    )
    return [SubjectVersion(str(r[0]), int(r[1]), schema_id, bool(r[2])) for r in rows]


async def find_schema(s: Session, fingerprint: str) -> int | None:
    row = await s.fetchone("SELECT id FROM registry_schemas WHERE fingerprint = ?", (fingerprint,))
    return None if row is None else int(row[0])


async def referenced_by(s: Session, subject: str, version: int) -> list[int]:
    """Ids of the schemas (still named by some live version) that refer to the version."""
    rows = await s.fetchall(
        "SELECT DISTINCT r.schema_id FROM registry_references r"
        " JOIN registry_versions v ON v.schema_id = r.schema_id AND v.deleted = 0"
        " WHERE r.subject = ? AND r.version = ? ORDER BY r.schema_id",
        (subject, version),
    )
    return [int(r[0]) for r in rows]


async def register(s: Session, req: RegisterSchema) -> RegisterOutcome:
    await _lock(s)
    versions = await subject_versions(s, req.subject)
    live = tuple((v.version, v.schema_id) for v in versions if not v.deleted)
    existing = await find_schema(s, req.fingerprint)
    if existing is not None and req.wanted_version < 0:
        for version, schema_id in live:
            if schema_id == existing and (req.wanted_id < 0 or req.wanted_id == existing):
                return RegisterOutcome("exists", existing, version)
    if live != req.seen:
        return RegisterOutcome("changed")
    if not versions:
        row = await s.fetchone("SELECT COUNT(DISTINCT subject) FROM registry_versions")
        if row is not None and int(row[0]) >= req.max_subjects:
            return RegisterOutcome("too_many_subjects")
    elif len(versions) >= req.max_versions:
        return RegisterOutcome("too_many_versions")
    schema_id = existing
    if req.wanted_id >= 0:
        if existing is not None and existing != req.wanted_id:
            return RegisterOutcome("id_taken", existing)
        if existing is None and await schemas_by_id(s, [req.wanted_id]):
            return RegisterOutcome("id_taken", req.wanted_id)
        schema_id = req.wanted_id
    if schema_id is None or existing is None:
        if schema_id is None:
            row = await s.fetchone("SELECT COALESCE(MAX(id), 0) + 1 FROM registry_schemas")
            schema_id = int(row[0]) if row is not None else 1
        await s.execute(
            "INSERT INTO registry_schemas (id, schema_type, schema_text, refs, fingerprint)"
            " VALUES (?, ?, ?, ?, ?)",
            (schema_id, req.schema_type, req.schema, _refs_json(req.references), req.fingerprint),
        )
        if req.references:
            await s.executemany(
                "INSERT INTO registry_references (schema_id, name, subject, version)"
                " VALUES (?, ?, ?, ?) ON CONFLICT (schema_id, name) DO NOTHING",
                [(schema_id, r.name, r.subject, r.version) for r in req.references],
            )
    version = req.wanted_version
    if version < 0:
        version = max((v.version for v in versions), default=0) + 1
    elif any(v.version == version for v in versions):
        return RegisterOutcome("version_taken", schema_id, version)
    await s.execute(
        "INSERT INTO registry_versions (subject, version, schema_id, deleted) VALUES (?, ?, ?, 0)",
        (req.subject, version, schema_id),
    )
    return RegisterOutcome("ok", schema_id, version)


async def delete_versions(
    s: Session, subject: str, versions: Sequence[int], permanent: bool
) -> None:
    """Soft-delete (or, `permanent`, remove) the subject's versions; the caller checked
    the rules (soft before hard, no live references)."""
    await _lock(s)
    if not versions:
        return
    keys, params = s.dialect.keyset("k", (("v", "int"),), [(v,) for v in versions])
    where = f"subject = ? AND version IN (SELECT k.v FROM {keys})"
    if permanent:
        await s.execute(f"DELETE FROM registry_versions WHERE {where}", [subject, *params])
    else:
        await s.execute(
            f"UPDATE registry_versions SET deleted = 1 WHERE {where}", [subject, *params]
        )


async def configs(s: Session, subject: str) -> tuple[RegistryConfig, RegistryConfig]:
    """(the global settings, the subject's own); unset parts are None."""
    rows = await s.fetchall(
        "SELECT subject, compatibility, mode, normalize FROM registry_configs"
        " WHERE subject IN ('', ?)",
        (subject,),
    )
    found = {str(r[0]): RegistryConfig(r[1], r[2], r[3]) for r in rows}
    own = found.get(subject, RegistryConfig()) if subject else RegistryConfig()
    return found.get("", RegistryConfig()), own


async def set_config(s: Session, subject: str, field: str, value: str | None) -> None:
    """Set `subject`'s ('' is global) compatibility level, mode or normalize (`field`);
    None unsets."""
    if field not in ("compatibility", "mode", "normalize"):
        raise ValueError(field)
    await _lock(s)
    await s.execute(
        f"INSERT INTO registry_configs (subject, {field}) VALUES (?, ?)"
        f" ON CONFLICT (subject) DO UPDATE SET {field} = excluded.{field}",
        (subject, value),
    )
