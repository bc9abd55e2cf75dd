"""The schema registry's storage: global ids, versions, soft and hard deletes, settings,
and a registration refused when the subject changed since its compatibility check."""

from __future__ import annotations

from lakelog.coordinator import BatchCoordinator
from lakelog.coordinator.registry_types import (
    RegisterSchema,
    RegistryConfig,
    SchemaReference,
    StoredSchema,
    SubjectVersion,
)


def req(
    subject: str, text: str, seen: tuple[tuple[int, int], ...] = (), **kw: object
) -> RegisterSchema:
    return RegisterSchema(subject, "AVRO", text, (), "fp:" + text, seen, **kw)  # type: ignore[arg-type]


async def test_ids_are_global_and_versions_count_per_subject(
    coordinator: BatchCoordinator,
) -> None:
    a = await coordinator.registry_register(req("s1", '"int"'))
    assert (a.outcome, a.schema_id, a.version) == ("ok", 1, 1)
    again = await coordinator.registry_register(req("s1", '"int"', ((1, 1),)))
    assert (again.outcome, again.schema_id, again.version) == ("exists", 1, 1)
    b = await coordinator.registry_register(req("s2", '"int"'))
    assert (b.outcome, b.schema_id, b.version) == ("ok", 1, 1)
    c = await coordinator.registry_register(req("s1", '"long"', ((1, 1),)))
    assert (c.outcome, c.schema_id, c.version) == ("ok", 2, 2)
    assert await coordinator.registry_subjects(False) == ["s1", "s2"]
    assert await coordinator.registry_subject_versions("s1") == [
        SubjectVersion("s1", 1, 1),
        SubjectVersion("s1", 2, 2),
    ]
    assert await coordinator.registry_schemas([2, 1, 99]) == [
        StoredSchema(1, "AVRO", '"int"'),
        StoredSchema(2, "AVRO", '"long"'),
    ]
    assert await coordinator.registry_schema_usages(1) == [
        SubjectVersion("s1", 1, 1),
        SubjectVersion("s2", 1, 1),
    ]
    assert await coordinator.registry_find_schema('fp:"long"') == 2
    assert await coordinator.registry_find_schema("nope") is None


async def test_a_changed_subject_is_checked_again(coordinator: BatchCoordinator) -> None:
    await coordinator.registry_register(req("s", '"int"'))
    stale = await coordinator.registry_register(req("s", '"long"', ()))
    assert stale.outcome == "changed"
    assert [v.version for v in await coordinator.registry_subject_versions("s")] == [1]


async def test_soft_then_hard_delete(coordinator: BatchCoordinator) -> None:
    await coordinator.registry_register(req("s", '"int"'))
    await coordinator.registry_register(req("s", '"long"', ((1, 1),)))
    await coordinator.registry_delete_versions("s", [1], permanent=False)
    assert await coordinator.registry_subject_versions("s") == [
        SubjectVersion("s", 1, 1, deleted=True),
        SubjectVersion("s", 2, 2),
    ]
    await coordinator.registry_delete_versions("s", [2], permanent=False)
    assert await coordinator.registry_subjects(False) == []
    assert await coordinator.registry_subjects(True) == ["s"]
    # A new version after deletes counts on from the last one.
    d = await coordinator.registry_register(req("s", '"string"'))
    assert (d.outcome, d.schema_id, d.version) == ("ok", 3, 3)
    await coordinator.registry_delete_versions("s", [1, 2], permanent=True)
    assert [v.version for v in await coordinator.registry_subject_versions("s")] == [3]
    # The id stays the schema's: registering it again answers the same id.
    e = await coordinator.registry_register(req("s", '"int"', ((3, 3),)))
    assert (e.schema_id, e.version) == (1, 4)


async def test_import_with_chosen_ids(coordinator: BatchCoordinator) -> None:
    a = await coordinator.registry_register(req("s", '"int"', wanted_id=100, wanted_version=7))
    assert (a.outcome, a.schema_id, a.version) == ("ok", 100, 7)
    taken = await coordinator.registry_register(req("t", '"long"', wanted_id=100))
    assert taken.outcome == "id_taken"
    nxt = await coordinator.registry_register(req("t", '"long"'))
    assert nxt.schema_id == 101


async def test_caps(coordinator: BatchCoordinator) -> None:
    await coordinator.registry_register(req("a", '"int"', max_subjects=1))
    full = await coordinator.registry_register(req("b", '"int"', max_subjects=1))
    assert full.outcome == "too_many_subjects"
    over = await coordinator.registry_register(req("a", '"long"', ((1, 1),), max_versions=1))
    assert over.outcome == "too_many_versions"


async def test_references_and_settings(coordinator: BatchCoordinator) -> None:
    await coordinator.registry_register(req("base", '"int"'))
    ref = SchemaReference("base.avsc", "base", 1)
    top = RegisterSchema("top", "AVRO", '"x"', (ref,), "fp:top", ())
    outcome = await coordinator.registry_register(top)
    assert await coordinator.registry_schemas([outcome.schema_id]) == [
        StoredSchema(outcome.schema_id, "AVRO", '"x"', (ref,))
    ]
    assert await coordinator.registry_referenced_by("base", 1) == [outcome.schema_id]
    await coordinator.registry_delete_versions("top", [1], permanent=False)
    assert await coordinator.registry_referenced_by("base", 1) == []

    assert await coordinator.registry_configs("s") == (RegistryConfig(), RegistryConfig())
    await coordinator.registry_set_config("", "compatibility", "FULL")
    await coordinator.registry_set_config("s", "mode", "READONLY")
    assert await coordinator.registry_configs("s") == (
        RegistryConfig("FULL", None),
        RegistryConfig(None, "READONLY"),
    )
    await coordinator.registry_set_config("s", "mode", None)
    assert await coordinator.registry_configs("s") == (RegistryConfig("FULL"), RegistryConfig())
    await coordinator.registry_set_config("s", "normalize", "true")
    await coordinator.registry_set_config("", "normalize", "false")
    assert await coordinator.registry_configs("s") == (
        RegistryConfig("FULL", None, "false"),
        RegistryConfig(None, None, "true"),
    )
    await coordinator.registry_set_config("s", "normalize", None)
    assert (await coordinator.registry_configs("s"))[1] == RegistryConfig()
