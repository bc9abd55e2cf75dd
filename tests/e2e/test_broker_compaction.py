"""The broker compacts `cleanup.policy=compact` topics by itself (issue 31, item 4): a
client writes 40 records over 13 keys, some of them tombstones, leaves the topic alone
past segment.ms and min.compaction.lag.ms, and reads back one record per live key
(its latest value); the tombstoned keys are gone after delete.retention.ms. No Spark job
runs: only the broker. Runs on both backends (LAKELOG_TEST_BACKEND)."""

from __future__ import annotations

from compaction_support import (
    COMPACTED_TOPIC,
    FAST_COMPACTION,
    check_exact,
    forty_over_thirteen,
    fully_compacted,
    latest,
    produce_each,
    read_partition,
)
from e2e_fixtures import BrokerFactory
from e2e_harness import create_topic, wait_until


def test_a_compacted_topic_compacts_itself(broker_factory: BrokerFactory, topic_name: str) -> None:
    broker = broker_factory(FAST_COMPACTION)
    create_topic(broker.bootstrap, topic_name, 1, COMPACTED_TOPIC)
    written = forty_over_thirteen()
    produce_each(broker.bootstrap, topic_name, written)

    seen: list[int] = []
    broken: list[str] = []

    def compacted() -> bool:
        read = read_partition(broker.bootstrap, topic_name)
        try:
            check_exact(read, written)  # at every step: offsets kept, latest values there
        except AssertionError as exc:  # wait_until retries on errors: keep it for the end
            broken.append(str(exc))
        seen.append(len(read))
        return fully_compacted(read, written)

    wait_until(compacted, 90, "one record per live key, tombstones gone", interval=0.5)
    assert broken == []
    read = read_partition(broker.bootstrap, topic_name)
    live = {k: v for k, (_, v) in latest(written).items() if v is not None}
    assert {key: value for key, value in read.values()} == live
    assert len(read) == 11 and b"k03" not in live and b"k07" not in live
    assert seen[0] <= 40
    assert "compaction of" in broker.log_text()


def test_a_delete_topic_is_left_alone(broker_factory: BrokerFactory, topic_name: str) -> None:
    """cleanup.policy=delete (the default): the same writes stay, every one of them, while
    a compacted topic on the same broker is compacted (so the loop did run)."""
    broker = broker_factory(FAST_COMPACTION)
    plain = {k: v for k, v in COMPACTED_TOPIC.items() if k != "cleanup.policy"}
    create_topic(broker.bootstrap, topic_name, 1, plain)
    create_topic(broker.bootstrap, topic_name + "-c", 1, COMPACTED_TOPIC)
    written = forty_over_thirteen()
    produce_each(broker.bootstrap, topic_name, written)
    produce_each(broker.bootstrap, topic_name + "-c", written)
    wait_until(
        lambda: fully_compacted(read_partition(broker.bootstrap, topic_name + "-c"), written),
        90,
        "the compacted topic compacted",
        interval=0.5,
    )
    assert len(read_partition(broker.bootstrap, topic_name)) == 40
