"""Share-group heartbeats of one group at once (the fuzzer found it): each looks up its
group's topics with awaits in between, while the others join; none may fail."""

from __future__ import annotations

import asyncio
from pathlib import Path

from lakelog.config import Settings
from lakelog.groups.share.groups import Heartbeat
from lakelog.server.broker import Broker


async def test_concurrent_joins_of_one_share_group(tmp_path: Path) -> None:
    broker = Broker(Settings(data_dir=tmp_path))
    await broker.coordinator.start()
    try:
        real_get = broker.topics.get

        async def slow_get(name: str) -> object:
            await asyncio.sleep(0)  # a cache refresh: the loop runs the others meanwhile
            return await real_get(name)

        broker.topics.get = slow_get  # type: ignore[method-assign,assignment]
        beats = [
            Heartbeat(f"member-{i}", 0, tuple(f"missing-{i}-{j}" for j in range(5)))
            for i in range(40)
        ]
        answers = await asyncio.gather(*(broker.share.heartbeat("g", b) for b in beats))
        assert all(a.member_epoch > 0 for a in answers), answers[:3]
        assert len(broker.share.groups.get("g").members) == 40  # type: ignore[union-attr]
    finally:
        await broker.coordinator.close()
