"""offsets.retention.minutes: committed offsets of an empty group expire; an active group's
offsets stay."""

from __future__ import annotations

from e2e_fixtures import BrokerFactory
from e2e_harness import create_topic, wait_until
from kafka import KafkaAdminClient, KafkaConsumer, TopicPartition
from kafka.structs import OffsetAndMetadata


def test_empty_groups_lose_old_offsets(broker_factory: BrokerFactory) -> None:
    broker = broker_factory(
        {
            "OFFSETS_RETENTION_MINUTES": 0,
            "OFFSETS_RETENTION_CHECK_INTERVAL_MS": 200,
            "GROUP_INITIAL_REBALANCE_DELAY_MS": 100,
        }
    )
    create_topic(broker.bootstrap, "kept", 1)
    tp = TopicPartition("kept", 0)
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    active = KafkaConsumer(
        "kept", bootstrap_servers=broker.bootstrap, group_id="active", enable_auto_commit=False
    )
    try:
        while not active.assignment():
            active.poll(200)
        active.commit({tp: OffsetAndMetadata(0, "", -1)})
        # A standalone commit: the group "idle" has no members, so its offsets expire.
        idle = KafkaConsumer(
            bootstrap_servers=broker.bootstrap, group_id="idle", enable_auto_commit=False
        )
        idle.assign([tp])
        idle.commit({tp: OffsetAndMetadata(0, "", -1)})
        idle.close()
        wait_until(
            lambda: not admin.list_group_offsets("idle")["idle"],
            20,
            "the idle group's offsets to expire",
        )
        assert admin.list_group_offsets("active")["active"], "an active group lost offsets"
    finally:
        active.close()
        admin.close()
