"""SIGKILL the broker coordinating a KIP-848 consumer group of two: once the cluster
declares it dead, the other broker owns the group, loads it from the batch coordinator
and the members carry on with their member ids, epochs and partitions (no new group epoch),
so every record is still consumed exactly once."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from cluster_support import SESSION_TIMEOUT_MS, bootstrap_of, start_cluster
from e2e_fixtures import BrokerFactory
from e2e_harness import create_topic, wait_until
from e2e_wire import WireClient, request_class
from group_clients import (
    all_seen,
    exactly_once_problems,
    produce,
    stop_all,
    unique,
    wait_assignment,
    wait_consumed,
)
from kip848_clients import Kip848Member

PARTITIONS = 6
ENV = {
    "PRODUCE_COMMIT_INTERVAL_MS": 20,
    "GROUP_CONSUMER_HEARTBEAT_INTERVAL_MS": 500,
    "GROUP_CONSUMER_SESSION_TIMEOUT_MS": 30_000,
}


def coordinator_of(port: int, group: str) -> int:
    m = request_class(10, 4)
    with WireClient(port) as wire:
        resp = wire.request(10, 4, m.FindCoordinatorRequest(key_type=0, coordinator_keys=(group,)))
    [found] = resp.coordinators
    assert found.error_code == 0, found
    return int(found.node_id)


def describe(port: int, group: str) -> tuple[int, set[str]]:
    m = request_class(69, 1)
    body = m.ConsumerGroupDescribeRequest(group_ids=(group,), include_authorized_operations=False)
    with WireClient(port) as wire:
        [g] = wire.request(69, 1, body).groups
    assert g.error_code == 0, g
    return int(g.group_epoch), {str(x.member_id) for x in g.members}


@pytest.mark.timeout(180)
def test_another_broker_takes_a_kip848_group_over(
    broker_factory: BrokerFactory, tmp_path: Path
) -> None:
    brokers = start_cluster(broker_factory, tmp_path / "cluster", [None, None], env=ENV)
    bootstrap = bootstrap_of(brokers)
    topic, group = unique("takeover"), unique("g848")
    create_topic(brokers[0].bootstrap, topic, PARTITIONS)
    produced = produce(bootstrap, topic, PARTITIONS, 300, "before")
    members = [Kip848Member(bootstrap, topic, group, n).start() for n in ("a", "b")]
    try:
        wait_assignment(members, PARTITIONS, 60)
        wait_consumed(members, 300, 60)
        victim = brokers[coordinator_of(brokers[0].port, group) - 1]
        survivor = next(b for b in brokers if b is not victim)
        before = describe(victim.port, group)
        victim.kill()
        killed_at = time.monotonic()
        wait_until(
            lambda: coordinator_of(survivor.port, group) == brokers.index(survivor) + 1,
            SESSION_TIMEOUT_MS / 1000 + 20,
            "the survivor to coordinate the group",
            interval=0.2,
        )
        produced.update(produce(survivor.bootstrap, topic, PARTITIONS, 300, "after"))
        wait_consumed(members, 600, 90)
        # the survivor resumed the group as saved: same members, same group epoch
        assert describe(survivor.port, group) == before
        time.sleep(1.0)
        problems = exactly_once_problems(produced, all_seen(members))
        assert problems == [], "\n".join(problems + [m.describe() for m in members])
        print(f"group moved and resumed {time.monotonic() - killed_at:.1f}s after the kill")
    finally:
        stop_all(members)
