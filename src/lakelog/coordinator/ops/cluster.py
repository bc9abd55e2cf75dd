"""Cluster-wide counters: producer ids, broker registrations and epochs.

Both counters only grow, so values never repeat (SQLite: rows of `counters`; PostgreSQL:
sequences, which a rolled-back transaction never hands out again and drawing from which
never waits). On PostgreSQL a broker's row is locked FOR KEY SHARE by its commits (see
`produce`); changing its epoch (registering again, fencing) first locks the row FOR UPDATE,
which waits for those commits. Heartbeats only update the row (see the PostgreSQL
coordinator, which sends them as one autocommit statement)."""

from __future__ import annotations

from lakelog.coordinator.engine import Session
from lakelog.coordinator.ops.rows import now_ms
from lakelog.coordinator.topic_types import BrokerInfo
from lakelog.util.errors import ErrorCode


async def allocate_producer_id(s: Session) -> int:
    return await s.next_value("producer_id")


async def register_broker(
    s: Session, broker_id: int, rack: str | None, host: str, port: int
) -> int:
    """One global epoch counter: a new epoch beats every earlier one of any broker. It is
    drawn under the row lock, so concurrent registrations of one id store theirs in
    increasing order."""
    await _lock_broker(s, broker_id)
    epoch = await s.next_value("broker_epoch")
    now = now_ms()
    await s.execute(
        "INSERT INTO brokers (broker_id, broker_epoch, rack, host, port, registered_at,"
        " last_heartbeat) VALUES (?, ?, ?, ?, ?, ?, ?)"
        " ON CONFLICT (broker_id) DO UPDATE SET broker_epoch = excluded.broker_epoch,"
        " rack = excluded.rack, host = excluded.host, port = excluded.port,"
        " registered_at = excluded.registered_at, last_heartbeat = excluded.last_heartbeat"
        " WHERE brokers.broker_epoch < excluded.broker_epoch",
        (broker_id, epoch, rack, host, port, now, now),
    )
    return epoch


async def heartbeat_broker(s: Session, broker_id: int, broker_epoch: int) -> ErrorCode:
    row = await s.fetchone("SELECT broker_epoch FROM brokers WHERE broker_id = ?", (broker_id,))
    if row is None:
        return ErrorCode.broker_id_not_registered
    if row[0] != broker_epoch:
        return ErrorCode.stale_broker_epoch
    await s.execute(
        "UPDATE brokers SET last_heartbeat = ? WHERE broker_id = ?", (now_ms(), broker_id)
    )
    return ErrorCode.none


async def list_brokers(s: Session, alive_since_ms: int) -> list[BrokerInfo]:
    rows = await s.fetchall(
        "SELECT broker_id, broker_epoch, rack, host, port, last_heartbeat FROM brokers"
        " WHERE last_heartbeat >= ? ORDER BY broker_id",
        (alive_since_ms,),
    )
    return [BrokerInfo(*row) for row in rows]


async def fence_broker(
    s: Session, broker_id: int, broker_epoch: int, silent_since_ms: int, left: bool
) -> bool:
    """A fresh epoch nobody holds makes the silent broker's commits and heartbeats stale;
    a negative heartbeat hides it from every listing until it registers again. A heartbeat
    racing with it is either seen (no fencing) or made stale."""
    row = await s.fetchone(
        "SELECT 1 FROM brokers WHERE broker_id = ? AND broker_epoch = ? AND last_heartbeat < ?"
        + s.dialect.for_update,
        (broker_id, broker_epoch, silent_since_ms),
    )
    if row is None:
        return False
    epoch = await s.next_value("broker_epoch")
    await s.execute(
        "UPDATE brokers SET broker_epoch = ?, last_heartbeat = ? WHERE broker_id = ?",
        (epoch, -1 if left else -now_ms(), broker_id),
    )
    return True


async def _lock_broker(s: Session, broker_id: int) -> None:
    """Wait for the broker's in-flight commits before its epoch changes."""
    if s.dialect.for_update:
        await s.execute(
            "SELECT 1 FROM brokers WHERE broker_id = ?" + s.dialect.for_update, (broker_id,)
        )
