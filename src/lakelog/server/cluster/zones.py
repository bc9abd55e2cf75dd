"""Which availability zone a client is in, and which brokers of that zone serve it.

A client names its zone in `client.id` as `lakelog_az=<zone>` (WarpStream and Inkless use
the same convention), or through the rack id Fetch v11+ carries. Brokers are matched on
their `--rack`.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Collection, Sequence
from uuid import UUID

from lakelog.coordinator.topic_types import BrokerInfo

_ZONE = re.compile(r"(?:^|[\s,;])lakelog_az=([A-Za-z0-9._:-]+)")


def client_zone(client_id: str | None) -> str | None:
    if not client_id:
        return None
    match = _ZONE.search(client_id)
    return match.group(1) if match else None


def zone_brokers(
    brokers: Sequence[BrokerInfo], zone: str | None, suspects: Collection[int] = ()
) -> list[BrokerInfo]:
    """The live brokers that serve a client of `zone`.

    Its zone's brokers, leaving out `suspects` (brokers that look gone: see
    `Broker._find_suspects`); when none of them is left, every other zone's unsuspected broker
    (fast zone failover). A client without a zone is served by every unsuspected broker, so
    a crashed broker's partitions move within seconds, not after the session timeout. When
    every broker is suspected, all of them serve."""
    healthy = [b for b in brokers if b.broker_id not in suspects]
    if zone:
        local = [b for b in healthy if b.rack == zone]
        if local:
            return local
    return healthy or list(brokers)


def suspected(
    brokers: Sequence[BrokerInfo],
    now_ms: int,
    *,
    late_ms: int,
    overdue_ms: int,
    trust_age: bool,
    refused: Collection[int] = (),
) -> frozenset[int]:
    """The ids of live brokers that no longer lead partitions for anybody.

    A broker is suspected when its last heartbeat is older than `late_ms` (only when
    `trust_age`: right after a coordinator outage every heartbeat is old), or when it is
    older than `overdue_ms` and a TCP connect to its advertised address was refused
    (`refused`: nothing listens there, the process is gone). A broker heartbeating on
    time is never suspected, so one late heartbeat or an address the brokers cannot
    reach moves nothing. When every broker would be suspected, none is."""
    out = frozenset(
        b.broker_id
        for b in brokers
        if b.last_heartbeat < now_ms - overdue_ms
        and ((trust_age and b.last_heartbeat < now_ms - late_ms) or b.broker_id in refused)
    )
    return frozenset() if len(out) >= len(brokers) else out


def partition_broker(brokers: Sequence[BrokerInfo], topic_id: UUID, partition: int) -> int:
    """The broker with the highest hash of (partition, broker id): rendezvous hashing.

    Load spreads evenly, and a broker joining or leaving moves only the partitions it
    gains or loses. Every move lets a plain producer's in-flight requests on the old
    broker commit after its next ones on the new one, so a restarted neighbour must not
    move everybody's partitions (a modulo over the broker list did)."""
    key = topic_id.bytes + partition.to_bytes(4, "big")
    return max(
        brokers,
        key=lambda b: (
            hashlib.blake2b(
                key + b.broker_id.to_bytes(4, "big", signed=True), digest_size=8
            ).digest(),
            b.broker_id,
        ),
    ).broker_id


def count_bytes(direction: str, client: str | None, broker: str | None, size: int) -> None:
    """Record traffic by zone pair; it is cross-zone only when both zones are known."""
    from lakelog.util import metrics

    metrics.zone_bytes_total.labels(direction, client or "unknown", broker or "unknown").inc(size)
    if client and broker and client != broker:
        metrics.cross_zone_bytes_total.labels(direction).inc(size)
