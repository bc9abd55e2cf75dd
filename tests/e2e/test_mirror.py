"""Cluster mirroring (KIP-1279) between two Lakelog clusters on this machine (separate
data dirs and coordinators), driven by `lakelog mirror` as an operator would:

- keyed, idempotent and transactional (committed, aborted, still open) data lands at the
  same offsets; read_committed on the destination sees exactly what it sees on the source;
  the copy never runs past the source's last stable offset; produce to the mirror topic is
  refused with the read-only error;
- consumer group offsets sync, and after failover the group resumes on the destination
  without skipping a record; the topic is writable at the next offset; mirroring it back
  to a source that wrote on reports the divergence;
- `validate` reports a group id in use on both clusters and a partition count mismatch.
"""

from __future__ import annotations

import time

from cluster_support import metric_rows, metric_sum, scrape
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewPartitions
from e2e_fixtures import BrokerFactory
from e2e_harness import create_topic, wait_until
from mirror_support import (
    FAST_MIRROR,
    describe,
    end_offsets,
    mirror_cli,
    produce_keyed,
    read_log,
    two_clusters,
    values,
    wait_caught_up,
    wait_states,
)

PARTITIONS = 2


def _transactional(bootstrap: str, txn_id: str) -> Producer:
    producer = Producer(
        {"bootstrap.servers": bootstrap, "transactional.id": txn_id, "linger.ms": 1}
    )
    producer.init_transactions(30)
    return producer


def _send(producer: Producer, topic: str, tag: str, per_partition: int) -> list[bytes]:
    sent = []
    for i in range(per_partition):
        for p in range(PARTITIONS):
            value = f"{tag}-{p}-{i}".encode()
            producer.produce(topic, key=f"k{i % 5}".encode(), value=value, partition=p)
            sent.append(value)
    return sent


def _produce_error(bootstrap: str, topic: str) -> KafkaError | None:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 1, "retries": 0})
    errors: list[KafkaError | None] = []
    producer.produce(topic, value=b"nope", partition=0, on_delivery=lambda e, m: errors.append(e))
    producer.flush(30)
    return errors[0]


def test_mirror_keeps_offsets_and_transactions(
    broker_factory: BrokerFactory, topic_name: str
) -> None:
    c = two_clusters(broker_factory)
    src = c.source.bootstrap
    create_topic(src, topic_name, PARTITIONS)
    produce_keyed(src, topic_name, 300, PARTITIONS, "plain")
    committer = _transactional(src, "tx-commit")
    committer.begin_transaction()
    committed = _send(committer, topic_name, "committed", 20)
    committer.commit_transaction(30)
    committer.begin_transaction()
    aborted = _send(committer, topic_name, "aborted", 10)
    committer.flush(30)  # written, then aborted (an abort purges what was not sent)
    committer.abort_transaction(30)
    opener = _transactional(src, "tx-open")
    opener.begin_transaction()
    pending = _send(opener, topic_name, "pending", 5)
    opener.flush(30)
    produce_keyed(src, topic_name, 40, PARTITIONS, "after")

    mirror_cli(c.dest, "create", "dr", "--source", src, "--topic", topic_name)
    # The open transaction holds the source's last stable offset: the copy stops there.
    stable = wait_caught_up(c.source, c.dest, topic_name, PARTITIONS)
    source_end = end_offsets(src, topic_name, PARTITIONS)
    assert all(stable[p] < source_end[p] for p in range(PARTITIONS)), (stable, source_end)
    error = _produce_error(c.dest.bootstrap, topic_name)
    assert error is not None and error.code() == KafkaError.INVALID_REQUEST, error

    opener.commit_transaction(30)
    ends = wait_caught_up(c.source, c.dest, topic_name, PARTITIONS)
    assert ends == end_offsets(src, topic_name, PARTITIONS)

    for read_committed in (False, True):
        source_log = read_log(src, topic_name, PARTITIONS, read_committed)
        dest_log = read_log(c.dest.bootstrap, topic_name, PARTITIONS, read_committed)
        assert dest_log == source_log, f"read_committed={read_committed}"
    seen = set(values(dest_log))
    assert set(committed + pending) <= seen
    assert not seen & set(aborted)
    assert len(read_log(c.dest.bootstrap, topic_name, PARTITIONS)) > len(dest_log)

    rows = describe(c.dest, "dr")
    assert {(r["partition"], r["state"]) for r in rows} == {
        (p, "MIRRORING") for p in range(PARTITIONS)
    }
    assert all(r["last_mirrored_offset"] == ends[r["partition"]] - 1 for r in rows)

    assert c.dest.metrics_port is not None
    samples = scrape(c.dest.metrics_port)
    lag = metric_rows(samples, "lakelog_mirror_lag_records")
    assert sorted(
        int(labels["partition"]) for labels, _ in lag if labels["topic"] == topic_name
    ) == [
        0,
        1,
    ]
    assert all(v == 0 for labels, v in lag if labels["topic"] == topic_name)
    assert metric_sum(samples, "lakelog_mirror_bytes_total", mirror="dr") > 0
    assert metric_sum(samples, "lakelog_mirror_owned_partitions") == PARTITIONS
    wait_until(
        lambda: (
            metric_sum(
                scrape(c.dest.metrics_port or 0), "lakelog_mirror_partitions", state="MIRRORING"
            )
            == PARTITIONS
        ),
        10,
        "the state counts published",
    )

    # Topics created and partitions added on the source later follow (pattern).
    mirror_cli(c.dest, "add-topics", "dr", "--pattern", f"{topic_name}-later.*")
    later = f"{topic_name}-later"
    create_topic(src, later, 1)
    produce_keyed(src, later, 10, 1, "later")
    wait_caught_up(c.source, c.dest, later, 1)
    admin = AdminClient({"bootstrap.servers": src})
    admin.create_partitions([NewPartitions(later, 3)])[later].result(30)
    produce_keyed(src, later, 30, 3, "grown")
    wait_caught_up(c.source, c.dest, later, 3)


def _group_consumer(bootstrap: str, group: str) -> Consumer:
    return Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "fetch.wait.max.ms": 100,
        }
    )


def _consume(consumer: Consumer, topic: str, count: int | None, idle_s: float = 1.0) -> list:
    """Subscribe and consume `count` messages (or until idle), committing synchronously."""
    consumer.subscribe([topic])
    got = []
    deadline = time.monotonic() + 60
    quiet_since = time.monotonic()
    while time.monotonic() < deadline:
        wanted = 100 if count is None else min(100, count - len(got))
        if wanted <= 0:
            break
        batch = [m for m in consumer.consume(wanted, timeout=0.3) if m.error() is None]
        if batch:
            got += batch
            consumer.commit(asynchronous=False)
            quiet_since = time.monotonic()
        elif count is None and got and time.monotonic() - quiet_since > idle_s:
            break
    return got


def test_group_sync_failover_and_failback_divergence(
    broker_factory: BrokerFactory, topic_name: str
) -> None:
    c = two_clusters(broker_factory, source_env=FAST_MIRROR)
    src, dst = c.source.bootstrap, c.dest.bootstrap
    create_topic(src, topic_name, PARTITIONS)
    produce_keyed(src, topic_name, 400, PARTITIONS, "a")
    mirror_cli(c.dest, "create", "dr", "--source", src)
    mirror_cli(c.dest, "add-topics", "dr", topic_name)

    source_group = _group_consumer(src, "billing")
    consumed = _consume(source_group, topic_name, 150)
    source_group.close()
    assert len(consumed) == 150
    produce_keyed(src, topic_name, 100, PARTITIONS, "b")
    wait_caught_up(c.source, c.dest, topic_name, PARTITIONS)

    parts = [TopicPartition(topic_name, p) for p in range(PARTITIONS)]

    def committed(bootstrap: str) -> dict[int, int]:
        probe = _group_consumer(bootstrap, "billing")
        try:
            return {tp.partition: tp.offset for tp in probe.committed(parts, timeout=10)}
        finally:
            probe.close()

    at_source = committed(src)  # negative: nothing committed there (reads from the start)
    assert sum(max(o, 0) for o in at_source.values()) == 150
    wait_until(lambda: committed(dst) == at_source, 20, "group offsets synced", interval=0.3)

    out = mirror_cli(c.dest, "remove-topics", "dr", topic_name).stdout
    assert "failed over" in out, out
    ends = end_offsets(dst, topic_name, PARTITIONS)
    assert [r["state"] for r in describe(c.dest, "dr")] == ["STOPPED"] * PARTITIONS
    # Writable now, at the next offset.
    producer = Producer({"bootstrap.servers": dst, "linger.ms": 1})
    placed: list[tuple[int, int]] = []
    for p in range(PARTITIONS):
        producer.produce(
            topic_name,
            value=f"c-{p}".encode(),
            partition=p,
            on_delivery=lambda e, m: placed.append((m.partition(), m.offset())),
        )
    assert producer.flush(30) == 0
    assert sorted(placed) == [(p, ends[p]) for p in range(PARTITIONS)]

    # The group resumes on the destination where it stopped on the source: nothing skipped.
    dest_log = read_log(dst, topic_name, PARTITIONS)
    expected = {(p, o) for (p, o) in dest_log if o >= max(at_source[p], 0)}
    resumed = _group_consumer(dst, "billing")
    after = _consume(resumed, topic_name, None)
    resumed.close()
    assert {(m.partition(), m.offset()) for m in after} == expected
    assert len(after) == len(expected)  # and nothing twice

    # Failback: the old source wrote on after the failover point, so mirroring the topic
    # back from the destination must report the divergence, not merge the two logs.
    produce_keyed(src, topic_name, 10, PARTITIONS, "diverging")
    mirror_cli(c.source, "create", "back", "--source", dst, "--topic", topic_name)
    rows = wait_states(c.source, "back", topic_name, {p: "FAILED" for p in range(PARTITIONS)})
    assert all("diverged" in (r["reason"] or "") for r in rows.values()), rows


def test_validate_reports_collisions(broker_factory: BrokerFactory, topic_name: str) -> None:
    c = two_clusters(broker_factory)
    src, dst = c.source.bootstrap, c.dest.bootstrap
    create_topic(src, topic_name, PARTITIONS)
    produce_keyed(src, topic_name, 20, PARTITIONS, "v")
    _consume(_group_consumer(src, "payments"), topic_name, 20).clear()
    # The same group id already runs on the destination, on a topic of its own.
    create_topic(dst, "local-topic", 1)
    produce_keyed(dst, "local-topic", 5, 1, "local")
    planted = _group_consumer(dst, "payments")
    assert len(_consume(planted, "local-topic", 5)) == 5
    planted.close()
    # A topic on both sides with different partition counts.
    create_topic(src, f"{topic_name}-wide", 2)
    create_topic(dst, f"{topic_name}-wide", 4)

    mirror_cli(c.dest, "create", "mig", "--source", src)
    done = mirror_cli(c.dest, "validate", "mig", check=False)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "group_id_collision" in done.stdout and "payments" in done.stdout, done.stdout
    assert "partition_count" in done.stdout and f"{topic_name}-wide" in done.stdout
    clean = mirror_cli(c.dest, "create", "clean", "--source", dst)
    assert clean.returncode == 0
    assert mirror_cli(c.dest, "describe", "mig").returncode == 0
    missing = mirror_cli(c.dest, "describe", "nope", check=False)
    assert missing.returncode == 1 and "RESOURCE_NOT_FOUND" in missing.stderr
