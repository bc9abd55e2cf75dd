"""SIGKILL the broker under a consuming group: committed offsets and the group generation
live in the coordinator database, so after a restart the group resumes at its committed
position (nothing skipped; only the uncommitted tail may be read again), the generation
never goes backwards, and a new consumer of the group starts exactly where it left off.
"""

from __future__ import annotations

import time
from collections import Counter
from typing import Any

import pytest
from e2e_fixtures import BrokerFactory
from e2e_harness import BrokerProcess, create_topic, kafka_admin, wait_until
from group_clients import (
    GroupMember,
    Seen,
    all_seen,
    exactly_once_problems,
    make_member,
    probe_generation,
    produce,
    stop_all,
    unique,
    wait_assignment,
    wait_consumed,
)

PARTITIONS = 3
GROUP_ENV = {"GROUP_INITIAL_REBALANCE_DELAY_MS": 300, "GROUP_MIN_SESSION_TIMEOUT_MS": 1000}

pytestmark = pytest.mark.timeout(180)


def only_member_id(bootstrap: str, group: str) -> str:
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": bootstrap})
    desc = admin.describe_consumer_groups([group], request_timeout=15)[group].result(timeout=20)
    (member,) = desc.members
    return str(member.member_id)


def group_generation(broker: BrokerProcess, group: str) -> int:
    """Current generation, probed on behalf of the group's only member (retried while the
    group is between generations)."""
    return int(
        wait_until(
            lambda: probe_generation(
                broker.port, group, only_member_id(broker.bootstrap, group), None
            ),
            30,
            f"the generation of {group}",
            interval=0.3,
        )
    )


def committed_offsets(bootstrap: str, group: str) -> dict[int, int]:
    with kafka_admin(bootstrap) as admin:
        a: Any = admin
        return {tp.partition: om.offset for tp, om in a.list_group_offsets(group)[group].items()}


def test_committed_offsets_and_generation_survive_sigkill(
    broker_factory: BrokerFactory, topic_name: str
) -> None:
    broker = broker_factory(env=GROUP_ENV)
    create_topic(broker.bootstrap, topic_name, PARTITIONS)
    group = unique("chaos-group")
    members: list[GroupMember] = []

    def member(client: str, name: str, **kwargs: Any) -> GroupMember:
        m = make_member(
            client,
            broker.bootstrap,
            topic_name,
            group,
            name,
            session_timeout_ms=6000,
            heartbeat_interval_ms=500,
            **kwargs,
        )
        members.append(m)
        return m.start()

    try:
        # Generation 3 before the crash: main joins, a visitor joins and leaves.
        main = member("confluent-kafka", "main", batch=50, pause_s=0.05)
        wait_assignment([main], PARTITIONS, 30, "main to own every partition")
        visitor = member("confluent-kafka", "visitor")
        wait_assignment([main, visitor], PARTITIONS, 30, "main and the visitor to share")
        visitor.stop()
        wait_assignment([main], PARTITIONS, 30, "main to own every partition again")
        generation_before = group_generation(broker, group)
        assert generation_before >= 3, generation_before

        produced = produce(broker.bootstrap, topic_name, PARTITIONS, 3000, "before")
        wait_until(lambda: main.seen_count() >= 1000, 60, "main to consume 1000 records")
        broker.kill()
        with main.lock:  # no commit can succeed from here until the restart
            committed_at_kill = dict(main.committed)
        time.sleep(1.0)
        with main.lock:  # what librdkafka had prefetched may still arrive after the kill
            tail_end = len(main.seen)
        assert tail_end < len(produced), "main consumed everything before the kill"
        broker.start()

        produced.update(produce(broker.bootstrap, topic_name, PARTITIONS, 1000, "after"))
        wait_until(
            lambda: {(s.partition, s.offset) for s in all_seen(members)} >= set(produced),
            90,
            "every record to be consumed after the restart",
            interval=0.2,
        )
        time.sleep(1.0)
        seen = all_seen(members)
        problems = [p for p in exactly_once_problems(produced, seen) if "more than once" not in p]
        assert not problems, problems
        with main.lock:
            main_before = main.seen[:tail_end]
        rereads = bad_rereads(seen, main_before, committed_at_kill)
        assert not rereads, (
            f"records read twice outside the uncommitted tail (commits at the kill: "
            f"{committed_at_kill}): {rereads[:10]}\n{main.describe()}"
        )
        generation_after = group_generation(broker, group)
        assert generation_after >= generation_before, (generation_before, generation_after)

        stop_all([main])
        expected_end = {p: 1 + max(o for (q, o) in produced if q == p) for p in range(PARTITIONS)}
        wait_until(
            lambda: committed_offsets(broker.bootstrap, group) == expected_end,
            15,
            "the final commits to be visible",
            interval=0.5,
        )

        # Crash again with the group empty; a new consumer starts exactly at the commits.
        broker.kill()
        broker.start()
        assert committed_offsets(broker.bootstrap, group) == expected_end
        late = produce(broker.bootstrap, topic_name, PARTITIONS, 300, "late")
        newcomer = member("kafka-python", "newcomer")
        wait_consumed([newcomer], len(late), 60)
        time.sleep(1.0)
        problems = exactly_once_problems(late, newcomer.seen)
        assert not problems, [*problems, newcomer.describe()]
        assert not broker.tracebacks(), "\n\n".join(broker.tracebacks())
    finally:
        stop_all(m for m in members if m.thread.is_alive())


def bad_rereads(
    seen: list[Seen], main_before: list[Seen], committed_at_kill: dict[int, int]
) -> list[tuple[int, int]]:
    """Records consumed more than once other than the allowed case: read once by the main
    member before the restart, at or above its partition's commit at the kill (the
    uncommitted tail), and read once more after the restart."""
    before = Counter((s.partition, s.offset) for s in main_before)
    tail = {k for k, n in before.items() if n == 1 and k[1] >= committed_at_kill.get(k[0], 0)}
    counts = Counter((s.partition, s.offset) for s in seen)
    return sorted(k for k, n in counts.items() if n > 1 and not (n == 2 and k in tail))
