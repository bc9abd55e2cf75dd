"""A PostgreSQL outage is answered, never a dropped connection (issue 11, scope 3).

The broker runs on a PostgreSQL server of this test's own, which it stops and starts
(`pg_ctl stop -m fast`: open connections are terminated, new ones refused). During the
outage every API on one raw connection gets Kafka's retriable error for it (or a normal
answer where the broker can give one from what it has cached); after the restart the same
connection serves normally again, and a confluent-kafka producer/consumer pair rides
through a ~10 s stop without losing a record.
"""

from __future__ import annotations

import datetime
import struct
import threading
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from e2e_backends import SCALE_OUT
from e2e_fixtures import BrokerFactory
from e2e_harness import BrokerProcess, create_topic, wait_until
from e2e_wire import (
    WireClient,
    api_versions_v0,
    decode_response,
    fetch_v4,
    list_offsets_v1,
    metadata_v1,
    produce_errors,
    produce_v7,
    record_batch,
    request_class,
)

from lakelog.util.errors import ErrorCode
from tests.fuzz.corpus_io import load_corpus
from tests.fuzz.mutate import shape_of
from tests.support.postgres_server import PostgresUnavailable, RestartablePostgres
from tests.support.responses import error_codes

pytestmark = pytest.mark.skipif(
    SCALE_OUT, reason="runs its own PostgreSQL server; once, on the embedded pass, is enough"
)


class OwnPostgres(RestartablePostgres):
    """The test's own server, started at once (skipped where none can start)."""

    def __init__(self) -> None:
        super().__init__(prefix="lakelog-outage-pg.")
        try:
            self.start()
        except PostgresUnavailable as exc:
            pytest.skip(str(exc))


@pytest.fixture
def postgres() -> Iterator[OwnPostgres]:
    server = OwnPostgres()
    try:
        yield server
    finally:
        server.close()


def _broker(factory: BrokerFactory, pg: OwnPostgres, **env: object) -> BrokerProcess:
    return factory({"COORDINATOR_URL": pg.url, "AUTO_CREATE_TOPICS_ENABLE": True, **env})


# -- raw requests the broker must answer during the outage


def _offset_commit(group: str, topic: str, offset: int) -> tuple[int, int, Any]:
    m = request_class(8, 2)
    return (
        8,
        2,
        m.OffsetCommitRequest(
            group_id=group,
            generation_id_or_member_epoch=-1,
            member_id="",
            retention_time=datetime.timedelta(milliseconds=-1),
            topics=(
                m.OffsetCommitRequestTopic(
                    name=topic,
                    partitions=(
                        m.OffsetCommitRequestPartition(
                            partition_index=0, committed_offset=offset, committed_metadata=None
                        ),
                    ),
                ),
            ),
        ),
    )


def _offset_fetch(group: str, topic: str) -> tuple[int, int, Any]:
    m = request_class(9, 1)
    return (
        9,
        1,
        m.OffsetFetchRequest(
            group_id=group, topics=(m.OffsetFetchRequestTopic(name=topic, partition_indexes=(0,)),)
        ),
    )


def _find_coordinator(group: str) -> tuple[int, int, Any]:
    m = request_class(10, 1)
    return 10, 1, m.FindCoordinatorRequest(key=group, key_type=0)


def _join_group(group: str) -> tuple[int, int, Any]:
    m = request_class(11, 1)
    return (
        11,
        1,
        m.JoinGroupRequest(
            group_id=group,
            session_timeout=datetime.timedelta(seconds=10),
            rebalance_timeout=datetime.timedelta(seconds=10),
            member_id="",
            protocol_type="consumer",
            protocols=(m.JoinGroupRequestProtocol(name="range", metadata=b""),),
        ),
    )


def _init_producer_id() -> tuple[int, int, Any]:
    m = request_class(22, 0)
    return (
        22,
        0,
        m.InitProducerIdRequest(
            transactional_id=None, transaction_timeout=datetime.timedelta(seconds=60)
        ),
    )


def _create_topics(name: str) -> tuple[int, int, Any]:
    m = request_class(19, 2)
    return (
        19,
        2,
        m.CreateTopicsRequest(
            topics=(
                m.CreatableTopic(
                    name=name, num_partitions=1, replication_factor=1, assignments=(), configs=()
                ),
            ),
            timeout=datetime.timedelta(seconds=10),
            validate_only=False,
        ),
    )


def test_outage_is_answered_on_the_same_connection(
    broker_factory: BrokerFactory, postgres: OwnPostgres
) -> None:
    # Produce during the outage answers after the WAL writer's commit retries: keep them
    # short here (the default 25 s stalls produce through short outages instead).
    # Requests wait for a database connection 1 s, not 5: a dozen are asked in the outage.
    broker = _broker(
        broker_factory, postgres, PRODUCE_COMMIT_RETRY_MS=3000, COORDINATOR_POOL_TIMEOUT_MS=1000
    )
    topic, group = f"outage-{uuid.uuid4().hex[:8]}", f"g-{uuid.uuid4().hex[:8]}"
    create_topic(broker.bootstrap, topic, partitions=1)
    now = int(time.time() * 1000)
    with WireClient(broker.port, timeout=90) as wire:
        before = wire.request(0, 7, produce_v7({topic: {0: record_batch([b"a", b"b"], now)}}))
        assert produce_errors(before) == {(topic, 0): (0, 0)}
        assert wire.request(*_offset_commit(group, topic, 1)) is not None

        postgres.stop_server()
        stopped = time.monotonic()
        storage, coordinator = ErrorCode.kafka_storage_error, ErrorCode.coordinator_not_available

        # Answered from the broker's cached view: brokers and the known topic.
        meta = wire.request(3, 1, metadata_v1([topic]))
        assert meta.brokers and [t.error_code for t in meta.topics] == [ErrorCode.none]
        # A topic to auto-create: "being created", ask again.
        meta = wire.request(3, 1, metadata_v1([f"{topic}-auto"]))
        assert [t.error_code for t in meta.topics] == [ErrorCode.leader_not_available]

        fetch = wire.request(1, 4, fetch_v4(topic, 0, 0))
        assert [p.error_code for t in fetch.responses for p in t.partitions] == [storage]
        offsets = wire.request(2, 1, list_offsets_v1(topic, 0, -1))
        assert [p.error_code for t in offsets.topics for p in t.partitions] == [storage]
        found = wire.request(*_find_coordinator(group))
        assert found.error_code in (ErrorCode.none, coordinator)
        commit = wire.request(*_offset_commit(group, topic, 2))
        assert error_codes(commit) == [coordinator]
        fetched = wire.request(*_offset_fetch(group, topic))
        assert set(error_codes(fetched)) == {coordinator}
        joined = wire.request(*_join_group(f"{group}-join"))
        assert joined.error_code in (ErrorCode.none, coordinator)
        pid = wire.request(*_init_producer_id())
        assert pid.error_code == coordinator
        created = wire.request(*_create_topics(f"{topic}-new"))
        assert [t.error_code for t in created.topics] == [ErrorCode.not_controller]
        produced = wire.request(0, 7, produce_v7({topic: {0: record_batch([b"c"], now)}}))
        assert produce_errors(produced) == {(topic, 0): (int(storage), -1)}
        assert wire.request(18, 0, api_versions_v0()).error_code == ErrorCode.none
        assert broker.alive()

        postgres.start_server()

        # The same connection serves normally again once the pool has reconnected.
        def produced_again() -> bool:
            answer = wire.request(0, 7, produce_v7({topic: {0: record_batch([b"d"], now)}}))
            return produce_errors(answer)[(topic, 0)][0] == 0

        wait_until(produced_again, 90, "a produce after PostgreSQL restarted", interval=0.5)
        fetch = wire.request(1, 4, fetch_v4(topic, 0, 0))
        assert [p.error_code for t in fetch.responses for p in t.partitions] == [ErrorCode.none]
        offsets = wire.request(2, 1, list_offsets_v1(topic, 0, -1))
        (latest,) = [p for t in offsets.topics for p in t.partitions]
        assert latest.error_code == ErrorCode.none and latest.offset == 3
        assert error_codes(wire.request(*_offset_commit(group, topic, 3))) == [ErrorCode.none]
        fetched = wire.request(*_offset_fetch(group, topic))
        assert [p.committed_offset for t in fetched.topics for p in t.partitions] == [3]
        assert wire.request(*_init_producer_id()).error_code == ErrorCode.none
        created = wire.request(*_create_topics(f"{topic}-new"))
        assert [t.error_code for t in created.topics] == [ErrorCode.none]
    # One warning per 10 s at most, however many requests were answered: counted over
    # the whole time since the stop (stale pooled connections fail after the restart too).
    since_stop_s = time.monotonic() - stopped
    assert broker.log_text().count("with a retriable error") <= since_stop_s / 10 + 2


SASL_KEYS = (17, 36)
"""SaslHandshake and SaslAuthenticate: a PLAINTEXT listener refuses them by design."""


def _served_seeds() -> list[tuple[int, int, bytes]]:
    """(api key, version, frame) of the largest captured request per API and version the
    broker serves (what real clients send), leaving out SASL and Produce with acks=0 (which
    has no answer)."""
    from kio.index import load_request_schema
    from kio.serial import entity_reader

    import lakelog.server.api.dispatch  # noqa: F401  (registers the handlers)
    from lakelog.server.api.registry import HANDLERS

    chosen: dict[tuple[int, int], bytes] = {}
    for seed in load_corpus():
        key, version = seed.api_key, seed.api_version
        spec = HANDLERS.get(key)
        if key in SASL_KEYS or len(chosen.get((key, version), b"")) >= len(seed.frame):
            continue
        if key != 18 and (spec is None or not spec.min_version <= version <= spec.max_version):
            continue
        if key == 0:
            request, _ = entity_reader(load_request_schema(0, version))(
                seed.frame, shape_of(seed.frame).body_start
            )
            if request.acks == 0:
                continue
        chosen[(key, version)] = seed.frame
    return [(key, version, frame) for (key, version), frame in sorted(chosen.items())]


def test_every_api_is_answered_during_an_outage(
    broker_factory: BrokerFactory, postgres: OwnPostgres
) -> None:
    """Every API and version real clients send, pipelined on one connection while the
    database is down: each gets a well-formed answer in order (no dropped connection, no
    traceback), and the same connection serves normally after the restart. The APIs of
    Kafka 4.x (KIP-848 and share groups, ACLs, SCRAM users) are in the corpus too."""
    broker = _broker(
        broker_factory, postgres, PRODUCE_COMMIT_RETRY_MS=2000, COORDINATOR_POOL_TIMEOUT_MS=200
    )
    seeds = _served_seeds()
    assert {key for key, _, _ in seeds} >= {68, 76, 78, 79, 29, 30, 31, 50, 51, 90, 91, 92}
    postgres.stop_server()
    with WireClient(broker.port, timeout=120) as wire:
        for n, (_, _, frame) in enumerate(seeds, 1):
            framed = frame[:4] + struct.pack(">i", 10_000 + n) + frame[8:]
            wire.send_raw(struct.pack(">i", len(framed)) + framed)
        codes: dict[int, set[ErrorCode]] = {}
        for n, (key, version, _) in enumerate(seeds, 1):
            got, response = decode_response(key, version, wire.read_frame())
            assert got == 10_000 + n, f"API {key} v{version}: answer {got} out of order"
            codes.setdefault(key, set()).update(error_codes(response))
        print({key: sorted(c.name for c in found) for key, found in codes.items()})
        # The group and share APIs answer with the error their clients retry on.
        for key in (68, 76, 90, 91, 92):
            assert ErrorCode.coordinator_not_available in codes[key], (key, codes[key])
        # ShareFetch and ShareAcknowledge: per partition (an acknowledgement without the
        # share session a ShareFetch opens is refused before the backend is asked).
        assert ErrorCode.kafka_storage_error in codes[78], codes[78]
        missing_session = {ErrorCode.kafka_storage_error, ErrorCode.share_session_not_found}
        assert codes[79] & missing_session, codes[79]
        assert broker.alive()
        postgres.start_server()

        def serves_again() -> bool:
            answer = wire.request(3, 1, metadata_v1(["outage-after"]))
            return [t.error_code for t in answer.topics] == [ErrorCode.none]

        wait_until(serves_again, 90, "Metadata (auto-creating a topic) after the restart")
    assert broker.tracebacks() == []


def test_clients_ride_through_a_postgres_stop(
    broker_factory: BrokerFactory, postgres: OwnPostgres
) -> None:
    from confluent_kafka import Consumer, Producer

    broker = _broker(broker_factory, postgres)
    topic = f"ride-{uuid.uuid4().hex[:8]}"
    create_topic(broker.bootstrap, topic, partitions=2)
    producer = Producer(
        {"bootstrap.servers": broker.bootstrap, "enable.idempotence": True, "linger.ms": 5}
    )
    consumer = Consumer(
        {
            "bootstrap.servers": broker.bootstrap,
            "group.id": f"ride-{uuid.uuid4().hex[:8]}",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": True,
            "auto.commit.interval.ms": 500,
        }
    )
    consumer.subscribe([topic])
    errors: list[str] = []
    delivered: list[bytes] = []
    received: set[bytes] = set()

    def on_delivery(err: Any, msg: Any) -> None:
        if err is not None:
            errors.append(str(err))
        else:
            delivered.append(msg.value())

    stop_consuming = threading.Event()

    def consume() -> None:
        while not stop_consuming.is_set():
            msg = consumer.poll(0.2)
            if msg is None:
                continue
            if msg.error():
                if msg.error().fatal():
                    errors.append(f"consumer: {msg.error()}")
                continue
            received.add(msg.value())

    reader = threading.Thread(target=consume, daemon=True)
    reader.start()
    sent = 0

    def send_for(seconds: float) -> None:
        nonlocal sent
        until = time.monotonic() + seconds
        while time.monotonic() < until:
            producer.produce(topic, value=f"v{sent}".encode(), on_delivery=on_delivery)
            sent += 1
            producer.poll(0.02)

    try:
        send_for(3)
        postgres.stop_server()
        stopped = time.monotonic()
        send_for(10)
        postgres.start_server()
        outage_s = time.monotonic() - stopped
        send_for(3)
        assert producer.flush(120) == 0, "records still undelivered 120 s after the restart"
        wait_until(lambda: len(received) >= sent, 120, f"the consumer reading {sent} records")
    finally:
        stop_consuming.set()
        reader.join(10)
        consumer.close()
    assert outage_s >= 9
    assert errors == []
    assert sorted(delivered) == sorted(f"v{i}".encode() for i in range(sent))
    assert received == set(delivered)
    assert broker.alive()
