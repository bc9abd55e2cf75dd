"""Share-group APIs on the wire: the protocol's errors for what no well-behaved client
sends (sessions out of step, acknowledgements of records not held, bad batches, unknown
topics and members); the broker answers each with Kafka's code and keeps serving."""

from __future__ import annotations

import datetime
import time
import uuid
from typing import Any

from e2e_harness import BrokerProcess, create_topic
from e2e_wire import WireClient, request_class
from group_clients import unique
from share_clients import produce_values, set_group_configs, topic_id_of

NONE, INVALID_REQUEST, UNKNOWN_MEMBER_ID, UNKNOWN_TOPIC_ID = 0, 42, 25, 100
INVALID_RECORD_STATE, SHARE_SESSION_NOT_FOUND, INVALID_SHARE_SESSION_EPOCH = 121, 122, 123
FETCH, ACK, HEARTBEAT = 78, 79, 76


def _fetch(
    client: WireClient,
    group: str,
    member: str,
    epoch: int,
    topic_id: Any,
    acks: tuple[tuple[int, int, tuple[int, ...]], ...] = (),
    max_records: int = 10,
) -> Any:
    m = request_class(FETCH, 1)
    return client.request(
        FETCH,
        1,
        m.ShareFetchRequest(
            group_id=group,
            member_id=member,
            share_session_epoch=epoch,
            max_wait=datetime.timedelta(milliseconds=100),
            min_bytes=1,
            max_bytes=1 << 20,
            max_records=max_records,
            batch_size=max_records,
            topics=(
                m.FetchTopic(
                    topic_id=topic_id,
                    partitions=(
                        m.FetchPartition(
                            partition_index=0,
                            acknowledgement_batches=tuple(
                                m.AcknowledgementBatch(
                                    first_offset=f, last_offset=la, acknowledge_types=t
                                )
                                for f, la, t in acks
                            ),
                        ),
                    ),
                ),
            ),
            forgotten_topics_data=(),
        ),
    )


def _partition(response: Any) -> Any:
    [topic] = response.responses
    [partition] = topic.partitions
    return partition


def test_share_protocol_errors(shared_broker: BrokerProcess) -> None:
    bootstrap = shared_broker.bootstrap
    topic, group = unique("share-wire"), unique("g")
    create_topic(bootstrap, topic, partitions=1)
    set_group_configs(bootstrap, group, {"share.auto.offset.reset": "earliest"})
    # One producer batch of 20 (queued before the linger ends; flush sends it).
    produce_values(bootstrap, topic, [f"w{i}".encode() for i in range(20)], **{"linger.ms": 1000})
    topic_id = topic_id_of(bootstrap, topic)
    with WireClient(shared_broker.port) as client:
        assert _fetch(client, "", "m", 0, topic_id).error_code == INVALID_REQUEST
        assert _fetch(client, group, "m", 3, topic_id).error_code == SHARE_SESSION_NOT_FOUND
        unknown = _fetch(client, group, "u", 0, uuid.uuid4())
        assert _partition(unknown).error_code == UNKNOWN_TOPIC_ID

        first = _fetch(client, group, "m", 0, topic_id, max_records=5)
        [acquired] = _partition(first).acquired_records
        # The cap is soft, as in Kafka: the whole batch the 5th record is in.
        assert (acquired.first_offset, acquired.last_offset, acquired.delivery_count) == (0, 19, 1)
        assert _fetch(client, group, "m", 5, topic_id).error_code == INVALID_SHARE_SESSION_EPOCH
        # Another member may not acknowledge m's records; first > last is malformed.
        other = _fetch(client, group, "o", 0, topic_id, max_records=0)
        assert other.error_code == NONE
        theirs = _fetch(client, group, "o", 1, topic_id, acks=((0, 4, (1,)),), max_records=0)
        assert _partition(theirs).acknowledge_error_code == INVALID_RECORD_STATE
        bad = _fetch(client, group, "m", 1, topic_id, acks=((4, 0, (1,)),), max_records=0)
        assert _partition(bad).acknowledge_error_code == INVALID_REQUEST
        wrong_count = _fetch(client, group, "m", 2, topic_id, acks=((0, 4, (1, 1)),))
        assert _partition(wrong_count).acknowledge_error_code == INVALID_REQUEST
        # The well-formed acknowledgement still works afterwards.
        good = _fetch(client, group, "m", 3, topic_id, acks=((0, 4, (1,)),), max_records=0)
        assert _partition(good).acknowledge_error_code == NONE

        ack = request_class(ACK, 1)
        body = ack.ShareAcknowledgeRequest(
            group_id=group, member_id="nobody", share_session_epoch=0, topics=()
        )
        assert client.request(ACK, 1, body).error_code == INVALID_SHARE_SESSION_EPOCH

        hb = request_class(HEARTBEAT, 1)
        stranger = hb.ShareGroupHeartbeatRequest(
            group_id=group, member_id="stranger", member_epoch=7, subscribed_topic_names=None
        )
        assert client.request(HEARTBEAT, 1, stranger).error_code == UNKNOWN_MEMBER_ID
        no_topics = hb.ShareGroupHeartbeatRequest(
            group_id=group, member_id="x", member_epoch=0, subscribed_topic_names=None
        )
        assert client.request(HEARTBEAT, 1, no_topics).error_code == INVALID_REQUEST
        joined = client.request(
            HEARTBEAT,
            1,
            hb.ShareGroupHeartbeatRequest(
                group_id=group, member_id="x", member_epoch=0, subscribed_topic_names=(topic,)
            ),
        )
        assert joined.error_code == NONE and joined.member_epoch > 0
        [assigned] = joined.assignment.topic_partitions
        assert (assigned.topic_id, tuple(assigned.partitions)) == (topic_id, (0,))
    assert shared_broker.alive() and not shared_broker.tracebacks()


def test_auto_offset_reset(shared_broker: BrokerProcess) -> None:
    """A share partition starts where share.auto.offset.reset says, on its first fetch:
    latest (the default) skips what is already there, earliest and by_duration take it."""
    bootstrap = shared_broker.bootstrap
    topic = unique("share-reset")
    create_topic(bootstrap, topic, partitions=1)
    produce_values(bootstrap, topic, [f"r{i}".encode() for i in range(10)])
    topic_id = topic_id_of(bootstrap, topic)
    latest, earliest, recent, future = (unique(n) for n in ("l", "e", "d", "f"))
    set_group_configs(bootstrap, earliest, {"share.auto.offset.reset": "earliest"})
    set_group_configs(bootstrap, recent, {"share.auto.offset.reset": "by_duration:PT1H"})
    set_group_configs(bootstrap, future, {"share.auto.offset.reset": "by_duration:PT0S"})
    with WireClient(shared_broker.port) as client:
        for group, expected in ((latest, []), (earliest, [(0, 9)]), (recent, [(0, 9)])):
            got = _partition(_fetch(client, group, "m", 0, topic_id)).acquired_records
            assert [(a.first_offset, a.last_offset) for a in got] == expected, group
        assert _partition(_fetch(client, future, "m", 0, topic_id)).acquired_records == ()
        produce_values(bootstrap, topic, [b"new"])
        for group, first in ((latest, 10), (future, 10)):
            got = _partition(_fetch(client, group, "m", 1, topic_id)).acquired_records
            assert [(a.first_offset, a.last_offset) for a in got] == [(first, 10)], group


def test_member_leaving_the_group_releases_its_records(shared_broker: BrokerProcess) -> None:
    """A member that leaves (heartbeat with epoch -1) loses its locks at once, long before
    the 60 s lock would end: another member gets its records with delivery count 2."""
    bootstrap = shared_broker.bootstrap
    topic, group = unique("share-leave"), unique("g")
    create_topic(bootstrap, topic, partitions=1)
    set_group_configs(
        bootstrap,
        group,
        {"share.auto.offset.reset": "earliest", "share.record.lock.duration.ms": "60000"},
    )
    produce_values(bootstrap, topic, [f"l{i}".encode() for i in range(5)])
    topic_id = topic_id_of(bootstrap, topic)
    hb = request_class(HEARTBEAT, 1)
    with WireClient(shared_broker.port) as client:

        def beat(epoch: int, topics: tuple[str, ...] | None) -> Any:
            body = hb.ShareGroupHeartbeatRequest(
                group_id=group,
                member_id="leaver",
                member_epoch=epoch,
                subscribed_topic_names=topics,
            )
            return client.request(HEARTBEAT, 1, body)

        joined = beat(0, (topic,))
        assert joined.error_code == NONE
        held = _partition(_fetch(client, group, "leaver", 0, topic_id)).acquired_records
        assert [(a.first_offset, a.last_offset) for a in held] == [(0, 4)]
        assert beat(-1, None).error_code == NONE
        deadline = time.monotonic() + 30
        got: tuple[Any, ...] = ()
        epoch = 0
        while not got and time.monotonic() < deadline:
            got = _partition(_fetch(client, group, "other", epoch, topic_id)).acquired_records
            epoch += 1
    assert [(a.first_offset, a.last_offset, a.delivery_count) for a in got] == [(0, 4, 2)]
