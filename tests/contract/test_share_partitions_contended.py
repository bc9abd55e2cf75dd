"""Share partitions served by several brokers at once, through the real `SharePartitions`
of each on its own coordinator instance of one database: members on every broker acquire
and acknowledge one partition as fast as they can. Every change must land (a busy
partition never answers a member with a lost race), and every offset is handed out once."""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from types import SimpleNamespace
from typing import Any

from contract_support import OpenInstance

from lakelog.config import Settings
from lakelog.coordinator.share_types import SharePartitionWrite
from lakelog.groups.group_configs import GroupConfig
from lakelog.groups.share.partitions import ShareKey, SharePartitions, limits_of
from lakelog.groups.share.state import ACCEPT, SharePartitionState
from lakelog.util.errors import ErrorCode

TOPIC = "00000000-0000-0000-0000-0000000000aa"
KEY = ShareKey(TOPIC, 0)
TOTAL = 600
BROKERS = 3
MEMBERS_PER_BROKER = 2
MAX_ROUNDS = 2_000


async def test_members_on_three_brokers_take_every_offset_once(
    open_instance: OpenInstance,
) -> None:
    coordinators = [await open_instance() for _ in range(BROKERS)]
    empty = SharePartitionState(0, 0).dumps()
    assert await coordinators[0].store_share_partitions(
        [SharePartitionWrite("g", TOPIC, 0, 0, 0, empty)]
    ) == [True]
    brokers = [SharePartitions(SimpleNamespace(coordinator=c)) for c in coordinators]  # type: ignore[arg-type]
    config = GroupConfig.of({"share.record.lock.duration.ms": "600000"}, Settings())
    limits = limits_of(config)
    handed: list[tuple[int, int, int]] = []
    failures: list[Any] = []

    async def member(partitions: SharePartitions, name: str) -> None:
        pending: list[tuple[int, int]] = []
        for _ in range(MAX_ROUNDS):
            acks = [(f, last, [ACCEPT]) for f, last in pending]

            def change(
                key: ShareKey, state: SharePartitionState, acks: list[Any] = acks
            ) -> tuple[ErrorCode, list[Any], int]:
                now = int(time.time() * 1000)
                acked = state.acknowledge(name, acks, now, limits)
                got = state.acquire(name, now, limits, 7, (0, TOTAL))
                return acked, got, state.start

            result = await partitions.update("g", [KEY], config, change)
            if KEY not in result:
                failures.append((name, "lost every try"))
                return
            acked, got, start = result[KEY]
            if acked != ErrorCode.none:
                failures.append((name, acked, pending))
                return
            handed.extend((a.first, a.last, a.count) for a in got)
            pending = [(a.first, a.last) for a in got]
            if not got and start >= TOTAL:
                return
            await asyncio.sleep(0)
        failures.append((name, "did not finish"))

    await asyncio.gather(
        *(member(p, f"b{b}-m{m}") for b, p in enumerate(brokers) for m in range(MEMBERS_PER_BROKER))
    )
    assert not failures, failures[:5]
    offsets = Counter(o for first, last, _ in handed for o in range(first, last + 1))
    assert sorted(offsets) == list(range(TOTAL))
    assert set(offsets.values()) == {1}
    assert {count for _, _, count in handed} == {1}
    [row] = await coordinators[1].load_share_partitions("g", [(TOPIC, 0)])
    assert row is not None and row.start_offset == TOTAL
