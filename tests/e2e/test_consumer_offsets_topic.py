"""`__consumer_offsets` as lag tools see it, with real clients.

- a confluent-kafka consumer commits; a kafka-python consumer assigned to the group's
  partition of `__consumer_offsets` (Kafka's abs(hashCode) % 50) reads the commit back,
  decoded by a decoder written here from Kafka's OffsetCommitKey/Value and
  GroupMetadataKey specs; deleting the group leaves tombstones;
- Metadata and DescribeTopicPartitions list it as internal with 50 partitions; a pattern
  subscription gets it only when the client does not exclude internal topics (kafka-python's
  exclude_internal_topics, default true, as Kafka's clients);
- clients cannot write it: Produce answers INVALID_TOPIC_EXCEPTION, CreateTopics
  TOPIC_ALREADY_EXISTS, DeleteTopics, DeleteRecords, CreatePartitions and config changes
  are refused;
  DescribeConfigs shows it compacted.
"""

from __future__ import annotations

import struct
import time
import uuid
from typing import Any

import pytest
from e2e_harness import BrokerProcess, create_topic, wait_until
from e2e_wire import WireClient, list_offsets_v1, request_class

pytestmark = pytest.mark.timeout(180)

OFFSETS_TOPIC = "__consumer_offsets"
PARTITIONS = 50


def java_hash(text: str) -> int:
    h = 0
    for unit in struct.unpack(f">{len(text.encode('utf-16-be')) // 2}H", text.encode("utf-16-be")):
        h = (31 * h + unit) & 0xFFFFFFFF
    return h - (1 << 32) if h & 0x80000000 else h


def group_partition(group_id: str) -> int:
    h = java_hash(group_id)
    return (0 if h == -(1 << 31) else abs(h)) % PARTITIONS


def _str(data: bytes, pos: int) -> tuple[str | None, int]:
    (n,) = struct.unpack_from(">h", data, pos)
    pos += 2
    if n < 0:
        return None, pos
    return data[pos : pos + n].decode(), pos + n


def decode(key: bytes, value: bytes | None) -> dict[str, Any]:
    """A record of `__consumer_offsets`, as Burrow-style readers decode it."""
    (version,) = struct.unpack_from(">h", key, 0)
    if version in (0, 1):
        group, pos = _str(key, 2)
        topic, pos = _str(key, pos)
        (partition,) = struct.unpack_from(">i", key, pos)
        out: dict[str, Any] = {"kind": "offset", "group": group, "topic": topic, "p": partition}
        if value is not None:
            (value_version, offset) = struct.unpack_from(">hq", value, 0)
            pos = 10
            epoch = -1
            if value_version >= 3:
                (epoch,) = struct.unpack_from(">i", value, pos)
                pos += 4
            metadata, pos = _str(value, pos)
            (commit_ts,) = struct.unpack_from(">q", value, pos)
            out.update(offset=offset, epoch=epoch, metadata=metadata, commit_ts=commit_ts)
        out["tombstone"] = value is None
        return out
    if version == 2:
        group, _ = _str(key, 2)
        return {"kind": "group", "group": group, "tombstone": value is None}
    return {"kind": f"other-{version}", "tombstone": value is None}


def read_offsets_topic(bootstrap: str, group_id: str) -> list[dict[str, Any]]:
    """Everything in the group's partition of `__consumer_offsets` about `group_id`."""
    from kafka import KafkaConsumer, TopicPartition

    tp = TopicPartition(OFFSETS_TOPIC, group_partition(group_id))
    consumer = KafkaConsumer(
        bootstrap_servers=bootstrap, enable_auto_commit=False, consumer_timeout_ms=3000
    )
    try:
        consumer.assign([tp])
        consumer.seek_to_beginning(tp)
        end = consumer.end_offsets([tp])[tp]
        found = []
        deadline = time.monotonic() + 60
        while consumer.position(tp) < end and time.monotonic() < deadline:
            for records in consumer.poll(timeout_ms=1000).values():
                for r in records:
                    decoded = decode(r.key, r.value)
                    if decoded.get("group") == group_id:
                        found.append(decoded)
        assert consumer.position(tp) >= end, "did not read up to the end offset"
        return found
    finally:
        consumer.close()


def commit_with_confluent(bootstrap: str, topic: str, group_id: str, count: int) -> None:
    from confluent_kafka import Consumer, Producer, TopicPartition

    producer = Producer({"bootstrap.servers": bootstrap})
    for i in range(count):
        producer.produce(topic, key=b"k", value=b"v%d" % i, partition=0)
    assert producer.flush(30) == 0
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group_id,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    try:
        consumer.subscribe([topic])
        seen = 0
        deadline = time.monotonic() + 60
        while seen < count and time.monotonic() < deadline:
            msg = consumer.poll(1.0)
            if msg is not None and not msg.error():
                seen += 1
        assert seen == count
        consumer.commit(offsets=[TopicPartition(topic, 0, count)], asynchronous=False)
    finally:
        consumer.close()


def test_lag_reader_sees_commits_and_tombstones(
    shared_broker: BrokerProcess, topic_name: str
) -> None:
    bootstrap = shared_broker.bootstrap
    create_topic(bootstrap, topic_name, partitions=1)
    group_id = f"offsets-reader-{uuid.uuid4().hex[:8]}"
    commit_with_confluent(bootstrap, topic_name, group_id, 7)

    records = read_offsets_topic(bootstrap, group_id)
    commits = [r for r in records if r["kind"] == "offset" and r["topic"] == topic_name]
    assert commits, records
    last = commits[-1]
    assert (last["p"], last["offset"], last["metadata"], last["tombstone"]) == (
        0,
        7,
        "",  # no commit metadata: Kafka writes ""
        False,
    )
    assert abs(last["commit_ts"] - time.time() * 1000) < 600_000
    # The classic group's metadata is there too (the group ran a rebalance).
    assert any(r["kind"] == "group" and not r["tombstone"] for r in records), records

    # The log end as a librdkafka consumer validating its position asks for it.
    end = end_offset(shared_broker.port, group_partition(group_id))
    assert end >= len(records)

    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.delete_consumer_groups([group_id], request_timeout=15).values():
        future.result()
    after = read_offsets_topic(bootstrap, group_id)
    latest: dict[tuple, dict[str, Any]] = {}
    for r in after:
        latest[(r["kind"], r.get("topic"), r.get("p"))] = r
    assert latest[("offset", topic_name, 0)]["tombstone"]
    assert latest[("group", None, None)]["tombstone"]


def end_offset(port: int, partition: int) -> int:
    """OffsetForLeaderEpoch's end offset for the partition, checked against ListOffsets'."""
    with WireClient(port) as client:
        m = request_class(23, 3)
        response = client.request(
            23,
            3,
            m.OffsetForLeaderEpochRequest(
                replica_id=m.BrokerId(-1),
                topics=(
                    m.OffsetForLeaderTopic(
                        topic=m.TopicName(OFFSETS_TOPIC),
                        partitions=(
                            m.OffsetForLeaderPartition(
                                partition=m.i32(partition),
                                current_leader_epoch=m.i32(0),
                                leader_epoch=m.i32(0),
                            ),
                        ),
                    ),
                ),
            ),
        )
        [answer] = response.topics[0].partitions
        assert (answer.error_code, answer.leader_epoch) == (0, 0)
        listed = client.request(2, 1, list_offsets_v1(OFFSETS_TOPIC, partition, -1))
        [latest] = listed.topics[0].partitions
        assert (latest.error_code, latest.offset) == (0, answer.end_offset)
        return int(answer.end_offset)


def test_listed_as_internal(shared_broker: BrokerProcess) -> None:
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": shared_broker.bootstrap})
    metadata = admin.list_topics(timeout=15)
    assert OFFSETS_TOPIC in metadata.topics
    assert len(metadata.topics[OFFSETS_TOPIC].partitions) == PARTITIONS
    described = admin.describe_topics(_topic_collection([OFFSETS_TOPIC]), request_timeout=15)[
        OFFSETS_TOPIC
    ].result()
    assert described.is_internal
    assert len(described.partitions) == PARTITIONS


def _topic_collection(names: list[str]) -> Any:
    from confluent_kafka import TopicCollection

    return TopicCollection(names)


def test_pattern_subscription_excludes_internal_topics(
    shared_broker: BrokerProcess, topic_name: str
) -> None:
    from kafka import KafkaConsumer
    from kafka.structs import OffsetAndMetadata

    bootstrap = shared_broker.bootstrap
    create_topic(bootstrap, topic_name, partitions=1)
    pattern = f"^({OFFSETS_TOPIC}|{topic_name})$"

    def subscribed(exclude_internal: bool) -> set[str]:
        consumer = KafkaConsumer(
            bootstrap_servers=bootstrap,
            group_id=f"pattern-{uuid.uuid4().hex[:8]}",
            exclude_internal_topics=exclude_internal,
            enable_auto_commit=False,
        )
        try:
            consumer.subscribe(pattern=pattern)

            def topics() -> set[str] | None:
                consumer.poll(timeout_ms=200)
                got = {tp.topic for tp in consumer.assignment()}
                return got if topic_name in got else None

            got = wait_until(topics, 60, "the pattern subscription's assignment")
            if OFFSETS_TOPIC in got:  # a reader's group may commit its position there
                tp = next(tp for tp in consumer.assignment() if tp.topic == OFFSETS_TOPIC)
                position = consumer.position(tp)
                consumer.commit({tp: OffsetAndMetadata(position, "", -1)})
                assert consumer.committed(tp) == position
            return got
        finally:
            consumer.close()

    assert subscribed(exclude_internal=True) == {topic_name}
    assert subscribed(exclude_internal=False) == {topic_name, OFFSETS_TOPIC}


def test_clients_cannot_write_it(shared_broker: BrokerProcess) -> None:
    from confluent_kafka import KafkaError, KafkaException, Producer, TopicPartition
    from confluent_kafka.admin import (
        AdminClient,
        AlterConfigOpType,
        ConfigEntry,
        ConfigResource,
        NewPartitions,
        NewTopic,
    )

    bootstrap = shared_broker.bootstrap
    errors: list[Any] = []
    producer = Producer({"bootstrap.servers": bootstrap, "message.send.max.retries": 0})
    producer.produce(
        OFFSETS_TOPIC, key=b"k", value=b"v", partition=0, on_delivery=lambda e, m: errors.append(e)
    )
    assert producer.flush(30) == 0
    assert [e.code() if e else None for e in errors] == [KafkaError.TOPIC_EXCEPTION]

    admin = AdminClient({"bootstrap.servers": bootstrap})

    def error_of(futures: dict[str, Any]) -> int:
        with pytest.raises(Exception) as raised:
            futures[OFFSETS_TOPIC].result()
        return int(raised.value.args[0].code())

    created = admin.create_topics([NewTopic(OFFSETS_TOPIC, 1, 1)], request_timeout=15)
    assert error_of(created) == KafkaError.TOPIC_ALREADY_EXISTS
    deleted = admin.delete_topics([OFFSETS_TOPIC], request_timeout=15)
    assert error_of(deleted) == KafkaError.TOPIC_EXCEPTION
    grown = admin.create_partitions([NewPartitions(OFFSETS_TOPIC, 60)], request_timeout=15)
    assert error_of(grown) == KafkaError.INVALID_PARTITIONS
    [trimmed] = admin.delete_records(
        [TopicPartition(OFFSETS_TOPIC, 0, 0)], request_timeout=15
    ).values()
    with pytest.raises(KafkaException) as raised:
        trimmed.result()
    assert raised.value.args[0].code() == KafkaError.TOPIC_EXCEPTION
    resource = ConfigResource(ConfigResource.Type.TOPIC, OFFSETS_TOPIC)
    [described] = admin.describe_configs([resource], request_timeout=15).values()
    assert described.result()["cleanup.policy"].value == "compact"
    resource.add_incremental_config(
        ConfigEntry("retention.ms", "1000", incremental_operation=AlterConfigOpType.SET)
    )
    [altered] = admin.incremental_alter_configs([resource], request_timeout=15).values()
    with pytest.raises(KafkaException) as raised:
        altered.result()
    assert raised.value.args[0].code() == KafkaError.POLICY_VIOLATION
    # Still there, still 50 partitions.
    assert len(admin.list_topics(timeout=15).topics[OFFSETS_TOPIC].partitions) == PARTITIONS
