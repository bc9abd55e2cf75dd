"""Kafka 4.1 parity on the wire: the ApiVersions a broker advertises against Kafka 4.1's
versions and the allow-list in docs/clients.md; every allow-listed version answered with
a typed error on a connection that stays open; AlterReplicaLogDirs and DescribeGroups v6
as Kafka answers them; and group, offset and transaction workloads through
FindCoordinator v6, by kafka-python (which picks the newest versions both sides speak)
and by raw frames at the newest versions a Kafka 4.1 broker serves.

No development pre-release of kafka-python is on the package index (3.0.12 is the newest
release and no `--pre` version exists), so the raw-frame test stands in for one.

Error codes: MEMBER_ID_REQUIRED=79, UNSUPPORTED_VERSION=35, GROUP_ID_NOT_FOUND=69."""

from __future__ import annotations

import datetime
import struct
import time
from typing import Any

from cluster_support import metric_sum, scrape
from e2e_fixtures import BrokerFactory
from e2e_harness import BrokerProcess, create_topic
from e2e_wire import WireClient, request_class
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
from kafka.errors import LogDirNotFoundError, NoError
from kafka.structs import OffsetAndMetadata
from kio.index import load_request_schema
from txn_wire import (
    NONE,
    add_offsets,
    add_partitions_batched,
    end_txn,
    init_producer_id,
    produce,
    txn_batch,
    txn_offset_commit,
)

from lakelog.server.api.unserved import unserved_code
from tests.support.api_parity import allow_list, allowed_pairs, gaps
from tests.support.request_samples import sample
from tests.support.responses import error_codes

MEMBER_ID_REQUIRED = 79
UNSUPPORTED_VERSION = 35
GROUP_ID_NOT_FOUND = 69
TXN_ENV = {"TRANSACTION_ABORT_TIMED_OUT_TRANSACTION_CLEANUP_INTERVAL_MS": 1000}


def _advertised(client: WireClient) -> dict[int, tuple[int, int]]:
    m = request_class(18, 3)
    response = client.request(
        18, 3, m.ApiVersionsRequest(client_software_name="parity", client_software_version="1")
    )
    assert response.error_code == NONE
    return {int(k.api_key): (int(k.min_version), int(k.max_version)) for k in response.api_keys}


def test_advertised_versions_cover_kafka_41_but_the_allow_list(broker: BrokerProcess) -> None:
    with WireClient(broker.port) as client:
        advertised = _advertised(client)
    missing = sorted(gaps(advertised) - allowed_pairs(allow_list()))
    # SaslHandshake and SaslAuthenticate are advertised on SASL listeners only.
    assert missing == [(17, 0), (17, 1), (36, 0), (36, 1), (36, 2)]
    assert advertised[34] == (1, 2)  # AlterReplicaLogDirs
    assert advertised[1] == (4, 18) and advertised[15] == (0, 6)


def test_versions_not_served_get_a_typed_error_and_the_connection_stays(
    broker: BrokerProcess,
) -> None:
    # Past Kafka 4.1 (kio knows them) and the SASL APIs on a listener without SASL too.
    beyond = [(2, 11), (8, 10), (9, 10), (22, 6), (17, 1), (36, 2)]
    pairs = sorted(allowed_pairs(allow_list())) + beyond
    with WireClient(broker.port) as client:
        for api_key, version in pairs:
            request = sample(load_request_schema(api_key, version), count=1)
            response = client.request(api_key, version, request)
            assert unserved_code(api_key) in error_codes(response), (api_key, version)
        assert _advertised(client)[18] == (0, 4)  # the same connection still serves


def test_end_txn_v5_is_answered_unsupported(broker: BrokerProcess) -> None:
    m = request_class(26, 5)
    with WireClient(broker.port) as client:
        response = client.request(
            26,
            5,
            m.EndTxnRequest(
                transactional_id="t",
                producer_id=m.ProducerId(1),
                producer_epoch=m.i16(0),
                committed=True,
            ),
        )
        assert (response.error_code, response.producer_id) == (UNSUPPORTED_VERSION, -1)


def _node_and_log_dir(port: int) -> tuple[int, str]:
    m = request_class(35, 4)
    with WireClient(port) as client:
        cluster = client.request(
            60,
            0,
            request_class(60, 0).DescribeClusterRequest(
                include_cluster_authorized_operations=False
            ),
        )
        described = client.request(35, 4, m.DescribeLogDirsRequest(topics=()))
    (result,) = described.results
    (me,) = cluster.brokers
    return int(me.broker_id), str(result.log_dir)


def test_alter_replica_log_dirs_through_kafka_python(broker: BrokerProcess) -> None:
    """The broker's one log dir: NONE (nothing moves); any other: LOG_DIR_NOT_FOUND."""
    create_topic(broker.bootstrap, "dirs", 2)
    node, log_dir = _node_and_log_dir(broker.port)
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    try:
        answers = admin.alter_replica_log_dirs(
            {("dirs", 0, node): log_dir, ("dirs", 1, node): "/var/lib/kafka/other"}
        )
    finally:
        admin.close()
    by_partition = {tpr.partition: error for tpr, error in answers.items()}
    assert by_partition == {0: NoError, 1: LogDirNotFoundError}


def test_describe_groups_v6_says_group_id_not_found(broker: BrokerProcess) -> None:
    with WireClient(broker.port) as client:
        for version, code, state in ((5, NONE, "Dead"), (6, GROUP_ID_NOT_FOUND, "Dead")):
            m = request_class(15, version)
            response = client.request(
                15,
                version,
                m.DescribeGroupsRequest(groups=("nobody",), include_authorized_operations=False),
            )
            (group,) = response.groups
            assert (group.error_code, group.group_state) == (code, state)
        assert group.error_message == "Group nobody not found."


def test_kafka_python_groups_offsets_and_transactions_use_find_coordinator_v6(
    broker_factory: BrokerFactory,
) -> None:
    broker = broker_factory(TXN_ENV, metrics=True)
    create_topic(broker.bootstrap, "kp-in", 1)
    tp = TopicPartition("kp-in", 0)
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap)
    for i in range(6):
        producer.send("kp-in", value=b"v%d" % i, partition=0)
    producer.flush()
    producer.close()

    consumer = KafkaConsumer(
        "kp-in",
        bootstrap_servers=broker.bootstrap,
        group_id="kp-group",
        auto_offset_reset="earliest",
        enable_auto_commit=False,
    )
    try:
        seen: list[bytes] = []
        deadline = time.monotonic() + 60
        while len(seen) < 6 and time.monotonic() < deadline:
            for records in consumer.poll(timeout_ms=500).values():
                seen.extend(r.value for r in records)
        assert seen == [b"v%d" % i for i in range(6)]
        consumer.commit()
        assert consumer.committed(tp) == 6

        txn = KafkaProducer(bootstrap_servers=broker.bootstrap, transactional_id="kp-parity")
        try:
            txn.init_transactions()
            txn.begin_transaction()
            txn.send("kp-in", value=b"in-txn", partition=0)
            txn.send_offsets_to_transaction({tp: OffsetAndMetadata(4, "", -1)}, "kp-txn-group")
            txn.commit_transaction()
        finally:
            txn.close()
    finally:
        consumer.close()

    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    try:
        offsets = admin.list_group_offsets({"kp-txn-group": None})
    finally:
        admin.close()
    assert _offset_of(offsets, tp) == 4
    samples = scrape(broker.metrics_port or 0)
    found_v6 = metric_sum(samples, "lakelog_requests_total", api="find_coordinator", version="6")
    assert found_v6 >= 2  # the group's and the transaction's coordinator lookups
    assert metric_sum(samples, "lakelog_transaction_commits_total") == 1


def _offset_of(answer: Any, tp: TopicPartition) -> int:
    """The committed offset of `tp` in kafka-python's list_group_offsets answer (a dict
    of groups, or of partitions, to OffsetAndMetadata)."""
    if isinstance(answer, dict) and tp in answer:
        return int(answer[tp].offset)
    (per_group,) = answer.values()
    return int(per_group[tp].offset)


# ---------------------------------------------------------------- raw frames


def _subscription(topics: list[str]) -> bytes:
    """ConsumerProtocolSubscription v0: version, topics, null user data."""
    out = struct.pack(">hi", 0, len(topics))
    for t in topics:
        out += struct.pack(">h", len(t)) + t.encode()
    return out + struct.pack(">i", -1)


def _assignment(topic: str, partitions: list[int]) -> bytes:
    """ConsumerProtocolAssignment v0: version, one topic's partitions, null user data."""
    out = struct.pack(">hih", 0, 1, len(topic)) + topic.encode()
    out += struct.pack(">i", len(partitions)) + b"".join(struct.pack(">i", p) for p in partitions)
    return out + struct.pack(">i", -1)


def _find(client: WireClient, key_type: int, key: str) -> tuple[int, int]:
    m = request_class(10, 6)
    (found,) = client.request(
        10, 6, m.FindCoordinatorRequest(key_type=m.i8(key_type), coordinator_keys=(key,))
    ).coordinators
    assert found.key == key
    return int(found.error_code), int(found.port)


def _join(client: WireClient, group: str, member_id: str) -> Any:
    m = request_class(11, 9)
    return client.request(
        11,
        9,
        m.JoinGroupRequest(
            group_id=group,
            session_timeout=datetime.timedelta(seconds=30),
            rebalance_timeout=datetime.timedelta(seconds=30),
            member_id=member_id,
            group_instance_id=None,
            protocol_type="consumer",
            protocols=(m.JoinGroupRequestProtocol(name="range", metadata=_subscription(["raw"])),),
            reason=None,
        ),
    )


def _offset_fetch_v9(client: WireClient, group: str, stable: bool) -> tuple[int, int]:
    m = request_class(9, 9)
    response = client.request(
        9,
        9,
        m.OffsetFetchRequest(
            groups=(
                m.OffsetFetchRequestGroup(
                    group_id=group,
                    topics=(
                        m.OffsetFetchRequestTopics(
                            name=m.TopicName("raw"), partition_indexes=(m.i32(0),)
                        ),
                    ),
                ),
            ),
            require_stable=stable,
        ),
    )
    (answer,) = response.groups
    (topic,) = answer.topics
    (partition,) = topic.partitions
    return int(partition.error_code), int(partition.committed_offset)


def test_groups_offsets_and_transactions_at_kafka_41_versions(
    broker_factory: BrokerFactory,
) -> None:
    """FindCoordinator v6, JoinGroup v9, SyncGroup v5, Heartbeat v4, OffsetCommit v9,
    OffsetFetch v9; InitProducerId v5, AddPartitionsToTxn v5, AddOffsetsToTxn v4,
    TxnOffsetCommit v4 and EndTxn v4 (v5 of the last two are transaction version 2,
    not offered: see docs/clients.md)."""
    broker = broker_factory(TXN_ENV)
    create_topic(broker.bootstrap, "raw", 1)
    with WireClient(broker.port) as client:
        assert _find(client, 0, "raw-group") == (NONE, broker.port)
        first = _join(client, "raw-group", "")
        assert first.error_code == MEMBER_ID_REQUIRED and first.member_id
        joined = _join(client, "raw-group", first.member_id)
        assert (joined.error_code, joined.leader) == (NONE, first.member_id)
        generation, member = int(joined.generation_id), str(joined.member_id)

        m = request_class(14, 5)
        synced = client.request(
            14,
            5,
            m.SyncGroupRequest(
                group_id="raw-group",
                generation_id=m.i32(generation),
                member_id=member,
                group_instance_id=None,
                protocol_type="consumer",
                protocol_name="range",
                assignments=(
                    m.SyncGroupRequestAssignment(
                        member_id=member, assignment=_assignment("raw", [0])
                    ),
                ),
            ),
        )
        assert (synced.error_code, synced.assignment) == (NONE, _assignment("raw", [0]))
        m = request_class(12, 4)
        beat = client.request(
            12,
            4,
            m.HeartbeatRequest(
                group_id="raw-group",
                generation_id=m.i32(generation),
                member_id=member,
                group_instance_id=None,
            ),
        )
        assert beat.error_code == NONE

        m = request_class(8, 9)
        committed = client.request(
            8,
            9,
            m.OffsetCommitRequest(
                group_id="raw-group",
                generation_id_or_member_epoch=m.i32(generation),
                member_id=member,
                group_instance_id=None,
                topics=(
                    m.OffsetCommitRequestTopic(
                        name=m.TopicName("raw"),
                        partitions=(
                            m.OffsetCommitRequestPartition(
                                partition_index=m.i32(0),
                                committed_offset=m.i64(3),
                                committed_leader_epoch=m.i32(-1),
                                committed_metadata="",
                            ),
                        ),
                    ),
                ),
            ),
        )
        assert [p.error_code for t in committed.topics for p in t.partitions] == [NONE]
        assert _offset_fetch_v9(client, "raw-group", stable=False) == (NONE, 3)

        assert _find(client, 1, "raw-txn") == (NONE, broker.port)
        error, pid, epoch = init_producer_id(client, "raw-txn", version=5)
        assert (error, epoch) == (NONE, 0)
        added = add_partitions_batched(client, [("raw-txn", pid, epoch, False, {"raw": [0]})], 5)
        assert added == {"raw-txn": {("raw", 0): NONE}}
        assert produce(client, "raw-txn", {("raw", 0): txn_batch([b"t"], pid, epoch, 0)}) == {
            ("raw", 0): (NONE, 0)
        }
        assert add_offsets(client, "raw-txn", pid, epoch, "raw-group", version=4) == NONE
        assert txn_offset_commit(
            client,
            "raw-txn",
            pid,
            epoch,
            "raw-group",
            {("raw", 0): 1},
            generation=generation,
            member_id=member,
            version=4,
        ) == {("raw", 0): NONE}
        assert end_txn(client, "raw-txn", pid, epoch, True, version=4) == NONE
        assert _offset_fetch_v9(client, "raw-group", stable=True) == (NONE, 1)
