"""The late-data race of KIP-1164's review (reference thread 000, question 3): a broker is
paused after uploading a transactional batch and before committing it; meanwhile the
transaction times out and is aborted; the broker resumes and tries to commit. The commit
barrier refuses the batch, and no consumer, read_committed or not, ever sees it."""

from __future__ import annotations

import datetime
import threading
from pathlib import Path
from typing import Any

from e2e_harness import BrokerProcess, create_topic, free_port, wait_topic_known, wait_until
from e2e_wire import WireClient, list_offsets_v1, produce_errors, request_class

from lakelog.log.protocol.records import read_header, split_batches
from tests.support.batches import build_batch

INVALID_PRODUCER_EPOCH = 47
TRANSACTIONAL = 0x10
CONTROL = 0x20
CLUSTER = {
    # Long broker sessions: the transaction barrier, not broker fencing, must refuse it.
    "BROKER_SESSION_TIMEOUT_MS": 60_000,
    "BROKER_HEARTBEAT_INTERVAL_MS": 500,
    "PRODUCE_COMMIT_INTERVAL_MS": 50,
    # The object path: the test waits for the slow broker's upload before its late commit.
    "PRODUCE_INLINE": False,
    "FETCH_POLL_INTERVAL_MS": 20,
    "TRANSACTION_ABORT_TIMED_OUT_TRANSACTION_CLEANUP_INTERVAL_MS": 200,
}
TXN_ID = "late-txn"


def _init_producer(client: WireClient) -> tuple[int, int]:
    m = request_class(22, 1)
    response = client.request(
        22,
        1,
        m.InitProducerIdRequest(
            transactional_id=TXN_ID,
            # Long enough for the Produce to reach the slow broker's WAL before the
            # timeout on a busy machine (1 s was not, once in four runs): the abort must
            # come while that broker is stopped with its commit pending, not before.
            transaction_timeout=datetime.timedelta(milliseconds=3000),
        ),
    )
    assert int(response.error_code) == 0, response
    return int(response.producer_id), int(response.producer_epoch)


def _add_partition(client: WireClient, topic: str, pid: int, epoch: int) -> None:
    m = request_class(24, 1)
    response = client.request(
        24,
        1,
        m.AddPartitionsToTxnRequest(
            v3_and_below_transactional_id=TXN_ID,
            v3_and_below_producer_id=m.ProducerId(pid),
            v3_and_below_producer_epoch=m.i16(epoch),
            v3_and_below_topics=(
                m.AddPartitionsToTxnTopic(name=m.TopicName(topic), partitions=(m.i32(0),)),
            ),
        ),
    )
    codes = [
        int(p.partition_error_code)
        for t in response.results_by_topic_v3_and_below
        for p in t.results_by_partition
    ]
    assert codes == [0], response


def _produce_txn(topic: str, batch: bytes) -> Any:
    m = request_class(0, 7)
    return m.ProduceRequest(
        transactional_id=TXN_ID,
        acks=m.i16(-1),
        timeout=datetime.timedelta(milliseconds=30_000),
        topic_data=(
            m.TopicProduceData(
                name=m.TopicName(topic),
                partition_data=(m.PartitionProduceData(index=m.i32(0), records=batch),),
            ),
        ),
    )


def _fetch(port: int, topic: str, isolation: int) -> tuple[list[tuple[int, int]], int]:
    """([(base offset, attributes)] of partition 0, last stable offset)."""
    m = request_class(1, 4)
    request = m.FetchRequest(
        replica_id=m.BrokerId(-1),
        max_wait=datetime.timedelta(milliseconds=100),
        min_bytes=m.i32(1),
        max_bytes=m.i32(1 << 20),
        isolation_level=m.i8(isolation),
        topics=(
            m.FetchTopic(
                topic=m.TopicName(topic),
                partitions=(
                    m.FetchPartition(
                        partition=m.i32(0),
                        fetch_offset=m.i64(0),
                        partition_max_bytes=m.i32(1 << 20),
                    ),
                ),
            ),
        ),
    )
    with WireClient(port) as client:
        response = client.request(1, 4, request)
    partition = response.responses[0].partitions[0]
    batches = [
        (read_header(b).base_offset, read_header(b).attributes)
        for b in split_batches(partition.records or b"")
    ]
    return batches, int(partition.last_stable_offset)


def _latest(port: int, topic: str) -> int:
    with WireClient(port) as client:
        response = client.request(2, 1, list_offsets_v1(topic, 0, -1))
    return int(response.topics[0].partitions[0].offset)


def test_late_transactional_batch_after_timeout_abort_is_refused(tmp_path: Path) -> None:
    data = tmp_path / "data"
    healthy = BrokerProcess(
        data, env={**CLUSTER, "BROKER_ID": 0}, port=free_port(), name="healthy"
    ).start()
    slow = BrokerProcess(
        data,
        env={**CLUSTER, "BROKER_ID": 1, "FAULT_COMMIT_DELAY_MS": 2500},
        port=free_port(),
        name="slow",
    ).start()
    try:
        topic = "late"
        create_topic(healthy.bootstrap, topic, 1)
        # Known to the slow broker before the transaction's clock starts (a raw Produce
        # answered UNKNOWN_TOPIC_OR_PARTITION failed this test once in three runs).
        wait_topic_known(slow.port, topic)
        with WireClient(healthy.port) as client:
            pid, epoch = _init_producer(client)
            _add_partition(client, topic, pid, epoch)
        batch = build_batch(
            [(b"k", b"late-value")],
            producer_id=pid,
            producer_epoch=epoch,
            base_sequence=0,
            attributes_extra=TRANSACTIONAL,
        )
        answer: dict[str, object] = {}

        def produce_to_slow() -> None:
            with WireClient(slow.port, timeout=60) as client:
                answer["slow"] = produce_errors(client.request(0, 7, _produce_txn(topic, batch)))

        before = set(slow.wal_objects())
        sender = threading.Thread(target=produce_to_slow)
        sender.start()
        wait_until(lambda: set(slow.wal_objects()) - before, 30, "the slow broker's upload")
        slow.pause()
        try:
            # The transaction times out; the healthy broker aborts it (one abort marker).
            wait_until(lambda: _latest(healthy.port, topic) == 1, 15, "the timeout abort")
        finally:
            slow.resume()
        sender.join(60)
        assert answer["slow"] == {(topic, 0): (INVALID_PRODUCER_EPOCH, -1)}

        # Nothing but the abort marker, whatever the isolation level, on either broker.
        for port in (healthy.port, slow.port):
            for isolation in (0, 1):
                batches, lso = _fetch(port, topic, isolation)
                assert lso == 1
                assert [offset for offset, _ in batches] == [0]
                assert batches[0][1] & (CONTROL | TRANSACTIONAL) == CONTROL | TRANSACTIONAL
        assert _latest(healthy.port, topic) == 1
    finally:
        slow.close()
        healthy.close()
