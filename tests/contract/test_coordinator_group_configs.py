"""Group configs (resource type 32): each group's overrides, set and removed atomically,
shared by every instance, and removed with the group."""

from __future__ import annotations

import asyncio

from contract_support import OpenInstance

from lakelog.coordinator import BatchCoordinator
from lakelog.coordinator.group_types import OffsetCommit


async def test_set_delete_and_load(coordinator: BatchCoordinator) -> None:
    assert await coordinator.load_group_configs(["g", "h"]) == {}
    stored = await coordinator.alter_group_configs("g", {"a.b": "1", "c.d": "x"}, [])
    assert stored == {"a.b": "1", "c.d": "x"}
    stored = await coordinator.alter_group_configs("g", {"c.d": "y"}, ["a.b", "never.set"])
    assert stored == {"c.d": "y"}
    await coordinator.alter_group_configs("h\u00e9", {"a.b": "2"}, [])
    assert await coordinator.load_group_configs(["g", "h\u00e9", "none"]) == {
        "g": {"c.d": "y"},
        "h\u00e9": {"a.b": "2"},
    }
    assert await coordinator.alter_group_configs("g", {}, ["c.d"]) == {}
    assert await coordinator.load_group_configs(["g"]) == {}


async def test_concurrent_alters_keep_every_key(coordinator: BatchCoordinator) -> None:
    await asyncio.gather(
        *(coordinator.alter_group_configs("g", {f"k{i}": str(i)}, []) for i in range(12))
    )
    assert await coordinator.load_group_configs(["g"]) == {
        "g": {f"k{i}": str(i) for i in range(12)}
    }


async def test_shared_by_every_instance(open_instance: OpenInstance) -> None:
    one, two = await open_instance(), await open_instance()
    await one.alter_group_configs("g", {"a.b": "1"}, [])
    assert await two.load_group_configs(["g"]) == {"g": {"a.b": "1"}}


async def test_deleted_with_the_group(coordinator: BatchCoordinator) -> None:
    await coordinator.commit_offsets("g", [OffsetCommit("t", 0, 5)], 1_000)
    await coordinator.alter_group_configs("g", {"a.b": "1"}, [])
    await coordinator.alter_group_configs("other", {"a.b": "1"}, [])
    await coordinator.delete_groups(["g"])
    assert await coordinator.load_group_configs(["g", "other"]) == {"other": {"a.b": "1"}}
