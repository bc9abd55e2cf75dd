"""The SQLite side of the engine seam (see `coordinator/engine.py`): a session over the
coordinator's one connection, used on its database thread inside the transaction the
coordinator opened (`BEGIN IMMEDIATE` for writes). Every method runs at once; awaiting
one never suspends, so `engine.drive` runs an operation without an event loop."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Sequence
from typing import Any
from uuid import UUID

from lakelog.coordinator.engine import Columns, Fragment, KeyRows, Params, Row


class SqliteDialect:
    name = "sqlite"
    for_update = ""

    def lock(self, clause: str) -> str:
        return ""

    def uuid(self, value: UUID) -> Any:
        return str(value)

    def to_uuid(self, value: Any) -> UUID:
        return UUID(value)

    def json(self, value: dict[str, Any]) -> Any:
        return json.dumps(value, sort_keys=True)

    def from_json(self, value: Any) -> dict[str, Any]:
        loaded: dict[str, Any] = json.loads(value)
        return loaded

    def keyset(
        self, alias: str, columns: Columns, rows: KeyRows, ordinality: str | None = None
    ) -> Fragment:
        """A VALUES list of bound parameters while it stays well under SQLite's limit on
        parameters (the planner reads it fastest: a commit's lookups took a fifth of the
        time of `json_each`); beyond that, or empty, `json_each` over one JSON array of
        rows, any number of rows in one parameter."""
        names = [name for name, _ in columns] + ([ordinality] if ordinality else [])
        width = len(names)
        if rows and len(rows) * width <= MAX_VALUES_PARAMETERS:
            picks = ", ".join(f"column{i} AS {name}" for i, name in enumerate(names, 1))
            one = "(" + ", ".join("?" * width) + ")"
            params: list[Any] = []
            if ordinality:
                for i, row in enumerate(rows, 1):
                    params.extend(row)
                    params.append(i)
            else:
                for row in rows:
                    params.extend(row)
            values = ", ".join([one] * len(rows))
            return f"(SELECT {picks} FROM (VALUES {values})) AS {alias}", params
        picks_json = [f"j.value ->> {i} AS {name}" for i, (name, _) in enumerate(columns)]
        if ordinality:
            picks_json.append(f"j.key + 1 AS {ordinality}")
        return (
            f"(SELECT {', '.join(picks_json)} FROM json_each(?) AS j) AS {alias}",
            [json.dumps([list(row) for row in rows])],
        )

    def join_each(self, table: str, alias: str, on: str) -> str:
        return f" JOIN {table} {alias} ON {on}"

    def first_rows_join(
        self, table: str, alias: str, key: str, where: str, order_by: str, limit: int
    ) -> str:
        """The inner `alias` shadows the outer one inside the subquery: each row's key is
        found by an index seek, then the row by its key."""
        return (
            f" JOIN {table} AS {alias} ON {alias}.{key} IN (SELECT {alias}.{key}"
            f" FROM {table} AS {alias} WHERE {where} ORDER BY {order_by} LIMIT {limit})"
        )


MAX_VALUES_PARAMETERS = 8_000
"""Largest VALUES keyset, in bound parameters: SQLite allows 32,766 per statement (since
3.32), and the statement may bind others besides."""

SQLITE = SqliteDialect()

_COUNTERS = {"producer_id": 0, "broker_epoch": 1, "plain_owner_epoch": 1}
"""Counter name and what the stored value is offset by (the row holds the next producer
id, and the last broker epoch or plain-write claim epoch handed out)."""


_inserts: dict[tuple[str, tuple[str, ...]], str] = {}
"""`insert_int_rows` statements by table and columns (the hot path builds them once)."""


class _Done:
    __slots__ = ("_rows",)

    def __init__(self, rows: list[Row]) -> None:
        self._rows = rows

    async def fetchall(self) -> list[Row]:
        return self._rows

    async def fetchone(self) -> Row | None:
        return self._rows[0] if self._rows else None


class SqliteSession:
    __slots__ = ("conn",)

    dialect = SQLITE

    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn

    async def execute(self, sql: str, params: Params = ()) -> None:
        self.conn.execute(sql, params)

    async def executemany(self, sql: str, rows: Sequence[Params]) -> None:
        self.conn.executemany(sql, rows)

    async def send(self, sql: str, params: Params = ()) -> _Done:
        return _Done(self.conn.execute(sql, params).fetchall())

    async def fetchall(self, sql: str, params: Params = ()) -> list[Row]:
        return self.conn.execute(sql, params).fetchall()

    async def fetchone(self, sql: str, params: Params = ()) -> Row | None:
        row: Row | None = self.conn.execute(sql, params).fetchone()
        return row

    async def insert_int_rows(
        self, table: str, columns: Sequence[tuple[str, str]], rows: Sequence[Sequence[int]]
    ) -> None:
        key = (table, tuple(name for name, _ in columns))
        sql = _inserts.get(key)
        if sql is None:
            values = ", ".join("?" * len(columns))
            sql = _inserts[key] = f"INSERT INTO {table} ({', '.join(key[1])}) VALUES ({values})"
        self.conn.executemany(sql, rows)

    async def next_value(self, counter: str) -> int:
        row = self.conn.execute(
            "UPDATE counters SET value = value + 1 WHERE name = ? RETURNING value - 1",
            (counter,),
        ).fetchone()
        if row is None:
            raise RuntimeError(f"counter {counter!r} missing: schema not migrated?")
        return int(row[0]) + _COUNTERS[counter]
