"""Cluster-wide counters in PostgreSQL: producer ids, broker registrations and epochs.
Both counters are sequences: values are never handed out twice, even by transactions
that roll back, and drawing one never waits for another broker.

A broker's row is locked FOR KEY SHARE by its commits (see `produce`). Changing its epoch
(registering again, fencing) first locks the row FOR UPDATE, which waits for those
commits; heartbeats only update it (FOR NO KEY UPDATE), which never waits for commits."""

from __future__ import annotations

from lakelog.coordinator.interface import BrokerInfo
from lakelog.coordinator.postgres.rows import Conn, now_ms


async def allocate_producer_id(conn: Conn) -> int:
    cursor = await conn.execute("SELECT nextval('producer_ids')")
    row = await cursor.fetchone()
    assert row is not None
    return int(row[0])


async def register_broker(
    conn: Conn, broker_id: int, rack: str | None, host: str, port: int
) -> int:
    """One global epoch sequence: a new epoch beats every earlier one of any broker. On a
    re-registration the new epoch is drawn in the SET clause, under the row lock, so
    concurrent registrations of one id store their epochs in increasing order."""
    await _lock_broker(conn, broker_id)
    now = now_ms()
    cursor = await conn.execute(
        "INSERT INTO brokers (broker_id, broker_epoch, rack, host, port, registered_at,"
        " last_heartbeat) VALUES (%s, nextval('broker_epochs'), %s, %s, %s, %s, %s)"
        " ON CONFLICT (broker_id) DO UPDATE SET broker_epoch = nextval('broker_epochs'),"
        " rack = excluded.rack, host = excluded.host, port = excluded.port,"
        " registered_at = excluded.registered_at, last_heartbeat = excluded.last_heartbeat"
        " RETURNING broker_epoch",
        (broker_id, rack, host, port, now, now),
    )
    row = await cursor.fetchone()
    assert row is not None
    return int(row[0])


HEARTBEAT_SQL = (
    "WITH beat AS (UPDATE brokers SET last_heartbeat = %s"
    " WHERE broker_id = %s AND broker_epoch = %s RETURNING 1)"
    " SELECT EXISTS (SELECT 1 FROM beat), EXISTS (SELECT 1 FROM brokers WHERE broker_id = %s)"
)
"""A heartbeat in one statement: (beat recorded, broker id known)."""


async def list_brokers(conn: Conn, alive_since_ms: int) -> list[BrokerInfo]:
    cursor = await conn.execute(
        "SELECT broker_id, broker_epoch, rack, host, port, last_heartbeat FROM brokers"
        " WHERE last_heartbeat >= %s ORDER BY broker_id",
        (alive_since_ms,),
    )
    return [BrokerInfo(*row) for row in await cursor.fetchall()]


async def fence_broker(
    conn: Conn, broker_id: int, broker_epoch: int, silent_since_ms: int, left: bool
) -> bool:
    """A fresh epoch nobody holds makes the silent broker's commits and heartbeats stale;
    a negative heartbeat hides it from every listing until it registers again. A heartbeat
    racing with it is either seen (no fencing) or made stale."""
    await _lock_broker(conn, broker_id)
    cursor = await conn.execute(
        "UPDATE brokers SET broker_epoch = nextval('broker_epochs'), last_heartbeat = %s"
        " WHERE broker_id = %s AND broker_epoch = %s AND last_heartbeat < %s RETURNING 1",
        (-1 if left else -now_ms(), broker_id, broker_epoch, silent_since_ms),
    )
    return await cursor.fetchone() is not None


async def _lock_broker(conn: Conn, broker_id: int) -> None:
    """Wait for the broker's in-flight commits before its epoch changes."""
    await conn.execute("SELECT 1 FROM brokers WHERE broker_id = %s FOR UPDATE", (broker_id,))
