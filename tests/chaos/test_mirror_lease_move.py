"""Mirrored partitions are owned by one destination broker at a time (leases in the
coordinator): two destination brokers share the partitions; when one is killed, its
partitions move to the other once its leases expire, and mirroring goes on with every
record at its source offset."""

from __future__ import annotations

from e2e_fixtures import BrokerFactory
from e2e_harness import create_topic, wait_until
from mirror_support import (
    FAST_MIRROR,
    describe,
    mirror_cli,
    produce_keyed,
    read_log,
    wait_caught_up,
)

PARTITIONS = 4
DEST_ENV = {
    **FAST_MIRROR,
    "BROKER_SESSION_TIMEOUT_MS": 2000,
    "BROKER_HEARTBEAT_INTERVAL_MS": 300,
    "MIRROR_LEASE_MS": 2000,
}


def test_a_dead_owners_partitions_move(broker_factory: BrokerFactory, topic_name: str) -> None:
    source = broker_factory()
    first = broker_factory({**DEST_ENV, "BROKER_ID": 1})
    second = broker_factory({**DEST_ENV, "BROKER_ID": 2}, data_dir=first.data_dir)
    create_topic(source.bootstrap, topic_name, PARTITIONS)
    produce_keyed(source.bootstrap, topic_name, 200, PARTITIONS, "a")
    mirror_cli(first, "create", "dr", "--source", source.bootstrap, "--topic", topic_name)
    wait_caught_up(source, second, topic_name, PARTITIONS)

    def owners() -> list[int]:
        return sorted(p["lease_owner"] for p in describe(second, "dr"))

    wait_until(lambda: owners() == [1, 1, 2, 2], 20, "the partitions shared", interval=0.5)
    first.kill()
    produce_keyed(source.bootstrap, topic_name, 200, PARTITIONS, "b")
    wait_until(lambda: owners() == [2] * PARTITIONS, 30, "the leases moved", interval=0.5)
    wait_caught_up(source, second, topic_name, PARTITIONS)
    assert read_log(second.bootstrap, topic_name, PARTITIONS) == read_log(
        source.bootstrap, topic_name, PARTITIONS
    )
