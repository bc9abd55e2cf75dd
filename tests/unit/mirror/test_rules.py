"""The mirror's pure decisions: which source topics a mirror follows, which topic configs
are copied, group offsets capped at the destination's last stable offset, where a PREPARING
partition starts, and when a failback must report divergence."""

from __future__ import annotations

import uuid

from lakelog.coordinator.mirror_rules import truncation_point
from lakelog.coordinator.mirror_types import MirrorDefinition, MirrorPartition, MirrorState
from lakelog.mirror.fetcher import fetcher_index
from lakelog.mirror.follow import copied_configs, matching
from lakelog.mirror.group_sync import capped_offsets
from lakelog.mirror.prepare import failback_verdict, fresh, resumable, updates_for
from lakelog.mirror.source import SourceTopic, unsupported_settings


def _partition(high: int, start: int = 0, failover: int = -1, epoch: int = -1) -> MirrorPartition:
    return MirrorPartition(
        "m", "t", uuid.uuid4(), 0, MirrorState.PREPARING, high, high, start, epoch, -1, 0,
        None, -1, -1, 0, failover, 0,
    )  # fmt: skip


def test_matching_names_patterns_and_never_internal_topics() -> None:
    topics = [
        SourceTopic("orders", None, {0: 1}),
        SourceTopic("orders-eu", None, {0: 1}),
        SourceTopic("payments", None, {0: 1}),
        SourceTopic("__consumer_offsets", None, {0: 1}, is_internal=True),
    ]
    d = MirrorDefinition("m", "s:1", topics=["payments"], patterns=["orders.*", "__.*"])
    assert [t.name for t in matching(d, topics)] == ["orders", "orders-eu", "payments"]
    assert matching(MirrorDefinition("m", "s:1", patterns=["order"]), topics) == []


def test_only_known_topic_configs_are_copied() -> None:
    got = copied_configs({"retention.ms": "5", "cleanup.policy": "compact", "x.y": "1"})
    assert got == {"retention.ms": "5", "cleanup.policy": "compact"}


def test_unsupported_client_settings_are_named() -> None:
    assert unsupported_settings({"client.id": "a", "security.protocol": "PLAINTEXT"}) == []
    assert unsupported_settings({"security.protocol": "SASL_SSL", "sasl.mechanism": "PLAIN"}) == [
        "SASL_SSL needs sasl.username and sasl.password (or sasl.jaas.config)"
    ]
    assert unsupported_settings({"sasl.kerberos.service.name": "kafka"}) == [
        "unsupported settings: sasl.kerberos.service.name=kafka"
    ]


def test_group_offsets_are_capped_at_the_destination_end() -> None:
    committed = {("t", 0): 50, ("t", 1): 10, ("t", 2): 7, ("other", 0): 3, ("t", 3): -1}
    ends = {("t", 0): 40, ("t", 1): 40, ("t", 2): 40, ("t", 3): 40}
    current = {("t", 2): 7}
    assert capped_offsets(committed, ends, current) == {("t", 0): 40, ("t", 1): 10}


def test_truncation_point_is_the_last_stable_offset() -> None:
    assert truncation_point(10, [], 0) == 10
    assert truncation_point(10, [7, 4], 0) == 4
    assert truncation_point(10, [2], 5) == 5


def test_where_preparing_partitions_start() -> None:
    assert fresh(_partition(0)) and fresh(_partition(30, start=30))
    assert not fresh(_partition(30)) and not resumable(_partition(30))
    assert resumable(_partition(30, epoch=0))
    assert not resumable(_partition(30, failover=20, epoch=0))


def test_failback_reports_divergence_instead_of_merging() -> None:
    ok = failback_verdict(_partition(20), {"failover_offset": 20, "source_epoch": 0})
    assert ok.failure is None and ok.start_offset is None
    behind = failback_verdict(_partition(15), {"failover_offset": 20})
    assert behind.failure is None
    ahead = failback_verdict(_partition(25), {"failover_offset": 20, "source_epoch": 3})
    assert ahead.failure is not None and "20..24" in ahead.failure
    unknown = failback_verdict(_partition(25), None)
    assert unknown.failure is not None and "diverged" in unknown.failure
    not_failed_over = failback_verdict(_partition(25), {"failover_offset": -1})
    assert not_failed_over.failure is not None
    p = _partition(25)
    [update] = updates_for(3, [p], {("t", 0): ahead})
    assert (update.state, update.broker_id, update.reason) == (MirrorState.FAILED, 3, ahead.failure)


def test_partitions_spread_over_the_fetchers() -> None:
    topic = uuid.uuid4()
    counts = [0, 0, 0, 0]
    for p in range(400):
        counts[fetcher_index(topic, p, 4)] += 1
    assert all(60 < c < 140 for c in counts)
    assert fetcher_index(topic, 7, 4) == fetcher_index(topic, 7, 4)
