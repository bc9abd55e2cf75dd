from uuid import uuid4

from lakelog.coordinator.interface import BrokerInfo
from lakelog.zones import client_zone, partition_broker, zone_brokers


def _broker(broker_id: int, rack: str | None) -> BrokerInfo:
    return BrokerInfo(broker_id, 1, rack, "127.0.0.1", 9092 + broker_id, 0)


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
