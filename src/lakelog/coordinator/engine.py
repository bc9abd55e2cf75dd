"""The SQL-engine seam: what a coordinator operation may ask of the database.

An operation (see `coordinator/ops/`) is one `async def op(s: Session, *args)` that runs
inside one transaction its engine opened. It reads and writes through the `Session` below
and never sees a driver: SQL is written once, with `?` placeholders, in the subset both
engines speak (ON CONFLICT upserts, RETURNING, row values). What differs lives in the
engine's `Dialect` (SQL fragments, parameter shapes) and in its session (how statements
travel, counters).

Engines:
- SQLite (`sqlite/engine.py`): the body runs on the coordinator's one database thread,
  driven to completion without an event loop (`drive`), inside `BEGIN IMMEDIATE`.
- PostgreSQL (`postgres/engine.py`): the body runs on a pooled connection in pipeline
  mode; `execute` and `send` do not wait, a round trip happens only when a result is
  read, so statements whose answers nobody reads travel together.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Coroutine, Sequence
from typing import Any, Protocol, TypeVar
from uuid import UUID

T = TypeVar("T")

Row = tuple[Any, ...]
Params = Sequence[Any]
Columns = Sequence[tuple[str, str]]
"""(name, PostgreSQL type) pairs."""
KeyRows = Sequence[Sequence[Any]]
Fragment = tuple[str, list[Any]]
"""A piece of SQL and its parameters."""


class Pending(Protocol):
    """A statement sent whose rows are read later (PostgreSQL: in pipeline mode, reading is
    the round trip, so several `send`s before the first read share one)."""

    async def fetchall(self) -> list[Row]: ...

    async def fetchone(self) -> Row | None: ...


class Dialect(Protocol):
    """Where the two SQL dialects differ, as fragments and parameter shapes."""

    name: str
    """"sqlite" or "postgresql"."""

    for_update: str
    """Suffix that locks the selected rows until the transaction ends (" FOR UPDATE" on
    PostgreSQL; "" on SQLite, whose one writer already holds the database)."""

    def lock(self, clause: str) -> str:
        """A locking clause PostgreSQL needs besides FOR UPDATE (`lock("KEY SHARE")`,
        `lock("SHARE")`, `lock("UPDATE SKIP LOCKED")`): " FOR <clause>" there, "" on
        SQLite, whose one writer already holds the database."""
        ...

    def uuid(self, value: UUID) -> Any:
        """A topic id as a parameter (SQLite stores the canonical text, PostgreSQL UUID)."""
        ...

    def to_uuid(self, value: Any) -> UUID:
        """A topic id read from a row."""
        ...

    def json(self, value: dict[str, Any]) -> Any:
        """A JSON object as a parameter (SQLite TEXT, PostgreSQL JSONB)."""
        ...

    def from_json(self, value: Any) -> dict[str, Any]:
        """A JSON object read from a row."""
        ...

    def keyset(
        self, alias: str, columns: Columns, rows: KeyRows, ordinality: str | None = None
    ) -> Fragment:
        """A FROM item `alias (column, ...)` holding `rows`, for set-wise statements: the
        SQL fragment and its parameters. `columns` are (name, PostgreSQL type) pairs;
        with `ordinality`, a further column of that name numbers the rows from 1.
        PostgreSQL: `unnest` of one array per column; SQLite: `json_each` of one JSON
        parameter. Either way one parameter list, however many rows."""
        ...

    def join_each(self, table: str, alias: str, on: str) -> str:
        """A join of `table` (as `alias`) to the rows before it, matched by `on`, that
        looks each row up by index: PostgreSQL's planner may hash-join a keyset of unknown
        size against a whole table, so there it is a LATERAL subquery (one index scan per
        row); SQLite's nested loop already is that."""
        ...

    def first_rows_join(
        self, table: str, alias: str, key: str, where: str, order_by: str, limit: int
    ) -> str:
        """A join clause bringing, for each row of the FROM items before it, the first
        `limit` rows of `table` (as `alias`) meeting `where` (which may name those items)
        in `order_by` order: one query for "the first page of each partition".
        PostgreSQL: `CROSS JOIN LATERAL`; SQLite, which has no LATERAL: a join on `key`
        (the table's unique row id) IN a correlated subquery with that LIMIT."""
        ...


class Session(Protocol):
    """One transaction's statements. Placeholders are `?`."""

    dialect: Dialect

    async def execute(self, sql: str, params: Params = ()) -> None:
        """Run a statement whose rows nobody reads (PostgreSQL: sent, not waited for)."""
        ...

    async def executemany(self, sql: str, rows: Sequence[Params]) -> None: ...

    async def send(self, sql: str, params: Params = ()) -> Pending: ...

    async def fetchall(self, sql: str, params: Params = ()) -> list[Row]: ...

    async def fetchone(self, sql: str, params: Params = ()) -> Row | None: ...

    async def insert_int_rows(
        self, table: str, columns: Sequence[tuple[str, str]], rows: Sequence[Sequence[int]]
    ) -> None:
        """Insert rows of integers (columns are (name, PostgreSQL type) pairs; a boolean
        column takes 0 or 1): the hot path's bulk write. SQLite: one prepared INSERT run
        per row; PostgreSQL: one two-dimensional bigint array in binary format, not
        waited for."""
        ...

    async def next_value(self, counter: str) -> int:
        """The next value of a cluster-wide counter ("producer_id" from 0, "broker_epoch"
        from 1) that never repeats. SQLite: a row of `counters`; PostgreSQL: a sequence
        (drawing never waits for another transaction)."""
        ...


Op = Callable[..., Awaitable[T]]
"""An operation: `async def op(s: Session, *args) -> T`."""


def drive(coro: Coroutine[Any, Any, T]) -> T:
    """Run a coroutine that never suspends (one awaiting only a SQLite session) to its end,
    on the calling thread, without an event loop."""
    try:
        coro.send(None)
    except StopIteration as stop:
        return stop.value  # type: ignore[no-any-return]
    coro.close()
    raise RuntimeError("a coordinator operation awaited something other than its session")
