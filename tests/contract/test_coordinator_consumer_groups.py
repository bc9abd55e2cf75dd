"""KIP-848 consumer group records: saved whole, compare-and-set on the revision, shared
by every instance, deleted with the group, and they keep a live group's offsets from expiring."""

from __future__ import annotations

import asyncio
import json

from contract_support import OpenInstance

from lakelog.coordinator import BatchCoordinator
from lakelog.coordinator.group_types import ConsumerGroupRecord, OffsetCommit
from lakelog.util.errors import ErrorCode

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
    assert await coordinator.save_consumer_group(record("g", 1), expected=0) is True
    assert await coordinator.save_consumer_group(record("a", 1, "Empty"), expected=0) is True
    assert await coordinator.load_consumer_group("g") == record("g", 1)
    assert json.loads((await coordinator.load_consumer_group("g")).document) == json.loads(DOCUMENT)
    assert [r.group_id for r in await coordinator.list_consumer_groups()] == ["a", "g"]


async def test_a_save_lands_only_on_the_state_it_saw(coordinator: BatchCoordinator) -> None:
    assert await coordinator.save_consumer_group(record("g", 5), expected=0) is True
    assert await coordinator.save_consumer_group(record("g", 9), expected=0) is False
    assert await coordinator.save_consumer_group(record("g", 9), expected=4) is False
    assert await coordinator.save_consumer_group(record("g", 9), expected=6) is False
    assert await coordinator.load_consumer_group("g") == record("g", 5)
    assert await coordinator.save_consumer_group(record("g", 6, "Reconciling"), expected=5)
    assert (await coordinator.load_consumer_group("g")).state == "Reconciling"
    # a missing record is not "revision 5"
    assert await coordinator.save_consumer_group(record("other", 2), expected=1) is False
    assert await coordinator.load_consumer_group("other") is None


async def test_concurrent_saves_from_one_state(coordinator: BatchCoordinator) -> None:
    """Two copies that both loaded revision 1 race: exactly one lands."""
    await coordinator.save_consumer_group(record("g", 1), expected=0)
    results = await asyncio.gather(
        *(coordinator.save_consumer_group(record("g", r), expected=1) for r in [2, 3, 4, 5])
    )
    assert results.count(True) == 1
    stored = await coordinator.load_consumer_group("g")
    assert stored.revision == [2, 3, 4, 5][results.index(True)]


async def test_delete_groups_removes_consumer_groups(coordinator: BatchCoordinator) -> None:
    await coordinator.save_consumer_group(record("g", 1, "Empty"), expected=0)
    await coordinator.commit_offsets("g", [OffsetCommit("t", 0, 1)], now_ms=1)
    await coordinator.save_consumer_group(record("only-record", 1, "Empty"), expected=0)
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
    await coordinator.save_consumer_group(record("live", 1, "Stable"), expected=0)
    await coordinator.save_consumer_group(record("empty", 1, "Empty"), expected=0)
    assert await coordinator.expire_offsets(committed_before_ms=2_000) == 1
    assert len(await coordinator.fetch_offsets("live", None)) == 1
    assert await coordinator.fetch_offsets("empty", None) == []


async def test_instances_share_consumer_groups(open_instance: OpenInstance) -> None:
    a = await open_instance()
    await a.save_consumer_group(record("g", 2), expected=0)
    await a.close()
    b, c = await open_instance(), await open_instance()
    assert await b.load_consumer_group("g") == record("g", 2)
    assert await b.save_consumer_group(record("g", 3, "Reconciling"), expected=2)
    assert await c.load_consumer_group("g") == record("g", 3, "Reconciling")
