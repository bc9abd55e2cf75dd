"""The schemas a table topic's records were written with, from the built-in registry.

Clients that serialize with a schema registry (confluent-kafka's AvroSerializer and
JSONSerializer, Java's KafkaAvroSerializer) prefix each key and value with Confluent's wire
header: magic byte 0 and the 4-byte id of the schema they wrote it with. Under the default
subject naming (TopicNameStrategy) those ids are versions of `<topic>-value` and
`<topic>-key`. The driver of the tables job reads them once per pass, deleted versions
included (records written with them are still in the log), parsed by the registry's own
parsers so references resolve as the registry resolves them, and hands them to the tasks:
an Avro value is then read with its writer's schema and resolved to the table's schema
(Avro's schema resolution), and a value whose id the subject does not hold goes to the
dead-letter table with that reason.
"""

from __future__ import annotations

import logging
from typing import Any

from lakelog.coordinator.interface import BatchCoordinator
from lakelog.registry.errors import RegistryError
from lakelog.registry.service import RegistryLimits, SchemaRegistry
from lakelog.tables.decode import RegistryWriters, SubjectWriters

log = logging.getLogger(__name__)

MAX_WRITERS = 1_000
"""Schema ids read per subject at most (the registry's own cap on versions per subject)."""


async def registry_writers(coordinator: BatchCoordinator, topic: str) -> RegistryWriters:
    """The schemas of `<topic>-value` and `<topic>-key` (empty where the subject has none)."""
    return RegistryWriters(
        await writer_schemas(coordinator, f"{topic}-value"),
        await writer_schemas(coordinator, f"{topic}-key"),
    )


async def writer_schemas(coordinator: BatchCoordinator, subject: str) -> SubjectWriters:
    registry = SchemaRegistry(coordinator, RegistryLimits())
    found: dict[int, tuple[str, Any]] = {}
    versions = await coordinator.registry_subject_versions(subject)
    for version in versions[-MAX_WRITERS:]:
        if version.schema_id in found:
            continue
        try:
            parsed = await registry.parsed(version.schema_id)
        except RegistryError as exc:  # e.g. a reference hard-deleted since
            log.warning("schema id %d of %s: %s", version.schema_id, subject, exc)
            continue
        if parsed.schema_type == "AVRO":
            found[version.schema_id] = ("AVRO", parsed.model[0])
        else:
            found[version.schema_id] = (parsed.schema_type, None)
    return SubjectWriters(subject, found)
