"""SIGKILL one broker of three under steady idempotent produce: clients move to the survivors
and no acknowledged record is lost or duplicated.

Every broker writes every partition, so the dead broker holds nothing the others need; what
can go wrong is in the seams: a batch the dead broker committed but never acknowledged must
be recognised as a duplicate when the producer retries it on a survivor (the idempotence
state lives in the shared coordinator), and the dead broker must stop leading partitions
so clients stop waiting for it: within seconds, once the survivors suspect it (its
heartbeat is overdue and its port refuses connections), not after the 30 s session timeout.
"""

from __future__ import annotations

import time
from collections import Counter
from pathlib import Path

import pytest
from cluster_support import (
    FAILOVER_ENV,
    assert_dense,
    assert_unique_values,
    bootstrap_of,
    high_watermarks,
    leaders_everywhere,
    metadata_view,
    read_log,
    start_cluster,
)
from e2e_fixtures import BrokerFactory
from e2e_harness import BrokerProcess, create_topic, wait_until
from steady_clients import SteadyProducer, TailingConsumer, healthy, total_acks

PARTITIONS = 6
PRODUCERS = 2
ACKS_BEFORE_KILL = 1500
ACKS_AFTER_MOVE = 1500
MOVED_WITHIN_S = 10.0


@pytest.mark.timeout(120)
def test_kill_one_of_three(
    broker_factory: BrokerFactory, tmp_path: Path, topic_name: str, request: pytest.FixtureRequest
) -> None:
    brokers = start_cluster(
        broker_factory,
        tmp_path / "cluster",
        [None, None, None],
        env=FAILOVER_ENV,
    )
    bootstrap = bootstrap_of(brokers)
    create_topic(brokers[0].bootstrap, topic_name, PARTITIONS)

    # The victim leads the most partitions, so the clients really have to move.
    view = metadata_view(bootstrap, "chaos-probe", topic_name)
    assert set(view.brokers) == {1, 2, 3}, view
    led = Counter(view.leaders.values())
    victim_id = led.most_common(1)[0][0]
    victim: BrokerProcess = brokers[victim_id - 1]
    victim_partitions = {p for p, leader in view.leaders.items() if leader == victim_id}
    survivors = [b for b in brokers if b is not victim]
    survivor_ids = {brokers.index(b) + 1 for b in survivors}

    producers = [SteadyProducer(n, bootstrap, topic_name, PARTITIONS) for n in range(PRODUCERS)]
    tail = TailingConsumer(bootstrap, topic_name, PARTITIONS)
    request.addfinalizer(tail.close)  # also when an assertion fails before its own stop
    for thread in [*(p.thread for p in producers), tail.thread]:
        thread.start()
    try:
        wait_until(
            lambda: total_acks(producers) >= ACKS_BEFORE_KILL or not healthy(producers),
            30,
            f"{ACKS_BEFORE_KILL} acks before the kill",
        )
        assert healthy(producers), [(p.error, p.fatal) for p in producers]

        in_flight = sum(p.sent for p in producers) - total_acks(producers)
        sent_at_kill = [p.sent for p in producers]
        victim.kill()  # mid-stream: requests in flight, a WAL buffer half full
        killed_at = time.monotonic()
        print(
            f"killed {victim.name} (leader of {led[victim_id]} partitions) "
            f"with {in_flight} records unacknowledged"
        )

        # Within seconds the survivors lead every partition, as every survivor tells it
        # (a reader bootstrapping from a lagging one would wait for the dead broker). The
        # dead broker is still named (leading nothing), so clients do not resend what they
        # had in flight there.
        moved = wait_until(
            lambda: (
                (v := leaders_everywhere(survivors, "chaos-probe", topic_name))
                and set(v.leaders.values()) <= survivor_ids
                and v
            ),
            40,
            "the dead broker to lead no partition",
            interval=0.2,
        )
        left_after = time.monotonic() - killed_at
        print(f"dead broker led nothing after {left_after:.1f}s; leaders {moved.leaders}")
        assert left_after < MOVED_WITHIN_S, f"its partitions moved only after {left_after:.1f}s"
        logs = "".join(b.log_text() for b in survivors)
        assert f"broker {victim_id} looks gone" in logs
        assert "fenced broker" not in logs, "the move came from fencing, not suspicion"
        assert set(moved.leaders) == set(range(PARTITIONS)), moved

        # Resumed: a record produced after the kill to a partition the victim led is
        # acknowledged (by a survivor).
        def resumed() -> float | None:
            return min(
                (t for p in producers for t in p.acked_since(sent_at_kill[p.n], victim_partitions)),
                default=None,
            )

        first = wait_until(lambda: resumed() or not healthy(producers), 40, "a moved ack")
        assert healthy(producers), [(p.error, p.fatal) for p in producers]
        resume_s = first - killed_at
        print(f"produce to the dead broker's partitions resumed {resume_s:.2f}s after the kill")
        assert resume_s < MOVED_WITHIN_S, f"produce resumed only after {resume_s:.1f}s"
        assert survivor_ids <= set(moved.brokers) <= {1, 2, 3}, moved

        # Producers make progress on the survivors, on every partition.
        def progressed() -> bool:
            late = [a for p in producers for a in p.acks if a[3] > killed_at + left_after]
            if not healthy(producers):
                return True
            return len(late) >= ACKS_AFTER_MOVE and {a[1] for a in late} == set(range(PARTITIONS))

        wait_until(progressed, 30, f"{ACKS_AFTER_MOVE} acks on every partition after the move")
        assert healthy(producers), [(p.error, p.fatal) for p in producers]
    finally:
        for p in producers:
            p.stop.set()
        for p in producers:
            p.thread.join(60)
    for p in producers:
        assert not p.thread.is_alive(), f"producer {p.n} did not finish"
        assert p.error is None and p.fatal is None, (p.n, p.error, p.fatal)
        assert p.unflushed == 0, f"producer {p.n}: {p.unflushed} records never delivered"
        assert not p.failures, f"producer {p.n}: {len(p.failures)} failed: {p.failures[:5]}"

    # The final log, read from the survivors: dense, no id twice, every ack in it exactly
    # where the producer was told.
    high = high_watermarks(bootstrap_of(survivors), "chaos-reader", topic_name, PARTITIONS)
    log = read_log(bootstrap_of(survivors), "chaos-reader", topic_name, high)
    assert_dense(log, high)
    assert_unique_values(log)
    stored = {value: (p, offset) for p, records in log.items() for offset, value in records}
    acked = {value: (p, offset) for prod in producers for value, p, offset, _ in prod.acks}
    assert len(acked) == sum(len(p.acks) for p in producers), "a record was acked twice"
    lost = [v for v in acked if v not in stored]
    assert not lost, f"{len(lost)} acknowledged records lost, e.g. {lost[:5]}"
    moved_recs = [(v, acked[v], stored[v]) for v in acked if acked[v] != stored[v]]
    assert not moved_recs, f"acked offsets differ from the log: {moved_recs[:5]}"
    sent = {f"p{p.n}-{i}".encode() for p in producers for i in range(p.sent)}
    assert set(stored) <= sent, "the log holds records nobody produced"
    # Idempotent producers with no failures: the log is exactly what was acknowledged,
    # and each producer's records are in order in each partition.
    assert set(stored) == set(acked), f"{len(set(stored) - set(acked))} unacked records"
    for p, records in log.items():
        for n in range(PRODUCERS):
            ids = [int(v.split(b"-")[1]) for _, v in records if v.startswith(f"p{n}-".encode())]
            assert ids == sorted(ids), f"partition {p}: producer {n} out of order"

    # The tailing consumer followed the log through the kill and saw the same thing.
    wait_until(lambda: tail.caught_up(high) or tail.error, 30, "the tailing consumer to catch up")
    tail.close()
    assert tail.error is None, tail.error
    tailed = {p: [r for r in tail.seen[p] if r[0] < high[p]] for p in range(PARTITIONS)}
    assert tailed == log, "the tailing consumer read a different log"

    assert all(b.alive() for b in survivors), [b.exit_codes for b in survivors]
    print(f"{len(acked)} acked, high watermarks {high}, tail errors {Counter(tail.errors)}")
