"""The idempotent producer over the wire: duplicates get their original offset, sequence
gaps and stale epochs are refused, and InitProducerId hands out ids and epoch bumps.
Also OffsetForLeaderEpoch, which clients use to validate positions."""

from __future__ import annotations

import datetime

from e2e_fixtures import BrokerFactory
from e2e_harness import create_topic
from e2e_wire import WireClient, produce_errors, produce_v7, request_class

from tests.support.batches import build_batch

OUT_OF_ORDER_SEQUENCE_NUMBER = 45
INVALID_PRODUCER_EPOCH = 47


def _init_producer_id(
    client: WireClient, producer_id: int = -1, epoch: int = -1
) -> tuple[int, int]:
    m = request_class(22, 4)
    response = client.request(
        22,
        4,
        m.InitProducerIdRequest(
            transactional_id=None,
            transaction_timeout=datetime.timedelta(seconds=60),
            producer_id=m.ProducerId(producer_id),
            producer_epoch=m.i16(epoch),
        ),
    )
    assert response.error_code == 0
    return int(response.producer_id), int(response.producer_epoch)


def _produce(
    client: WireClient, topic: str, pid: int, epoch: int, seq: int, count: int = 2
) -> tuple[int, int]:
    batch = build_batch(
        [(b"k", b"v%d" % i) for i in range(count)],
        producer_id=pid,
        producer_epoch=epoch,
        base_sequence=seq,
    )
    response = client.request(0, 7, produce_v7({topic: {0: batch}}))
    return produce_errors(response)[(topic, 0)]


def test_idempotent_producer_rules(broker_factory: BrokerFactory) -> None:
    broker = broker_factory()
    create_topic(broker.bootstrap, "idem", 1)
    with WireClient(broker.port) as client:
        pid, epoch = _init_producer_id(client)
        other_pid, _ = _init_producer_id(client)
        assert other_pid != pid and epoch == 0
        assert _produce(client, "idem", pid, 0, 0) == (0, 0)
        assert _produce(client, "idem", pid, 0, 2) == (0, 2)
        assert _produce(client, "idem", pid, 0, 0) == (0, 0)  # retry of the first batch
        assert _produce(client, "idem", pid, 0, 2) == (0, 2)  # retry of the second
        assert _produce(client, "idem", pid, 0, 9)[0] == OUT_OF_ORDER_SEQUENCE_NUMBER
        assert _produce(client, "idem", pid, 0, 4) == (0, 4)  # the gap left no hole

        bumped_pid, bumped = _init_producer_id(client, pid, 0)  # KIP-360 epoch bump
        assert (bumped_pid, bumped) == (pid, 1)
        assert _produce(client, "idem", pid, 1, 0) == (0, 6)
        assert _produce(client, "idem", pid, 0, 6)[0] == INVALID_PRODUCER_EPOCH


def test_offset_for_leader_epoch_answers_log_end(broker_factory: BrokerFactory) -> None:
    broker = broker_factory()
    create_topic(broker.bootstrap, "ofle", 1)
    with WireClient(broker.port) as client:
        batch = build_batch([(b"k", b"v")] * 3)
        assert produce_errors(client.request(0, 7, produce_v7({"ofle": {0: batch}}))) == {
            ("ofle", 0): (0, 0)
        }
        m = request_class(23, 3)
        response = client.request(
            23,
            3,
            m.OffsetForLeaderEpochRequest(
                replica_id=m.BrokerId(-1),
                topics=(
                    m.OffsetForLeaderTopic(
                        topic=m.TopicName("ofle"),
                        partitions=(
                            m.OffsetForLeaderPartition(
                                partition=m.i32(0),
                                current_leader_epoch=m.i32(0),
                                leader_epoch=m.i32(0),
                            ),
                            m.OffsetForLeaderPartition(
                                partition=m.i32(5),
                                current_leader_epoch=m.i32(0),
                                leader_epoch=m.i32(0),
                            ),
                        ),
                    ),
                ),
            ),
        )
        ok, missing = response.topics[0].partitions
        assert (ok.error_code, ok.leader_epoch, ok.end_offset) == (0, 0, 3)
        assert missing.error_code == 3  # UNKNOWN_TOPIC_OR_PARTITION
