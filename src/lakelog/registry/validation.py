"""Produce-time schema validation (Confluent Server's `confluent.key.schema.validation` and
`confluent.value.schema.validation` topic configs): a record's key or value must be in the
wire format (magic byte 0, then a 4-byte big-endian schema id) with an id registered under
the topic's subject (TopicNameStrategy: `<topic>-key`, `<topic>-value`).

The ids of a subject are cached per broker; an id not in the cache refreshes it (at most
once per REFRESH_S per subject), so a schema registered a moment ago on any broker is
accepted, and a producer of unknown ids costs at most one coordinator read per interval."""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Sequence

from lakelog.coordinator.interface import BatchCoordinator
from lakelog.log.protocol.record_prefixes import Prefix

MAGIC = 0
REFRESH_S = 0.2
MAX_SUBJECTS_CACHED = 10_000


class SubjectIds:
    def __init__(self, coordinator: BatchCoordinator) -> None:
        self._coordinator = coordinator
        self._cache: OrderedDict[str, tuple[float, frozenset[int]]] = OrderedDict()

    async def registered(self, subject: str, schema_id: int) -> bool:
        """Is `schema_id` the id of a live version of `subject`?"""
        cached = self._cache.get(subject)
        now = time.monotonic()
        if cached is not None and (schema_id in cached[1] or now - cached[0] < REFRESH_S):
            self._cache.move_to_end(subject)
            return schema_id in cached[1]
        versions = await self._coordinator.registry_subject_versions(subject)
        ids = frozenset(v.schema_id for v in versions if not v.deleted)
        self._cache[subject] = (now, ids)
        self._cache.move_to_end(subject)
        while len(self._cache) > MAX_SUBJECTS_CACHED:
            self._cache.popitem(last=False)
        return schema_id in ids


async def _problem(ids: SubjectIds, subject: str, what: str, prefix: Prefix) -> str | None:
    if prefix is None or len(prefix) < 5 or prefix[0] != MAGIC:
        return f"{what} is not in the schema registry's wire format (magic byte 0, schema id)"
    schema_id = int.from_bytes(prefix[1:5], "big")
    if not await ids.registered(subject, schema_id):
        return f"{what} schema id {schema_id} is not registered under subject {subject}"
    return None


async def invalid_records(
    ids: SubjectIds,
    topic: str,
    prefixes: Sequence[tuple[Prefix, Prefix]],
    keys: bool,
    values: bool,
) -> list[tuple[int, str]]:
    """(batch index, why) of each record whose key or value the topic refuses."""
    refused: list[tuple[int, str]] = []
    for index, (key, value) in enumerate(prefixes):
        why = await _problem(ids, f"{topic}-key", "key", key) if keys else None
        if why is None and values:
            why = await _problem(ids, f"{topic}-value", "value", value)
        if why is not None:
            refused.append((index, why))
    return refused
