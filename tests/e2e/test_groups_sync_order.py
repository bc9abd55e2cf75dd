"""A classic group's SyncGroup answers for one generation go out together, as Kafka sends
them: when the leader's assignment is durable, the leader and every follower waiting in
SyncGroup are answered in one step.

The case from issue 31: a second kafka-python member joins a one-member group. Under the
eager protocol kafka-python keeps listing the partitions it had (`assignment()`) until its
SyncGroup answer arrives. Were the new member (a follower) answered before the leader, it
would list partition 1 while the first member, still waiting, listed both: two owners from
the clients' view. The window is as long as saving the assignment takes, so the test holds
that save up (a write lock on the group's row in the coordinator database, taken from
outside the broker) and records both members' views meanwhile: they never overlap, and
once the save goes through the two split the partitions."""

from __future__ import annotations

import contextlib
import sqlite3
import time
from collections.abc import Iterator

import pytest
from e2e_backends import SCALE_OUT
from e2e_fixtures import BrokerFactory
from e2e_harness import BrokerProcess, create_topic, wait_until
from group_clients import KafkaPythonMember, stop_all, unique, wait_assignment

ENV = {"GROUP_INITIAL_REBALANCE_DELAY_MS": 300, "GROUP_MIN_SESSION_TIMEOUT_MS": 1000}
HELD_S = 5.0
"""How long the leader's save is held up: long enough for the second member to join and
both to sync (a heartbeat interval and a few round trips), well under the broker's
10 s SQLite busy timeout."""
TIMEOUT_S = 60.0

pytestmark = pytest.mark.timeout(180)


@contextlib.contextmanager
def group_saves_held(broker: BrokerProcess, group: str) -> Iterator[None]:
    """Block every write of `group`'s record until the block ends (a fault injected
    from outside: the broker just sees a slow database)."""
    if SCALE_OUT:
        import psycopg

        with psycopg.connect(broker.backend.coordinator_url) as conn:
            row = conn.execute(
                "SELECT group_id FROM groups WHERE group_id = %s FOR UPDATE", (group,)
            ).fetchone()
            assert row is not None, f"group {group} was never saved"
            try:
                yield
            finally:
                conn.rollback()
        return
    conn = sqlite3.connect(broker.sqlite_path, timeout=30, isolation_level=None)
    try:
        conn.execute("BEGIN IMMEDIATE")  # the one writer's lock: the broker's saves wait
        try:
            yield
        finally:
            conn.execute("ROLLBACK")
    finally:
        conn.close()


def test_second_member_never_owns_what_the_first_still_holds(
    broker_factory: BrokerFactory,
) -> None:
    broker = broker_factory(env=ENV)
    topic, group = unique("sync-order"), unique("g")
    create_topic(broker.bootstrap, topic, partitions=2)
    first = KafkaPythonMember(broker.bootstrap, topic, group, "first").start()
    members = [first]
    try:
        wait_assignment([first], 2, TIMEOUT_S, "the first member's assignment")
        wait_until(lambda: _saved(broker, group), TIMEOUT_S, "the first generation saved")
        timeline: list[tuple[float, frozenset[int], frozenset[int]]] = []
        with group_saves_held(broker, group):
            second = KafkaPythonMember(broker.bootstrap, topic, group, "second").start()
            members.append(second)
            start = time.monotonic()
            while time.monotonic() - start < HELD_S:
                views = (first.assignment, second.assignment)
                if not timeline or timeline[-1][1:] != views:
                    timeline.append((round(time.monotonic() - start, 3), *views))
                assert not views[0] & views[1], _report(timeline, members)
                time.sleep(0.02)
        # The first member's view is unchanged while its answer waits for the save.
        assert all(a == frozenset({0, 1}) for _, a, _ in timeline), _report(timeline, members)
        got = wait_assignment(members, 2, TIMEOUT_S, "the two members' split")
        assert sorted(len(a) for a in got.values()) == [1, 1], got
    finally:
        stop_all(members)


def _saved(broker: BrokerProcess, group: str) -> bool:
    """The group's record exists in the coordinator database (the row the test locks)."""
    if SCALE_OUT:
        import psycopg

        with psycopg.connect(broker.backend.coordinator_url) as conn:
            query = "SELECT 1 FROM groups WHERE group_id = %s AND state = 'Stable'"
            return conn.execute(query, (group,)).fetchone() is not None
    with contextlib.closing(sqlite3.connect(broker.sqlite_path, timeout=30)) as conn:
        query = "SELECT 1 FROM groups WHERE group_id = ? AND state = 'Stable'"
        return conn.execute(query, (group,)).fetchone() is not None


def _report(timeline: list[tuple[float, frozenset[int], frozenset[int]]], members: list) -> str:
    lines = [f"  +{t:.3f}s first={sorted(a)} second={sorted(b)}" for t, a, b in timeline]
    return "assignment views (seconds after the second member started):\n" + "\n".join(
        lines + [m.describe() for m in members]
    )
