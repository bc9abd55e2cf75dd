"""The PostgreSQL side of the engine seam (see `coordinator/engine.py`): a session over a
pooled connection in pipeline mode, inside the transaction `transaction.Transactions`
opened. `execute` and `send` only queue a statement; the round trip happens when a result
is first read (or at COMMIT), so BEGIN, the statements nobody reads, NOTIFY and COMMIT
share round trips with the ones that are read."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any
from uuid import UUID

from psycopg import AsyncConnection, AsyncCursor
from psycopg.types.json import Jsonb

from lakelog.coordinator.engine import Columns, Fragment, KeyRows, Params, Row
from lakelog.coordinator.postgres.arrays import int4s, int8_rows, int8s, uuids

Conn = AsyncConnection[Any]

_SEQUENCES = {
    "producer_id": "producer_ids",
    "broker_epoch": "broker_epochs",
    "plain_owner_epoch": "plain_owner_epochs",
}

_converted: dict[str, str] = {}


def pg_sql(sql: str) -> str:
    """`?` placeholders as psycopg's `%s` (and a literal `%` as `%%`), remembered."""
    done = _converted.get(sql)
    if done is None:
        done = _converted[sql] = sql.replace("%", "%%").replace("?", "%s")
    return done


class PostgresDialect:
    name = "postgresql"
    for_update = " FOR UPDATE"

    def lock(self, clause: str) -> str:
        return f" FOR {clause}"

    def uuid(self, value: UUID) -> Any:
        return value

    def to_uuid(self, value: Any) -> UUID:
        return value if isinstance(value, UUID) else UUID(str(value))

    def json(self, value: dict[str, Any]) -> Any:
        return Jsonb(value)

    def from_json(self, value: Any) -> dict[str, Any]:
        return dict(value)

    def keyset(
        self, alias: str, columns: Columns, rows: KeyRows, ordinality: str | None = None
    ) -> Fragment:
        """`unnest` of one array parameter per column (integer and uuid columns in binary
        format, see `arrays`)."""
        arrays = ", ".join(f"?::{pg_type}[]" for _, pg_type in columns)
        names = [name for name, _ in columns] + ([ordinality] if ordinality else [])
        fragment = f"unnest({arrays}){' WITH ORDINALITY' if ordinality else ''}"
        params = [
            _array([row[i] for row in rows], pg_type) for i, (_, pg_type) in enumerate(columns)
        ]
        return f"{fragment} AS {alias} ({', '.join(names)})", params

    def join_each(self, table: str, alias: str, on: str) -> str:
        # OFFSET 0 keeps the planner from flattening the subquery back into a join.
        return f" CROSS JOIN LATERAL (SELECT * FROM {table} {alias} WHERE {on} OFFSET 0) {alias}"

    def first_rows_join(
        self, table: str, alias: str, key: str, where: str, order_by: str, limit: int
    ) -> str:
        """`CROSS JOIN LATERAL`: one index range scan per outer row, stopped at `limit`."""
        return (
            f" CROSS JOIN LATERAL (SELECT * FROM {table} AS {alias}"
            f" WHERE {where} ORDER BY {order_by} LIMIT {limit}) AS {alias}"
        )


_BINARY = {"bigint": int8s, "int": int4s, "uuid": uuids}


def _array(values: list[Any], pg_type: str) -> Any:
    """A column as an array parameter: binary when its type has an encoder and it holds
    no NULL, else a list psycopg adapts."""
    encode = _BINARY.get(pg_type)
    if encode is None or None in values:
        return values
    return encode(values)


POSTGRES = PostgresDialect()

_inserts: dict[tuple[str, tuple[tuple[str, str], ...]], str] = {}
"""`insert_int_rows` statements by table and columns."""


def _insert_int_rows_sql(table: str, columns: tuple[tuple[str, str], ...]) -> str:
    """INSERT from one two-dimensional bigint array, a row per inserted row, each column
    cast to its type: a third of the server's cost of unnesting one array per column
    (each unnest keeps its own tuplestore)."""
    casts = {"bigint": "", "boolean": " <> 0"}
    values = ", ".join(
        f"r[i][{j}]{casts.get(pg_type, '::' + pg_type)}"
        for j, (_, pg_type) in enumerate(columns, 1)
    )
    names = ", ".join(name for name, _ in columns)
    return (
        f"INSERT INTO {table} ({names}) SELECT {values}"
        " FROM (SELECT %s::bigint[] AS r) AS m, generate_subscripts(m.r, 1) AS i"
    )


class _Sent:
    __slots__ = ("_cursor",)

    def __init__(self, cursor: AsyncCursor[Any]) -> None:
        self._cursor = cursor

    async def fetchall(self) -> list[Row]:
        return await self._cursor.fetchall()

    async def fetchone(self) -> Row | None:
        row: Row | None = await self._cursor.fetchone()
        return row


class PostgresSession:
    __slots__ = ("conn",)

    dialect = POSTGRES

    def __init__(self, conn: Conn) -> None:
        self.conn = conn

    async def execute(self, sql: str, params: Params = ()) -> None:
        await self.conn.execute(pg_sql(sql), params)

    async def executemany(self, sql: str, rows: Sequence[Params]) -> None:
        if not rows:
            return
        async with self.conn.cursor() as cursor:
            await cursor.executemany(pg_sql(sql), rows)

    async def send(self, sql: str, params: Params = ()) -> _Sent:
        return _Sent(await self.conn.execute(pg_sql(sql), params))

    async def fetchall(self, sql: str, params: Params = ()) -> list[Row]:
        cursor = await self.conn.execute(pg_sql(sql), params)
        return await cursor.fetchall()

    async def fetchone(self, sql: str, params: Params = ()) -> Row | None:
        cursor = await self.conn.execute(pg_sql(sql), params)
        row: Row | None = await cursor.fetchone()
        return row

    async def insert_int_rows(
        self, table: str, columns: Sequence[tuple[str, str]], rows: Sequence[Sequence[int]]
    ) -> None:
        if not rows:
            return
        key = (table, tuple(columns))
        sql = _inserts.get(key)
        if sql is None:
            sql = _inserts[key] = _insert_int_rows_sql(table, key[1])
        await self.conn.execute(sql, (int8_rows(rows),))

    async def next_value(self, counter: str) -> int:
        cursor = await self.conn.execute(f"SELECT nextval('{_SEQUENCES[counter]}')")
        row = await cursor.fetchone()
        assert row is not None
        return int(row[0])
