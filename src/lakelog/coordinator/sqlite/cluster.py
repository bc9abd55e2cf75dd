"""Cluster-wide counters in SQLite: producer ids, broker registrations and epochs."""

from __future__ import annotations

import sqlite3

from lakelog.coordinator.interface import BrokerInfo
from lakelog.coordinator.sqlite.rows import now_ms
from lakelog.errors import ErrorCode


def next_counter(conn: sqlite3.Connection, name: str) -> int:
    """The counter's value before this call; it only ever grows, so values never repeat."""
    row = conn.execute(
        "UPDATE counters SET value = value + 1 WHERE name = ? RETURNING value - 1", (name,)
    ).fetchone()
    if row is None:
        raise RuntimeError(f"counter {name!r} missing: schema not migrated?")
    return int(row[0])


def allocate_producer_id(conn: sqlite3.Connection) -> int:
    return next_counter(conn, "producer_id")


def register_broker(
    conn: sqlite3.Connection, broker_id: int, rack: str | None, host: str, port: int
) -> int:
    # One global epoch counter: a new epoch beats every earlier one of any broker.
    epoch = next_counter(conn, "broker_epoch") + 1
    now = now_ms()
    conn.execute(
        "INSERT INTO brokers (broker_id, broker_epoch, rack, host, port, registered_at,"
        " last_heartbeat) VALUES (?, ?, ?, ?, ?, ?, ?)"
        " ON CONFLICT (broker_id) DO UPDATE SET broker_epoch = excluded.broker_epoch,"
        " rack = excluded.rack, host = excluded.host, port = excluded.port,"
        " registered_at = excluded.registered_at, last_heartbeat = excluded.last_heartbeat",
        (broker_id, epoch, rack, host, port, now, now),
    )
    return epoch


def heartbeat_broker(conn: sqlite3.Connection, broker_id: int, broker_epoch: int) -> ErrorCode:
    row = conn.execute(
        "SELECT broker_epoch FROM brokers WHERE broker_id = ?", (broker_id,)
    ).fetchone()
    if row is None:
        return ErrorCode.broker_id_not_registered
    if row[0] != broker_epoch:
        return ErrorCode.stale_broker_epoch
    conn.execute("UPDATE brokers SET last_heartbeat = ? WHERE broker_id = ?", (now_ms(), broker_id))
    return ErrorCode.none


def list_brokers(conn: sqlite3.Connection, alive_since_ms: int) -> list[BrokerInfo]:
    rows = conn.execute(
        "SELECT broker_id, broker_epoch, rack, host, port, last_heartbeat FROM brokers"
        " WHERE last_heartbeat >= ? ORDER BY broker_id",
        (alive_since_ms,),
    ).fetchall()
    return [BrokerInfo(*row) for row in rows]


def fence_broker(
    conn: sqlite3.Connection, broker_id: int, broker_epoch: int, silent_since_ms: int, left: bool
) -> bool:
    row = conn.execute(
        "SELECT 1 FROM brokers WHERE broker_id = ? AND broker_epoch = ? AND last_heartbeat < ?",
        (broker_id, broker_epoch, silent_since_ms),
    ).fetchone()
    if row is None:
        return False
    # A fresh epoch nobody holds: the silent broker's commits and heartbeats become stale.
    # A negative heartbeat hides it from every listing until it registers again.
    epoch = next_counter(conn, "broker_epoch") + 1
    conn.execute(
        "UPDATE brokers SET broker_epoch = ?, last_heartbeat = ? WHERE broker_id = ?",
        (epoch, -1 if left else -now_ms(), broker_id),
    )
    return True
