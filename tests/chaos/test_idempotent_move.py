"""Idempotence across brokers (issue #5): an idempotent producer whose partitions move to
another broker mid-stream, because a broker joins and later leaves the cluster, sees no
duplicate, no gap and no error: its sequence state lives in the shared coordinator, and a
batch that reaches one broker before its predecessors committed through another is retried,
not refused."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from cluster_support import (
    CLUSTER_ENV,
    assert_dense,
    assert_unique_values,
    bootstrap_of,
    high_watermarks,
    metadata_view,
    read_log,
    start_cluster,
)
from e2e_fixtures import BrokerFactory
from e2e_harness import create_topic, wait_until
from steady_clients import SteadyProducer, healthy, total_acks

PARTITIONS = 12
"""Enough that both brokers get some: each partition lands on either with even odds."""
STEP_ACKS = 1500


@pytest.mark.timeout(150)
def test_idempotent_producer_moves_between_brokers(
    broker_factory: BrokerFactory, tmp_path: Path, topic_name: str
) -> None:
    data = tmp_path / "cluster"
    env = {"PRODUCE_COMMIT_INTERVAL_MS": 50}
    [first] = start_cluster(broker_factory, data, [None], env=env)
    create_topic(first.bootstrap, topic_name, PARTITIONS)
    producers = [SteadyProducer(n, first.bootstrap, topic_name, PARTITIONS) for n in range(2)]
    for p in producers:
        p.thread.start()
    try:
        wait_until(lambda: total_acks(producers) >= STEP_ACKS, 30, "acks on one broker")
        # A second broker joins: Metadata spreads the partitions over both, so in-flight
        # batches on the first broker race new ones sent to the second.
        second = broker_factory({**CLUSTER_ENV, **env, "BROKER_ID": 2}, data_dir=data)
        wait_until(
            lambda: (
                set(metadata_view(first.bootstrap, "probe", topic_name).leaders.values()) == {1, 2}
            ),
            20,
            "partitions spread over both brokers",
        )
        moved_at = total_acks(producers)
        wait_until(
            lambda: total_acks(producers) >= moved_at + STEP_ACKS or not healthy(producers),
            30,
            "acks after the partitions moved",
        )
        # And it leaves again (graceful stop): the partitions come back to the first, at
        # once (a stopping broker retires its epoch rather than waiting out its session).
        second.close()
        assert "left the cluster" in second.log_text()
        wait_until(
            lambda: (
                set(metadata_view(first.bootstrap, "probe", topic_name).leaders.values()) == {1}
            ),
            10,
            "partitions back on the first broker",
        )
        left_at = total_acks(producers)
        wait_until(
            lambda: total_acks(producers) >= left_at + STEP_ACKS or not healthy(producers),
            40,
            "acks after the second broker left",
        )
    finally:
        for p in producers:
            p.stop.set()
        for p in producers:
            p.thread.join(60)
    time.sleep(0.2)
    for p in producers:
        assert p.error is None, p.error
        assert p.fatal is None, p.fatal
        assert p.failures == [], p.failures[:5]
        assert p.unflushed == 0
    bootstrap = bootstrap_of([first])
    high = high_watermarks(bootstrap, "move-reader", topic_name, PARTITIONS)
    log = read_log(bootstrap, "move-reader", topic_name, high)
    assert_dense(log, high)
    assert_unique_values(log)
    acked = {
        value: (partition, offset) for p in producers for value, partition, offset, _ in p.acks
    }
    found = {
        value: (partition, offset) for partition, rows in log.items() for offset, value in rows
    }
    assert acked.items() <= found.items()
    assert len(found) == sum(p.sent for p in producers)
    # Each producer's records keep their send order within a partition.
    for n in range(len(producers)):
        for rows in log.values():
            mine = [int(v.split(b"-")[1]) for _, v in rows if v.startswith(f"p{n}-".encode())]
            assert mine == sorted(mine)
