"""The registry's operations, as Confluent's REST API defines them, over the coordinator:
each returns the JSON answer or raises RegistryError with Confluent's code. Parsed schemas
are kept in a bounded cache by id (a stored schema never changes).

Kept whole past 600 lines: it is the one place Confluent's rules meet (which level, mode and
normalization apply to a subject, how references resolve, which versions a new schema is
checked against), one method per endpoint; the routes (`app.py`), the formats and the
compatibility checks are already their own modules."""

from __future__ import annotations

import hashlib
import json
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from lakelog.coordinator.interface import BatchCoordinator
from lakelog.coordinator.registry_types import (
    RegisterSchema,
    SchemaReference,
    StoredSchema,
    SubjectVersion,
)
from lakelog.registry import errors as e
from lakelog.registry.avro import AVRO
from lakelog.registry.compatibility import LEVELS, MODES, incompatibilities
from lakelog.registry.errors import InvalidSchema, RegistryError
from lakelog.registry.formats import ParsedSchema, SchemaFormat
from lakelog.registry.json_schema import JSON_SCHEMA
from lakelog.registry.normalize import normalized
from lakelog.registry.protobuf import PROTOBUF, serialized

FORMATS: dict[str, SchemaFormat] = {f.name: f for f in (AVRO, JSON_SCHEMA, PROTOBUF)}
MAX_VERSION = 2**31 - 1
REGISTER_ATTEMPTS = 8


@dataclass(frozen=True, slots=True)
class RegistryLimits:
    max_schema_bytes: int = 1_048_576
    max_subjects: int = 10_000
    max_versions: int = 1_000
    max_references: int = 100
    """References one schema names directly."""
    max_reference_depth: int = 16
    """How deep a tree of references may go (a schema naming one naming one...)."""
    default_compatibility: str = "BACKWARD"
    parsed_cache: int = 1_000


def parse_version(text: str) -> int:
    """A version in a path: 1..2^31-1, or "latest" / -1 (answered as -1)."""
    if text == "latest":
        return -1
    try:
        version = int(text)
    except ValueError:
        version = 0
    if version == -1:
        return -1
    if not 1 <= version <= MAX_VERSION:
        raise RegistryError(
            e.INVALID_VERSION,
            f"The specified version '{text}' is not a valid version id. Allowed values are"
            ' between [1, 2^31-1] and the string "latest"',
        )
    return version


def check_subject(subject: str) -> None:
    if not subject or len(subject) > 255 or any(ord(c) < 32 for c in subject):
        raise RegistryError(
            e.INVALID_SUBJECT, f"The specified subject '{subject[:255]}' is not valid."
        )


def _subject_not_found(subject: str) -> RegistryError:
    return RegistryError(e.SUBJECT_NOT_FOUND, f"Subject '{subject}' not found.")


def _version_not_found(subject: str, version: int) -> RegistryError:
    return RegistryError(
        e.VERSION_NOT_FOUND, f"Version {version} not found for subject '{subject}'."
    )


def _schema_not_found(schema_id: int | None = None) -> RegistryError:
    what = "Schema not found" if schema_id is None else f"Schema {schema_id} not found"
    return RegistryError(e.SCHEMA_NOT_FOUND, what)


def refs_json(refs: Sequence[SchemaReference]) -> list[dict[str, object]]:
    return [{"name": r.name, "subject": r.subject, "version": r.version} for r in refs]


class SchemaRegistry:
    def __init__(self, coordinator: BatchCoordinator, limits: RegistryLimits) -> None:
        self.coordinator = coordinator
        self.limits = limits
        self._parsed: OrderedDict[int, ParsedSchema] = OrderedDict()
        self._heights: dict[int, int] = {}
        """How deep each cached schema's tree of references goes (0: none)."""

    # -- parsing

    def _request_schema(self, body: Any) -> tuple[SchemaFormat, str, tuple[SchemaReference, ...]]:
        if not isinstance(body, dict):
            raise RegistryError(422, "The request body must be a JSON object", 422)
        kind = body.get("schemaType", "AVRO") or "AVRO"
        text = body.get("schema")
        if not isinstance(kind, str) or kind.upper() not in FORMATS:
            raise InvalidSchema(f"unknown schema type {kind!r}; known: {sorted(FORMATS)}")
        if not isinstance(text, str) or not text.strip():
            raise RegistryError(e.INVALID_SCHEMA, "Empty schema")
        if len(text.encode()) > self.limits.max_schema_bytes:
            raise RegistryError(
                e.SCHEMA_TOO_LARGE,
                f"Schema is larger than {self.limits.max_schema_bytes} bytes",
            )
        raw_refs = body.get("references") or []
        if not isinstance(raw_refs, list) or len(raw_refs) > self.limits.max_references:
            raise InvalidSchema(
                f"references must be a list of at most {self.limits.max_references}"
            )
        refs: list[SchemaReference] = []
        for ref in raw_refs:
            if not (
                isinstance(ref, dict)
                and isinstance(ref.get("name"), str)
                and isinstance(ref.get("subject"), str)
                and isinstance(ref.get("version"), int)
                and not isinstance(ref.get("version"), bool)
            ):
                raise InvalidSchema("a reference is {name, subject, version}")
            refs.append(SchemaReference(ref["name"], ref["subject"], ref["version"]))
        if len({r.name for r in refs}) != len(refs):
            raise InvalidSchema("two references with one name")
        return FORMATS[kind.upper()], text, tuple(refs)

    async def _references(
        self, refs: Sequence[SchemaReference]
    ) -> tuple[dict[str, ParsedSchema], tuple[SchemaReference, ...]]:
        """The referenced schemas, parsed, by name; and the references with "latest" (-1)
        resolved to the version it names now. A tree of references deeper than the cap is
        refused (a cycle cannot form: a reference names a version that exists already)."""
        found: dict[str, ParsedSchema] = {}
        resolved: list[SchemaReference] = []
        for ref in refs:
            versions = [
                v
                for v in await self.coordinator.registry_subject_versions(ref.subject)
                if not v.deleted
            ]
            match = (
                versions[-1:]
                if ref.version == -1
                else [v for v in versions if v.version == ref.version]
            )
            if not match:
                raise InvalidSchema(
                    f"reference {ref.name!r}: subject {ref.subject!r} version {ref.version}"
                    " not found"
                )
            schema_id = match[0].schema_id
            found[ref.name] = await self._parsed_by_id(schema_id)
            if self._heights[schema_id] + 1 > self.limits.max_reference_depth:
                raise InvalidSchema(
                    f"references nest deeper than {self.limits.max_reference_depth}"
                )
            resolved.append(SchemaReference(ref.name, ref.subject, match[0].version))
        return found, tuple(resolved)

    async def parsed(self, schema_id: int) -> ParsedSchema:
        """Schema `schema_id` parsed, its references resolved (SchemaNotFound: no such id):
        for readers of the wire format, such as the tables job."""
        return await self._parsed_by_id(schema_id)

    async def _parsed_by_id(self, schema_id: int) -> ParsedSchema:
        cached = self._parsed.get(schema_id)
        if cached is not None:
            self._parsed.move_to_end(schema_id)
            return cached
        stored = await self._stored(schema_id)
        refs, resolved = await self._references(stored.references)
        ids = [(await self._ref_id(r)) for r in resolved]
        parsed = FORMATS[stored.schema_type].parse(
            stored.schema, _same_type(stored.schema_type, refs)
        )
        self._parsed[schema_id] = parsed
        self._heights[schema_id] = max((self._heights.get(i, 0) + 1 for i in ids), default=0)
        while len(self._parsed) > self.limits.parsed_cache:
            evicted, _ = self._parsed.popitem(last=False)
            self._heights.pop(evicted, None)
        return parsed

    async def _ref_id(self, ref: SchemaReference) -> int:
        for v in await self.coordinator.registry_subject_versions(ref.subject):
            if v.version == ref.version:
                return v.schema_id
        raise InvalidSchema(f"reference {ref.name!r} not found")

    async def _stored(self, schema_id: int) -> StoredSchema:
        found = await self.coordinator.registry_schemas([schema_id])
        if not found:
            raise _schema_not_found(schema_id)
        return found[0]

    async def _parse_request(
        self, body: Any, normalize: bool = False
    ) -> tuple[SchemaFormat, ParsedSchema, tuple[SchemaReference, ...], str]:
        fmt, text, refs = self._request_schema(body)
        found, resolved = await self._references(refs)
        parsed = fmt.parse(text, _same_type(fmt.name, found))
        if normalize:
            parsed = normalized(parsed)
        digest = hashlib.sha256(
            json.dumps([fmt.name, parsed.identity, refs_json(resolved)]).encode()
        ).hexdigest()
        return fmt, parsed, resolved, digest

    # -- settings

    async def compatibility(self, subject: str) -> str:
        glob, own = await self.coordinator.registry_configs(subject)
        return own.compatibility or glob.compatibility or self.limits.default_compatibility

    async def normalizing(self, subject: str, asked: bool) -> bool:
        """Whether a register or lookup normalizes: asked (`?normalize=true`), or the
        subject's `normalize` config, else the global one."""
        if asked:
            return True
        glob, own = await self.coordinator.registry_configs(subject)
        return (own.normalize or glob.normalize) == "true"

    async def _normalized_match(
        self,
        versions: Sequence[SubjectVersion],
        parsed: ParsedSchema,
        refs: Sequence[SchemaReference],
    ) -> SubjectVersion | None:
        """The newest of `versions` whose schema, normalized, is `parsed` (normalized) with
        the same references: a schema registered before normalization was asked for."""
        for v in reversed(versions):
            stored = await self._stored(v.schema_id)
            if stored.schema_type != parsed.schema_type or tuple(stored.references) != tuple(refs):
                continue
            if normalized(await self._parsed_by_id(v.schema_id)).identity == parsed.identity:
                return v
        return None

    async def mode(self, subject: str) -> str:
        glob, own = await self.coordinator.registry_configs(subject)
        return own.mode or glob.mode or "READWRITE"

    async def _writable(self, subject: str) -> str:
        mode = await self.mode(subject)
        if mode == "READONLY":
            raise RegistryError(
                e.OPERATION_NOT_PERMITTED, f"Subject {subject} is in read-only mode"
            )
        return mode

    async def get_config(self, subject: str, default_to_global: bool) -> dict[str, Any]:
        glob, own = await self.coordinator.registry_configs(subject)
        if (
            subject
            and own.compatibility is None
            and own.normalize is None
            and not default_to_global
        ):
            raise RegistryError(
                e.SUBJECT_COMPATIBILITY_NOT_CONFIGURED,
                f"Subject '{subject}' does not have subject-level compatibility configured",
            )
        level = own.compatibility or glob.compatibility or self.limits.default_compatibility
        answer: dict[str, Any] = {"compatibilityLevel": level}
        normalize = own.normalize or (glob.normalize if default_to_global or not subject else None)
        if normalize is not None:
            answer["normalize"] = normalize == "true"
        return answer

    async def set_config(self, subject: str, body: Any) -> dict[str, Any]:
        """`{"compatibility": LEVEL}`, `{"normalize": BOOL}` or both."""
        given = body if isinstance(body, dict) else {}
        level = given.get("compatibility")
        normalize = given.get("normalize")
        bad_level = level is not None and (
            not isinstance(level, str) or level.upper() not in LEVELS
        )
        if bad_level or (level is None and not isinstance(normalize, bool)):
            raise RegistryError(
                e.INVALID_COMPATIBILITY_LEVEL,
                "Invalid compatibility level. Valid values are none, backward, forward, full,"
                " backward_transitive, forward_transitive, and full_transitive",
            )
        if normalize is not None and not isinstance(normalize, bool):
            raise RegistryError(422, "normalize must be true or false", 422)
        answer: dict[str, Any] = {}
        if level is not None:
            await self.coordinator.registry_set_config(subject, "compatibility", level.upper())
            answer["compatibility"] = level.upper()
        if normalize is not None:
            await self.coordinator.registry_set_config(
                subject, "normalize", "true" if normalize else "false"
            )
            answer["normalize"] = normalize
        return answer

    async def delete_config(self, subject: str) -> dict[str, Any]:
        glob, own = await self.coordinator.registry_configs(subject)
        before = (own if subject else glob).compatibility
        if subject and before is None and not await self._subject_exists(subject):
            raise _subject_not_found(subject)
        await self.coordinator.registry_set_config(subject, "compatibility", None)
        await self.coordinator.registry_set_config(subject, "normalize", None)
        return {"compatibilityLevel": before or self.limits.default_compatibility}

    async def get_mode(self, subject: str, default_to_global: bool) -> dict[str, Any]:
        glob, own = await self.coordinator.registry_configs(subject)
        if subject and own.mode is None and not default_to_global:
            raise RegistryError(
                e.SUBJECT_MODE_NOT_CONFIGURED,
                f"Subject '{subject}' does not have subject-level mode configured",
            )
        return {"mode": own.mode or glob.mode or "READWRITE"}

    async def set_mode(self, subject: str, body: Any, force: bool) -> dict[str, Any]:
        mode = body.get("mode") if isinstance(body, dict) else None
        if not isinstance(mode, str) or mode.upper() not in MODES:
            raise RegistryError(
                e.INVALID_MODE,
                "Invalid mode. Valid values are READWRITE, READONLY, READONLY_OVERRIDE, IMPORT",
            )
        mode = mode.upper()
        if mode == "IMPORT" and not force:
            present = (
                await self._subject_exists(subject)
                if subject
                else bool(await self.coordinator.registry_subjects(False))
            )
            if present:
                raise RegistryError(
                    e.OPERATION_NOT_PERMITTED,
                    "Cannot import since found existing subjects (use force=true)",
                )
        await self.coordinator.registry_set_config(subject, "mode", mode)
        return {"mode": mode}

    async def delete_mode(self, subject: str) -> dict[str, Any]:
        before = await self.mode(subject)
        await self.coordinator.registry_set_config(subject, "mode", None)
        return {"mode": before}

    # -- subjects and versions

    async def _subject_exists(self, subject: str) -> bool:
        return any(not v.deleted for v in await self.coordinator.registry_subject_versions(subject))

    async def _versions(self, subject: str, deleted: bool) -> list[SubjectVersion]:
        versions = await self.coordinator.registry_subject_versions(subject)
        shown = [v for v in versions if deleted or not v.deleted]
        if not shown:
            raise _subject_not_found(subject)
        return shown

    async def subjects(self, deleted: bool, prefix: str) -> list[str]:
        return [
            s for s in await self.coordinator.registry_subjects(deleted) if s.startswith(prefix)
        ]

    async def versions(self, subject: str, deleted: bool) -> list[int]:
        return [v.version for v in await self._versions(subject, deleted)]

    async def _version(self, subject: str, version: int, deleted: bool) -> SubjectVersion:
        versions = await self._versions(subject, deleted)
        if version == -1:
            live = [v for v in versions if not v.deleted] or versions
            return live[-1]
        for v in versions:
            if v.version == version:
                return v
        raise _version_not_found(subject, version)

    async def schema_answer(
        self, schema_id: int, fmt: str | None = None, extra: Mapping[str, Any] | None = None
    ) -> dict[str, Any]:
        stored = await self._stored(schema_id)
        text = stored.schema
        if stored.schema_type == "PROTOBUF" and fmt == "serialized":
            text = serialized(await self._parsed_by_id(schema_id))
        answer: dict[str, Any] = dict(extra or {})
        answer["id"] = schema_id
        if stored.schema_type != "AVRO":
            answer["schemaType"] = stored.schema_type
        if stored.references:
            answer["references"] = refs_json(stored.references)
        answer["schema"] = text
        return answer

    async def get_version(
        self, subject: str, version: int, deleted: bool, fmt: str | None
    ) -> dict[str, Any]:
        found = await self._version(subject, version, deleted)
        return await self.schema_answer(
            found.schema_id, fmt, {"subject": subject, "version": found.version}
        )

    async def referenced_by(self, subject: str, version: int) -> list[int]:
        found = await self._version(subject, version, False)
        return await self.coordinator.registry_referenced_by(subject, found.version)

    async def lookup(
        self, subject: str, body: Any, deleted: bool, normalize: bool = False
    ) -> dict[str, Any]:
        versions = await self._versions(subject, deleted)
        normalize = await self.normalizing(subject, normalize)
        _, parsed, refs, digest = await self._parse_request(body, normalize)
        schema_id = await self.coordinator.registry_find_schema(digest)
        found = next((v for v in reversed(versions) if v.schema_id == schema_id), None)
        if found is None and normalize:
            found = await self._normalized_match(versions, parsed, refs)
        if found is None:
            raise _schema_not_found()
        return await self.schema_answer(
            found.schema_id, None, {"subject": subject, "version": found.version}
        )

    async def register(self, subject: str, body: Any, normalize: bool = False) -> dict[str, Any]:
        check_subject(subject)
        mode = await self._writable(subject)
        wanted_id, wanted_version = -1, -1
        if isinstance(body, dict):
            wanted_id = _optional_int(body.get("id"), "id")
            wanted_version = _optional_int(body.get("version"), "version")
        if (wanted_id >= 0 or wanted_version >= 0) and mode != "IMPORT":
            existing = await self._existing_id_matches(subject, body, wanted_id)
            if existing is not None:
                return existing
            raise RegistryError(
                e.OPERATION_NOT_PERMITTED,
                "A schema id or version can only be given in IMPORT mode",
            )
        normalize = await self.normalizing(subject, normalize)
        fmt, parsed, refs, digest = await self._parse_request(body, normalize)
        for _ in range(REGISTER_ATTEMPTS):
            versions = await self.coordinator.registry_subject_versions(subject)
            live = [v for v in versions if not v.deleted]
            if normalize and mode != "IMPORT":
                same_version = await self._normalized_match(live, parsed, refs)
                if same_version is not None:
                    return {"id": same_version.schema_id}
            if mode != "IMPORT":
                level = await self.compatibility(subject)
                same = await self.coordinator.registry_find_schema(digest)
                if same is None or all(v.schema_id != same for v in live):
                    earlier = await self._earlier(level, live)
                    problems = incompatibilities(fmt, level, parsed, earlier)
                    if problems:
                        raise RegistryError(
                            e.INCOMPATIBLE_SCHEMA,
                            "Schema being registered is incompatible with an earlier schema for"
                            f' subject "{subject}", details: {problems[:20]}',
                        )
            outcome = await self.coordinator.registry_register(
                RegisterSchema(
                    subject,
                    fmt.name,
                    parsed.canonical,
                    refs,
                    digest,
                    tuple((v.version, v.schema_id) for v in live),
                    wanted_id,
                    wanted_version,
                    self.limits.max_subjects,
                    self.limits.max_versions,
                )
            )
            if outcome.outcome in ("ok", "exists"):
                return {"id": outcome.schema_id}
            if outcome.outcome == "changed":
                continue
            raise _register_refused(outcome.outcome, subject, outcome.schema_id, self.limits)
        raise RegistryError(e.STORE_ERROR, "The subject kept changing; try again", 500)

    async def _earlier(self, level: str, live: Sequence[SubjectVersion]) -> list[ParsedSchema]:
        """The versions a check at `level` reads, parsed: every one for a transitive level,
        the latest for the others, none for NONE."""
        if level == "NONE":
            return []
        needed = live if level.endswith("_TRANSITIVE") else live[-1:]
        return [await self._parsed_by_id(v.schema_id) for v in needed]

    async def _existing_id_matches(
        self, subject: str, body: Any, wanted_id: int
    ) -> dict[str, Any] | None:
        """Outside IMPORT mode an id may be given only if it is the one the schema has."""
        try:
            found = await self.lookup(subject, body, False)
        except RegistryError:
            return None
        return {"id": found["id"]} if wanted_id in (-1, found["id"]) else None

    async def check_compatibility(
        self, subject: str, version: int | None, body: Any, verbose: bool
    ) -> dict[str, Any]:
        fmt, parsed, _, _ = await self._parse_request(body)
        versions = await self.coordinator.registry_subject_versions(subject)
        live = [v for v in versions if not v.deleted]
        level = await self.compatibility(subject)
        if version is None:
            against = live
        else:
            if not live:
                raise _subject_not_found(subject)
            against = [await self._version(subject, version, False)]
            level = level.removesuffix("_TRANSITIVE")
        earlier = await self._earlier(level, against)
        problems = incompatibilities(fmt, level, parsed, earlier)
        answer: dict[str, Any] = {"is_compatible": not problems}
        if verbose:
            answer["messages"] = problems[:100]
        return answer

    async def delete_subject(self, subject: str, permanent: bool) -> list[int]:
        await self._writable(subject)
        versions = await self.coordinator.registry_subject_versions(subject)
        if not versions:
            raise _subject_not_found(subject)
        live = [v.version for v in versions if not v.deleted]
        if permanent:
            if live:
                raise RegistryError(
                    e.SUBJECT_NOT_SOFT_DELETED,
                    f"Subject '{subject}' was not deleted first before being permanently deleted",
                )
            doomed = [v.version for v in versions]
        else:
            if not live:
                raise RegistryError(
                    e.SUBJECT_SOFT_DELETED,
                    f"Subject '{subject}' was soft deleted.Set permanent=true to delete"
                    " permanently",
                )
            doomed = live
            for version in live:
                await self._not_referenced(subject, version)
        await self.coordinator.registry_delete_versions(subject, doomed, permanent)
        return doomed

    async def delete_version(self, subject: str, version: int, permanent: bool) -> int:
        await self._writable(subject)
        versions = await self.coordinator.registry_subject_versions(subject)
        if not versions:
            raise _subject_not_found(subject)
        if version == -1:
            live = [v for v in versions if not v.deleted]
            if not live:
                raise _subject_not_found(subject)
            version = live[-1].version
        found = next((v for v in versions if v.version == version), None)
        if found is None:
            raise _version_not_found(subject, version)
        if permanent and not found.deleted:
            raise RegistryError(
                e.VERSION_NOT_SOFT_DELETED,
                f"Subject '{subject}' Version {version} was not deleted first before being"
                " permanently deleted",
            )
        if not permanent and found.deleted:
            raise RegistryError(
                e.VERSION_SOFT_DELETED,
                f"Subject '{subject}' Version {version} was soft deleted.Set permanent=true to"
                " delete permanently",
            )
        if not permanent:
            await self._not_referenced(subject, version)
        await self.coordinator.registry_delete_versions(subject, [version], permanent)
        return version

    async def _not_referenced(self, subject: str, version: int) -> None:
        if await self.coordinator.registry_referenced_by(subject, version):
            raise RegistryError(
                e.REFERENCE_EXISTS,
                "One or more references exist to the schema"
                f" {{subject={subject},version={version}}}",
            )

    # -- schemas by id

    async def schema_usages(self, schema_id: int, deleted: bool) -> list[SubjectVersion]:
        usages = await self.coordinator.registry_schema_usages(schema_id)
        if not usages:
            raise _schema_not_found(schema_id)
        return [u for u in usages if deleted or not u.deleted]

    async def schema_by_id(self, schema_id: int, fmt: str | None) -> dict[str, Any]:
        await self.schema_usages(schema_id, True)
        answer = await self.schema_answer(schema_id, fmt)
        del answer["id"]
        return answer


def _same_type(kind: str, found: dict[str, ParsedSchema]) -> dict[str, ParsedSchema]:
    """References name schemas of the referring schema's own type (an Avro schema cannot
    import a .proto file)."""
    for name, ref in found.items():
        if ref.schema_type != kind:
            raise InvalidSchema(f"reference {name!r} is a {ref.schema_type} schema, not {kind}")
    return found


def _optional_int(value: Any, name: str) -> int:
    if value is None:
        return -1
    if isinstance(value, bool) or not isinstance(value, int) or not 0 < value <= MAX_VERSION:
        raise RegistryError(422, f"{name} must be an integer between 1 and 2^31-1", 422)
    return value


def _register_refused(
    outcome: str, subject: str, schema_id: int, limits: RegistryLimits
) -> RegistryError:
    if outcome == "too_many_subjects":
        return RegistryError(
            e.OPERATION_NOT_PERMITTED, f"The registry holds {limits.max_subjects} subjects already"
        )
    if outcome == "too_many_versions":
        return RegistryError(
            e.OPERATION_NOT_PERMITTED,
            f"Subject '{subject}' holds {limits.max_versions} versions already",
        )
    if outcome == "id_taken":
        return RegistryError(
            e.ID_DOES_NOT_MATCH,
            f"Overwrite new schema with id {schema_id} is not permitted: the id names"
            " another schema",
        )
    return RegistryError(e.OPERATION_NOT_PERMITTED, f"Subject '{subject}': the version is taken")
