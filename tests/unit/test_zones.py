import asyncio
import socket
from uuid import uuid4

from lakelog.coordinator.topic_types import BrokerInfo
from lakelog.server.broker import _connect_refused
from lakelog.server.cluster.zones import client_zone, partition_broker, suspected, zone_brokers


def _broker(broker_id: int, rack: str | None, heartbeat: int = 0) -> BrokerInfo:
    return BrokerInfo(broker_id, 1, rack, "127.0.0.1", 9092 + broker_id, heartbeat)


def test_client_zone_from_client_id() -> None:
    assert client_zone("lakelog_az=eu-west-1a") == "eu-west-1a"
    assert client_zone("billing,lakelog_az=us-east-1b") == "us-east-1b"
    assert client_zone("app lakelog_az=z1 more") == "z1"
    assert client_zone("xlakelog_az=z1") is None
    assert client_zone("rdkafka") is None and client_zone(None) is None


def test_zone_brokers_prefer_the_clients_zone() -> None:
    brokers = [_broker(0, "a"), _broker(1, "b"), _broker(2, "a")]
    assert [b.broker_id for b in zone_brokers(brokers, "a")] == [0, 2]
    assert len(zone_brokers(brokers, "zzz")) == 3  # no broker there: everyone serves
    assert len(zone_brokers(brokers, None)) == 3


def test_partition_broker_is_stable_and_spreads() -> None:
    brokers = [_broker(i, None) for i in range(3)]
    topic = uuid4()
    picks = [partition_broker(brokers, topic, p) for p in range(60)]
    assert picks == [partition_broker(list(reversed(brokers)), topic, p) for p in range(60)]
    assert set(picks) == {0, 1, 2}


def test_a_broker_leaving_moves_only_its_own_partitions() -> None:
    """Rendezvous hashing: the partitions of the brokers that stay do not move, so a
    restarted or paused neighbour cannot reorder everybody's in-flight produce."""
    brokers = [_broker(i, None) for i in range(4)]
    topic = uuid4()
    before = {p: partition_broker(brokers, topic, p) for p in range(400)}
    after = {p: partition_broker(brokers[:2] + brokers[3:], topic, p) for p in range(400)}
    moved = {p for p in before if before[p] != after[p]}
    assert moved == {p for p in before if before[p] == 2}
    assert 60 < len(moved) < 140  # about a quarter


def ids(brokers: list[BrokerInfo]) -> list[int]:
    return [b.broker_id for b in brokers]


def test_a_zone_whose_brokers_are_suspected_is_served_by_the_others() -> None:
    brokers = [_broker(0, "a"), _broker(1, "b"), _broker(2, "a"), _broker(3, "c")]
    assert ids(zone_brokers(brokers, "a", {0})) == [2]  # one of two left: stays in zone
    assert ids(zone_brokers(brokers, "a", {0, 2})) == [1, 3]  # other zones, not suspects
    assert ids(zone_brokers(brokers, "b", {0, 2})) == [1]  # other zones unaffected
    assert ids(zone_brokers(brokers, "zzz", {3})) == [0, 1, 2]
    assert ids(zone_brokers(brokers, "a", {0, 1, 2, 3})) == [0, 1, 2, 3]  # nobody: all


def test_clients_without_a_zone_are_served_by_every_unsuspected_broker() -> None:
    """A crashed broker's partitions move within seconds for every client, not after the
    session timeout; only when everybody looks gone does nobody move."""
    brokers = [_broker(0, None), _broker(1, "b"), _broker(2, None)]
    assert ids(zone_brokers(brokers, None, {0})) == [1, 2]
    assert ids(zone_brokers(brokers, None, {0, 2})) == [1]
    assert ids(zone_brokers(brokers, None, {0, 1, 2})) == [0, 1, 2]
    assert ids(zone_brokers(brokers, None)) == [0, 1, 2]


NOW = 1_000_000


def _suspects(
    brokers: list[BrokerInfo], trust_age: bool = True, refused: frozenset[int] = frozenset()
) -> frozenset[int]:
    return suspected(
        brokers, NOW, late_ms=6000, overdue_ms=3000, trust_age=trust_age, refused=refused
    )


def test_a_late_heartbeat_alone_suspects_only_after_the_failover_time() -> None:
    fresh, late_once, silent = NOW - 500, NOW - 4500, NOW - 6500
    brokers = [_broker(0, "a", fresh), _broker(1, "b", late_once), _broker(2, "c", silent)]
    assert _suspects(brokers) == {2}
    # Right after this broker's own coordinator trouble, heartbeat age proves nothing.
    assert _suspects(brokers, trust_age=False) == frozenset()


def test_a_refused_probe_suspects_an_overdue_broker_early() -> None:
    brokers = [_broker(0, "a", NOW - 500), _broker(1, "b", NOW - 3500), _broker(2, "c", NOW)]
    assert _suspects(brokers, refused=frozenset({1})) == {1}
    assert _suspects(brokers, trust_age=False, refused=frozenset({1})) == {1}  # refused is proof
    # A broker heartbeating on time is never suspected, whatever its probe said (an
    # advertised address the brokers cannot reach must not move its zone away).
    assert _suspects(brokers, refused=frozenset({0})) == frozenset()


def test_when_every_broker_looks_gone_none_is_suspected() -> None:
    """After a coordinator outage every heartbeat is old: nobody moves."""
    brokers = [_broker(i, z, NOW - 60_000) for i, z in enumerate("abc")]
    assert _suspects(brokers) == frozenset()
    assert _suspects([*brokers, _broker(3, "d", NOW)]) == {0, 1, 2}


async def test_connect_probe_tells_a_gone_process_from_a_live_one() -> None:
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    open_port = listener.getsockname()[1]
    closed = socket.socket()
    closed.bind(("127.0.0.1", 0))
    closed_port = closed.getsockname()[1]
    closed.close()  # nothing listens there now
    try:
        refused, accepted = await asyncio.gather(
            _connect_refused("127.0.0.1", closed_port), _connect_refused("127.0.0.1", open_port)
        )
    finally:
        listener.close()
    assert refused is True
    assert accepted is False


def test_metadata_names_every_broker_with_the_serving_ones_first() -> None:
    """A zone client is led to its zone's brokers but told of all: when its zone dies it
    must still know a broker to ask (clients ask only brokers Metadata named)."""
    from lakelog.server.api.metadata import named_brokers

    live = [_broker(1, "a"), _broker(2, "b"), _broker(3, "c"), _broker(4, "a")]
    fenced = [_broker(5, "a"), _broker(2, "b")]
    serving = zone_brokers(live, "a")
    named = [b.broker_id for b in named_brokers(serving, live, fenced)]
    assert named == [1, 4, 2, 3, 5]
    assert [b.broker_id for b in named_brokers(live, live, [])] == [1, 2, 3, 4]
