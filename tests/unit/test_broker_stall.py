"""A broker back from a stall long enough for the others to suspect it refuses plain
producers' batches for a heartbeat interval: clients were sent to other brokers meanwhile,
and what it held must not commit behind what they sent there. Alone, it refuses nothing."""

from __future__ import annotations

import time
from pathlib import Path
from uuid import uuid4

from lakelog.config import Settings
from lakelog.server.broker import Broker
from lakelog.server.cluster.zones import partition_broker


async def _broker(tmp_path: Path, *others: int) -> Broker:
    broker = Broker(Settings(data_dir=tmp_path, broker_id=1))
    await broker.coordinator.start()
    broker.broker_epoch = await broker.coordinator.register_broker(1, None, "127.0.0.1", 1)
    for other in others:
        await broker.coordinator.register_broker(other, None, "127.0.0.1", other)
    return broker


async def test_back_from_a_stall_in_a_cluster_it_leads_nothing_for_a_while(
    tmp_path: Path,
) -> None:
    broker = await _broker(tmp_path, 2)
    try:
        topic = uuid4()
        live = await broker.live_brokers()
        assert [b.broker_id for b in live] == [1, 2]
        mine = [p for p in range(32) if partition_broker(live, topic, p) == 1]
        assert mine  # 1 in 2**32 that broker 1 leads none of 32
        broker._back_at = time.monotonic()
        assert [await broker.still_leads(topic, p, None) for p in mine] == [False] * len(mine)
        broker._back_at = time.monotonic() - 60  # the grace is over
        assert all([await broker.still_leads(topic, p, None) for p in mine])
        assert not any(
            [await broker.still_leads(topic, p, None) for p in range(32) if p not in mine]
        )
    finally:
        await broker.coordinator.close()


async def test_back_from_a_stall_alone_it_refuses_nothing(tmp_path: Path) -> None:
    broker = await _broker(tmp_path)
    try:
        broker._back_at = time.monotonic()
        assert await broker.still_leads(uuid4(), 0, None)
        assert await broker.still_leads(uuid4(), 0, "zone-a")
    finally:
        await broker.coordinator.close()
