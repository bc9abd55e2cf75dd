"""Transaction requests by hand (kio bodies over `e2e_wire.WireClient`), for tests that
need exact versions, stale epochs or requests no client library sends."""

from __future__ import annotations

import datetime
from collections.abc import Mapping, Sequence
from typing import Any

from e2e_wire import WireClient, produce_errors, request_class

from tests.support.batches import build_batch

INIT_PRODUCER_ID, ADD_PARTITIONS, ADD_OFFSETS, END_TXN, TXN_OFFSET_COMMIT = 22, 24, 25, 26, 28
TRANSACTIONAL = 0x10

NONE = 0
UNKNOWN_TOPIC_OR_PARTITION = 3
NOT_COORDINATOR = 16
ILLEGAL_GENERATION = 22
UNKNOWN_MEMBER_ID = 25
INVALID_PRODUCER_EPOCH = 47
INVALID_TXN_STATE = 48
INVALID_PRODUCER_ID_MAPPING = 49
INVALID_TRANSACTION_TIMEOUT = 50
TRANSACTIONAL_ID_AUTHORIZATION_FAILED = 53
OPERATION_NOT_ATTEMPTED = 55
UNSTABLE_OFFSET_COMMIT = 88
PRODUCER_FENCED = 90


def init_producer_id(
    client: WireClient,
    transactional_id: str | None,
    timeout_ms: int = 60_000,
    version: int = 4,
) -> tuple[int, int, int]:
    """(error, producer id, epoch)."""
    m = request_class(INIT_PRODUCER_ID, version)
    fields: dict[str, Any] = {
        "transactional_id": transactional_id,
        "transaction_timeout": datetime.timedelta(milliseconds=timeout_ms),
    }
    if version >= 3:
        fields |= {"producer_id": m.ProducerId(-1), "producer_epoch": m.i16(-1)}
    response = client.request(INIT_PRODUCER_ID, version, m.InitProducerIdRequest(**fields))
    return int(response.error_code), int(response.producer_id), int(response.producer_epoch)


def _txn_topics(m: Any, topics: Mapping[str, Sequence[int]]) -> tuple[Any, ...]:
    return tuple(
        m.AddPartitionsToTxnTopic(name=m.TopicName(t), partitions=tuple(m.i32(p) for p in ps))
        for t, ps in topics.items()
    )


def add_partitions(
    client: WireClient,
    transactional_id: str,
    pid: int,
    epoch: int,
    topics: Mapping[str, Sequence[int]],
    version: int = 3,
) -> dict[tuple[str, int], int]:
    """AddPartitionsToTxn v0-3: {(topic, partition): error}."""
    m = request_class(ADD_PARTITIONS, version)
    request = m.AddPartitionsToTxnRequest(
        v3_and_below_transactional_id=transactional_id,
        v3_and_below_producer_id=m.ProducerId(pid),
        v3_and_below_producer_epoch=m.i16(epoch),
        v3_and_below_topics=_txn_topics(m, topics),
    )
    response = client.request(ADD_PARTITIONS, version, request)
    return {
        (str(t.name), int(p.partition_index)): int(p.partition_error_code)
        for t in response.results_by_topic_v3_and_below
        for p in t.results_by_partition
    }


def add_partitions_batched(
    client: WireClient,
    transactions: Sequence[tuple[str, int, int, bool, Mapping[str, Sequence[int]]]],
    version: int = 4,
) -> dict[str, dict[tuple[str, int], int]]:
    """AddPartitionsToTxn v4+ (the broker form): transactions are (id, producer id, epoch,
    verify_only, topics); answers {id: {(topic, partition): error}}."""
    m = request_class(ADD_PARTITIONS, version)
    request = m.AddPartitionsToTxnRequest(
        transactions=tuple(
            m.AddPartitionsToTxnTransaction(
                transactional_id=tid,
                producer_id=m.ProducerId(pid),
                producer_epoch=m.i16(epoch),
                verify_only=verify,
                topics=_txn_topics(m, topics),
            )
            for tid, pid, epoch, verify, topics in transactions
        )
    )
    response = client.request(ADD_PARTITIONS, version, request)
    assert response.error_code == NONE
    return {
        str(r.transactional_id): {
            (str(t.name), int(p.partition_index)): int(p.partition_error_code)
            for t in r.topic_results
            for p in t.results_by_partition
        }
        for r in response.results_by_transaction
    }


def add_offsets(
    client: WireClient, transactional_id: str, pid: int, epoch: int, group: str, version: int = 3
) -> int:
    m = request_class(ADD_OFFSETS, version)
    response = client.request(
        ADD_OFFSETS,
        version,
        m.AddOffsetsToTxnRequest(
            transactional_id=transactional_id,
            producer_id=m.ProducerId(pid),
            producer_epoch=m.i16(epoch),
            group_id=group,
        ),
    )
    return int(response.error_code)


def end_txn(
    client: WireClient,
    transactional_id: str,
    pid: int,
    epoch: int,
    commit: bool,
    version: int = 3,
) -> int:
    m = request_class(END_TXN, version)
    response = client.request(
        END_TXN,
        version,
        m.EndTxnRequest(
            transactional_id=transactional_id,
            producer_id=m.ProducerId(pid),
            producer_epoch=m.i16(epoch),
            committed=commit,
        ),
    )
    return int(response.error_code)


def txn_offset_commit(
    client: WireClient,
    transactional_id: str,
    pid: int,
    epoch: int,
    group: str,
    offsets: Mapping[tuple[str, int], int],
    *,
    generation: int = -1,
    member_id: str = "",
    version: int = 3,
) -> dict[tuple[str, int], int]:
    m = request_class(TXN_OFFSET_COMMIT, version)
    by_topic: dict[str, list[tuple[int, int]]] = {}
    for (topic, partition), offset in offsets.items():
        by_topic.setdefault(topic, []).append((partition, offset))
    fields: dict[str, Any] = {
        "transactional_id": transactional_id,
        "group_id": group,
        "producer_id": m.ProducerId(pid),
        "producer_epoch": m.i16(epoch),
        "topics": tuple(
            m.TxnOffsetCommitRequestTopic(
                name=m.TopicName(t),
                partitions=tuple(
                    m.TxnOffsetCommitRequestPartition(
                        partition_index=m.i32(p), committed_offset=m.i64(o), committed_metadata=""
                    )
                    for p, o in parts
                ),
            )
            for t, parts in by_topic.items()
        ),
    }
    if version >= 3:
        fields |= {"generation_id": m.i32(generation), "member_id": member_id}
    response = client.request(TXN_OFFSET_COMMIT, version, m.TxnOffsetCommitRequest(**fields))
    return {
        (str(t.name), int(p.partition_index)): int(p.error_code)
        for t in response.topics
        for p in t.partitions
    }


def txn_batch(values: Sequence[bytes], pid: int, epoch: int, sequence: int) -> bytes:
    return build_batch(
        [(None, v) for v in values],
        producer_id=pid,
        producer_epoch=epoch,
        base_sequence=sequence,
        attributes_extra=TRANSACTIONAL,
    )


def produce(
    client: WireClient,
    transactional_id: str | None,
    parts: Mapping[tuple[str, int], bytes],
) -> dict[tuple[str, int], tuple[int, int]]:
    """Produce v7 with a transactional id: {(topic, partition): (error, base offset)}."""
    m = request_class(0, 7)
    by_topic: dict[str, dict[int, bytes]] = {}
    for (topic, partition), batch in parts.items():
        by_topic.setdefault(topic, {})[partition] = batch
    request = m.ProduceRequest(
        transactional_id=transactional_id,
        acks=m.i16(-1),
        timeout=datetime.timedelta(seconds=10),
        topic_data=tuple(
            m.TopicProduceData(
                name=m.TopicName(topic),
                partition_data=tuple(
                    m.PartitionProduceData(index=m.i32(p), records=b) for p, b in ps.items()
                ),
            )
            for topic, ps in by_topic.items()
        ),
    )
    return produce_errors(client.request(0, 7, request))


def offset_fetch(
    client: WireClient, group: str, topic: str, partitions: Sequence[int], require_stable: bool
) -> dict[int, tuple[int, int]]:
    """OffsetFetch v7: {partition: (error, offset)}."""
    m = request_class(9, 7)
    response = client.request(
        9,
        7,
        m.OffsetFetchRequest(
            group_id=group,
            topics=(
                m.OffsetFetchRequestTopic(
                    name=m.TopicName(topic), partition_indexes=tuple(m.i32(p) for p in partitions)
                ),
            ),
            require_stable=require_stable,
        ),
    )
    assert response.error_code == NONE
    return {
        int(p.partition_index): (int(p.error_code), int(p.committed_offset))
        for t in response.topics
        for p in t.partitions
    }
