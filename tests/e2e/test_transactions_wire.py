"""Transaction APIs over the raw wire: the error codes each request version carries, the
commit barrier's per-partition refusals in Produce, the batched AddPartitionsToTxn broker
form, TxnOffsetCommit's group checks, FindCoordinator for transactions and ApiVersions."""

from __future__ import annotations

import struct

from e2e_fixtures import BrokerFactory
from e2e_harness import api_versions_roundtrip, create_topic, wait_until
from e2e_wire import WireClient, request_class
from txn_wire import (
    ILLEGAL_GENERATION,
    INVALID_PRODUCER_EPOCH,
    INVALID_PRODUCER_ID_MAPPING,
    INVALID_TRANSACTION_TIMEOUT,
    INVALID_TXN_STATE,
    NONE,
    OPERATION_NOT_ATTEMPTED,
    PRODUCER_FENCED,
    TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
    UNKNOWN_MEMBER_ID,
    UNKNOWN_TOPIC_OR_PARTITION,
    add_offsets,
    add_partitions,
    add_partitions_batched,
    end_txn,
    init_producer_id,
    produce,
    txn_batch,
    txn_offset_commit,
)

TXN_ENV = {"TRANSACTION_ABORT_TIMED_OUT_TRANSACTION_CLEANUP_INTERVAL_MS": 1000}
INVALID_REQUEST = 42


def test_commit_barrier_answers_per_partition(broker_factory: BrokerFactory) -> None:
    broker = broker_factory(TXN_ENV)
    create_topic(broker.bootstrap, "barrier", 2)
    with WireClient(broker.port) as client:
        error, pid, epoch = init_producer_id(client, "barrier-txn")
        assert (error, epoch) == (NONE, 0)
        assert add_partitions(client, "barrier-txn", pid, epoch, {"barrier": [0]}) == {
            ("barrier", 0): NONE
        }
        # Partition 1 was never added: refused there, accepted in partition 0.
        answers = produce(
            client,
            "barrier-txn",
            {
                ("barrier", 0): txn_batch([b"in"], pid, epoch, 0),
                ("barrier", 1): txn_batch([b"out"], pid, epoch, 0),
            },
        )
        assert answers == {("barrier", 0): (NONE, 0), ("barrier", 1): (INVALID_TXN_STATE, -1)}

        # A new instance fences this one; its next batch is refused with the old epoch.
        error, pid2, epoch2 = init_producer_id(client, "barrier-txn")
        assert (error, pid2, epoch2) == (NONE, pid, 1)
        late = produce(client, "barrier-txn", {("barrier", 0): txn_batch([b"x"], pid, 0, 1)})
        assert late == {("barrier", 0): (INVALID_PRODUCER_EPOCH, -1)}

        # Transactional batches without the request's transactional id: refused whole.
        anonymous = produce(client, None, {("barrier", 0): txn_batch([b"y"], pid, 1, 0)})
        assert anonymous == {("barrier", 0): (TRANSACTIONAL_ID_AUTHORIZATION_FAILED, -1)}


def test_fencing_error_depends_on_request_version(broker_factory: BrokerFactory) -> None:
    broker = broker_factory(TXN_ENV)
    create_topic(broker.bootstrap, "versions", 1)
    with WireClient(broker.port) as client:
        _, pid, _ = init_producer_id(client, "versions-txn")
        _, _, epoch = init_producer_id(client, "versions-txn")  # epoch 1 fences epoch 0
        assert epoch == 1
        # KIP-588: PRODUCER_FENCED from EndTxn/AddPartitions/AddOffsets v2, else the old code.
        assert end_txn(client, "versions-txn", pid, 0, True, version=1) == INVALID_PRODUCER_EPOCH
        assert end_txn(client, "versions-txn", pid, 0, True, version=3) == PRODUCER_FENCED
        old = add_partitions(client, "versions-txn", pid, 0, {"versions": [0]}, version=0)
        assert old == {("versions", 0): INVALID_PRODUCER_EPOCH}
        new = add_partitions(client, "versions-txn", pid, 0, {"versions": [0]}, version=3)
        assert new == {("versions", 0): PRODUCER_FENCED}
        assert add_offsets(client, "versions-txn", pid, 0, "g", version=0) == (
            INVALID_PRODUCER_EPOCH
        )
        assert add_offsets(client, "versions-txn", pid, 0, "g", version=3) == PRODUCER_FENCED
        assert end_txn(client, "versions-txn", pid + 1000, 1, True) == INVALID_PRODUCER_ID_MAPPING
        # Nothing ongoing: an end is a state error (a retried end would be NONE).
        assert end_txn(client, "versions-txn", pid, 1, False) == INVALID_TXN_STATE


def test_add_partitions_unknown_topic_and_batched_form(broker_factory: BrokerFactory) -> None:
    broker = broker_factory(TXN_ENV)
    create_topic(broker.bootstrap, "batched", 2)
    with WireClient(broker.port) as client:
        _, pid_a, epoch_a = init_producer_id(client, "batched-a")
        _, pid_b, epoch_b = init_producer_id(client, "batched-b")
        mixed = add_partitions(
            client, "batched-a", pid_a, epoch_a, {"batched": [0, 5], "no-such-topic": [0]}
        )
        assert mixed == {
            ("batched", 0): OPERATION_NOT_ATTEMPTED,
            ("batched", 5): UNKNOWN_TOPIC_OR_PARTITION,
            ("no-such-topic", 0): UNKNOWN_TOPIC_OR_PARTITION,
        }
        assert add_partitions(client, "batched-a", pid_a, epoch_a, {"batched": [0]}) == {
            ("batched", 0): NONE
        }
        for version in (4, 5):
            answers = add_partitions_batched(
                client,
                [
                    ("batched-a", pid_a, epoch_a, True, {"batched": [0, 1]}),
                    ("batched-b", pid_b, epoch_b, False, {"batched": [1]}),
                ],
                version=version,
            )
            assert answers == {
                # verify_only: partition 0 is in a's transaction, 1 is not (nothing added).
                "batched-a": {("batched", 0): NONE, ("batched", 1): INVALID_TXN_STATE},
                "batched-b": {("batched", 1): NONE},
            }
        assert end_txn(client, "batched-a", pid_a, epoch_a, False) == NONE
        assert end_txn(client, "batched-b", pid_b, epoch_b, True) == NONE


def test_init_producer_id_checks_transaction_timeout(broker_factory: BrokerFactory) -> None:
    broker = broker_factory({**TXN_ENV, "TRANSACTION_MAX_TIMEOUT_MS": 5000})
    with WireClient(broker.port) as client:
        assert init_producer_id(client, "t", timeout_ms=5001)[0] == INVALID_TRANSACTION_TIMEOUT
        assert init_producer_id(client, "t", timeout_ms=0)[0] == INVALID_TRANSACTION_TIMEOUT
        assert init_producer_id(client, "", timeout_ms=1000)[0] == INVALID_REQUEST
        for version in range(0, 6):
            error, pid, _ = init_producer_id(client, "t", timeout_ms=5000, version=version)
            assert error == NONE and pid >= 0


def test_txn_offset_commit_checks_the_group_generation(broker_factory: BrokerFactory) -> None:
    from kafka import KafkaConsumer

    broker = broker_factory({**TXN_ENV, "GROUP_INITIAL_REBALANCE_DELAY_MS": 0})
    create_topic(broker.bootstrap, "gen", 1)
    consumer = KafkaConsumer(
        "gen", bootstrap_servers=broker.bootstrap, group_id="gen-group", enable_auto_commit=False
    )
    try:
        wait_until(
            lambda: consumer.poll(200) is not None and consumer.assignment(), 30, "assignment"
        )
        metadata = consumer.group_metadata()  # member id and generation of the join
        with WireClient(broker.port) as client:
            _, pid, epoch = init_producer_id(client, "gen-txn")
            assert add_offsets(client, "gen-txn", pid, epoch, "gen-group") == NONE
            offsets = {("gen", 0): 1}

            def commit(generation: int = -1, member_id: str = "", version: int = 3) -> int:
                answer = txn_offset_commit(
                    client,
                    "gen-txn",
                    pid,
                    epoch,
                    "gen-group",
                    offsets,
                    generation=generation,
                    member_id=member_id,
                    version=version,
                )
                return answer[("gen", 0)]

            assert commit(generation=metadata.generation_id + 1, member_id=metadata.member_id) == (
                ILLEGAL_GENERATION
            )
            assert commit(generation=metadata.generation_id, member_id="stranger") == (
                UNKNOWN_MEMBER_ID
            )
            assert commit(generation=metadata.generation_id, member_id=metadata.member_id) == NONE
            assert commit(version=0) == NONE  # before v3 there is nothing to check
            unknown = txn_offset_commit(
                client, "gen-txn", pid, epoch, "gen-group", {("nope", 0): 1}
            )
            assert unknown == {("nope", 0): UNKNOWN_TOPIC_OR_PARTITION}
            assert end_txn(client, "gen-txn", pid, epoch, True) == NONE
    finally:
        consumer.close()


def client_coordinators(port: int, version: int, request: object) -> tuple:
    """One FindCoordinator round trip of `version` on a new connection: its answers."""
    with WireClient(port) as client:
        return client.request(10, version, request).coordinators


def test_find_coordinator_and_api_versions(broker_factory: BrokerFactory) -> None:
    broker = broker_factory(TXN_ENV)
    with WireClient(broker.port) as client:
        for version in (1, 4):
            m = request_class(10, version)
            fields = (
                {"coordinator_keys": ("some-txn",), "key_type": m.i8(1)}
                if version >= 4
                else {"key": "some-txn", "key_type": m.i8(1)}
            )
            response = client.request(10, version, m.FindCoordinatorRequest(**fields))
            found = response.coordinators[0] if version >= 4 else response
            assert (found.error_code, found.port) == (NONE, broker.port)
            bad = {**fields, "key_type": m.i8(7)}
            response = client.request(10, version, m.FindCoordinatorRequest(**bad))
            found = response.coordinators[0] if version >= 4 else response
            assert found.error_code == INVALID_REQUEST
    # v5 and v6 (Kafka 4.x): v6 adds share-state keys `group:topicId:partition` (KIP-932),
    # which go to the group's coordinator; a malformed one is refused on its own.
    for version in (5, 6):
        m = request_class(10, version)
        share = m.FindCoordinatorRequest(
            key_type=m.i8(2), coordinator_keys=("g:AAAAAAAAAAAAAAAAAAAAAQ:0", "no-colons", "g::x")
        )
        found = client_coordinators(broker.port, version, share)
        if version == 5:
            assert {c.error_code for c in found} == {INVALID_REQUEST}
        else:
            assert [(c.error_code, c.port) for c in found] == [
                (NONE, broker.port),
                (INVALID_REQUEST, -1),
                (INVALID_REQUEST, -1),
            ]
        groups = m.FindCoordinatorRequest(key_type=m.i8(0), coordinator_keys=("g1", "g2"))
        found = client_coordinators(broker.port, version, groups)
        assert [(c.error_code, c.port) for c in found] == [(NONE, broker.port)] * 2
    body = api_versions_roundtrip(broker.port)
    (error, count) = struct.unpack_from(">hi", body)
    assert error == NONE
    advertised = {
        key: (low, high)
        for key, low, high in (struct.unpack_from(">hhh", body, 6 + 6 * i) for i in range(count))
    }
    assert advertised[10] == (0, 6)  # FindCoordinator, as Kafka 4.0
    assert advertised[22] == (0, 5)  # InitProducerId
    assert advertised[24] == (0, 5)  # AddPartitionsToTxn
    assert advertised[25] == (0, 4)  # AddOffsetsToTxn
    assert advertised[26] == (0, 4)  # EndTxn: v5 means KIP-890 epoch bumps
    assert advertised[28] == (0, 4)  # TxnOffsetCommit
    assert advertised[61] == (0, 0)  # DescribeProducers
    assert advertised[65] == (0, 0)  # DescribeTransactions
    assert advertised[66] == (0, 2)  # ListTransactions
