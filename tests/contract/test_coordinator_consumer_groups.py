"""KIP-848 consumer group records: saved whole, newest revision wins, shared by every
instance, deleted with the group, and they keep a live group's offsets from expiring."""

from __future__ import annotations

import asyncio
import json

from contract_support import OpenInstance

from lakelog.coordinator import BatchCoordinator
from lakelog.coordinator.interface import ConsumerGroupRecord, OffsetCommit
from lakelog.errors import ErrorCode

DOCUMENT = json.dumps({"members": [{"member_id": "m\u00e9\u0000x", "epoch": 3}], "n": [1, 2]})


def record(group_id: str, revision: int, state: str = "Stable") -> ConsumerGroupRecord:
    return ConsumerGroupRecord(
        group_id,
        state,
        group_epoch=revision * 2,
        revision=revision,
        document=DOCUMENT,
        updated_at=1_700_000_000_000 + revision,
    )


async def test_save_load_and_list(coordinator: BatchCoordinator) -> None:
    assert await coordinator.load_consumer_group("g") is None
    assert await coordinator.save_consumer_group(record("g", 1)) is True
    assert await coordinator.save_consumer_group(record("a", 1, "Empty")) is True
    assert await coordinator.load_consumer_group("g") == record("g", 1)
    assert json.loads((await coordinator.load_consumer_group("g")).document) == json.loads(DOCUMENT)
    assert [r.group_id for r in await coordinator.list_consumer_groups()] == ["a", "g"]


async def test_a_save_never_replaces_a_newer_revision(coordinator: BatchCoordinator) -> None:
    assert await coordinator.save_consumer_group(record("g", 5)) is True
    assert await coordinator.save_consumer_group(record("g", 4)) is False
    assert await coordinator.save_consumer_group(record("g", 5, "Empty")) is False
    assert await coordinator.load_consumer_group("g") == record("g", 5)
    assert await coordinator.save_consumer_group(record("g", 6, "Reconciling")) is True
    assert (await coordinator.load_consumer_group("g")).state == "Reconciling"


async def test_concurrent_saves_keep_the_newest(coordinator: BatchCoordinator) -> None:
    results = await asyncio.gather(
        *(coordinator.save_consumer_group(record("g", r)) for r in [3, 9, 1, 7, 2, 8])
    )
    assert results.count(True) >= 1
    assert (await coordinator.load_consumer_group("g")).revision == 9


async def test_delete_groups_removes_consumer_groups(coordinator: BatchCoordinator) -> None:
    await coordinator.save_consumer_group(record("g", 1, "Empty"))
    await coordinator.commit_offsets("g", [OffsetCommit("t", 0, 1)], now_ms=1)
    await coordinator.save_consumer_group(record("only-record", 1, "Empty"))
    assert await coordinator.delete_groups(["g", "only-record", "none"]) == [
        ErrorCode.none,
        ErrorCode.none,
        ErrorCode.group_id_not_found,
    ]
    assert await coordinator.list_consumer_groups() == []
    assert await coordinator.fetch_offsets("g", None) == []


async def test_live_consumer_groups_keep_their_offsets(coordinator: BatchCoordinator) -> None:
    for group_id in ["live", "empty"]:
        await coordinator.commit_offsets(group_id, [OffsetCommit("t", 0, 1)], now_ms=1_000)
    await coordinator.save_consumer_group(record("live", 1, "Stable"))
    await coordinator.save_consumer_group(record("empty", 1, "Empty"))
    assert await coordinator.expire_offsets(committed_before_ms=2_000) == 1
    assert len(await coordinator.fetch_offsets("live", None)) == 1
    assert await coordinator.fetch_offsets("empty", None) == []


async def test_instances_share_consumer_groups(open_instance: OpenInstance) -> None:
    a = await open_instance()
    await a.save_consumer_group(record("g", 2))
    await a.close()
    b, c = await open_instance(), await open_instance()
    assert await b.load_consumer_group("g") == record("g", 2)
    await b.save_consumer_group(record("g", 3, "Reconciling"))
    assert await c.load_consumer_group("g") == record("g", 3, "Reconciling")
