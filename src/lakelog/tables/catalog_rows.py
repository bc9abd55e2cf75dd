"""Read-only queries of the Iceberg SQL catalog's two tables (`iceberg_tables`,
`iceberg_namespace_properties`, pyiceberg's SqlCatalog layout) in the coordinator's
database, for the broker's REST catalog.

Why not through pyiceberg or the coordinator's engine: the broker must not load
pyiceberg (nor pyarrow), and these reads are a handful of bounded SELECTs that need no
transaction of the coordinator's. SQLite is opened read-only (`mode=ro`) on a worker
thread, PostgreSQL in a read-only session with a statement timeout; at most
`MAX_CONCURRENT` queries run at once. A missing table (nothing created the catalog yet)
reads as empty."""

from __future__ import annotations

import asyncio
import sqlite3
import time
from collections.abc import Sequence
from typing import Any
from urllib.parse import quote

from lakelog.coordinator import SQLITE_SCHEME, sqlite_path

MAX_CONCURRENT = 4
MAX_NAMESPACES = 10_000
"""Distinct namespaces read at most (the catalog holds one per table topic family)."""
MAX_PROPERTIES = 1_000
TIMEOUT_S = 10.0
PROBE_AGAIN_S = 60.0


class CatalogUnavailable(Exception):
    """The database did not answer (down, locked past the timeout)."""


class CatalogRows:
    def __init__(self, coordinator_url: str, catalog_name: str) -> None:
        self.catalog_name = catalog_name
        sqlite = coordinator_url.startswith(SQLITE_SCHEME)
        self._sqlite_path = str(sqlite_path(coordinator_url)) if sqlite else None
        self._pg_url = None if self._sqlite_path else coordinator_url
        self._gate = asyncio.Semaphore(MAX_CONCURRENT)
        self._typed: bool | None = None
        self._probed_at = 0.0
        """Whether iceberg_tables has pyiceberg's `iceberg_type` column (views excluded)."""

    async def _query(self, sql: str, params: Sequence[Any]) -> list[tuple[Any, ...]]:
        async with self._gate:
            try:
                if self._sqlite_path is not None:
                    return await asyncio.to_thread(self._sqlite, sql, params)
                return await self._postgres(sql, params)
            except _MissingTable:
                return []

    def _sqlite(self, sql: str, params: Sequence[Any]) -> list[tuple[Any, ...]]:
        assert self._sqlite_path is not None
        uri = f"file:{quote(self._sqlite_path)}?mode=ro"
        try:
            conn = sqlite3.connect(uri, uri=True, timeout=TIMEOUT_S)
        except sqlite3.Error as exc:
            raise CatalogUnavailable(str(exc)) from exc
        try:
            return conn.execute(sql, tuple(params)).fetchall()
        except sqlite3.OperationalError as exc:
            if "no such table" in str(exc) or "no such column" in str(exc):
                raise _MissingTable from exc
            raise CatalogUnavailable(str(exc)) from exc
        finally:
            conn.close()

    async def _postgres(self, sql: str, params: Sequence[Any]) -> list[tuple[Any, ...]]:
        import psycopg
        from psycopg import errors

        assert self._pg_url is not None
        options = (
            f"-c default_transaction_read_only=on -c statement_timeout={int(TIMEOUT_S * 1000)}"
        )
        try:
            async with await psycopg.AsyncConnection.connect(
                self._pg_url, connect_timeout=int(TIMEOUT_S), options=options, autocommit=True
            ) as conn:
                cursor = await conn.execute(sql.replace("?", "%s"), tuple(params))  # type: ignore[arg-type]
                return await cursor.fetchall()
        except (errors.UndefinedTable, errors.UndefinedColumn) as exc:
            raise _MissingTable from exc
        except psycopg.Error as exc:
            raise CatalogUnavailable(str(exc)) from exc

    async def _type_filter(self) -> str:
        # A "no" is asked again after a while: the catalog's tables may be created later.
        stale = time.monotonic() - self._probed_at > PROBE_AGAIN_S
        if self._typed is None or (not self._typed and stale):
            self._typed = await self._probe()
            self._probed_at = time.monotonic()
        return " AND (iceberg_type IS NULL OR iceberg_type = 'TABLE')" if self._typed else ""

    async def _probe(self) -> bool:
        async with self._gate:
            try:
                if self._sqlite_path is not None:
                    await asyncio.to_thread(
                        self._sqlite, "SELECT iceberg_type FROM iceberg_tables LIMIT 0", ()
                    )
                else:
                    await self._postgres("SELECT iceberg_type FROM iceberg_tables LIMIT 0", ())
            except _MissingTable:
                return False
        return True

    async def namespaces(self) -> list[str]:
        """Every namespace (dotted, as SqlCatalog stores it) with a table or a property."""
        found: set[str] = set()
        for sql in (
            "SELECT DISTINCT table_namespace FROM iceberg_tables WHERE catalog_name = ? LIMIT ?",
            "SELECT DISTINCT namespace FROM iceberg_namespace_properties "
            "WHERE catalog_name = ? LIMIT ?",
        ):
            rows = await self._query(sql, (self.catalog_name, MAX_NAMESPACES))
            found.update(str(row[0]) for row in rows)
        return sorted(found)[:MAX_NAMESPACES]

    async def namespace_properties(self, namespace: str) -> dict[str, str] | None:
        """A namespace's properties, or None when it does not exist (as SqlCatalog decides:
        it, or a namespace below it, has a table or a property)."""
        rows = await self._query(
            "SELECT property_key, property_value FROM iceberg_namespace_properties "
            "WHERE catalog_name = ? AND namespace = ? LIMIT ?",
            (self.catalog_name, namespace, MAX_PROPERTIES),
        )
        if rows:
            return {str(k): str(v) for k, v in rows}
        below = namespace + "."
        for sql in (
            "SELECT 1 FROM iceberg_tables WHERE catalog_name = ? AND (table_namespace = ? "
            "OR substr(table_namespace, 1, ?) = ?) LIMIT 1",
            "SELECT 1 FROM iceberg_namespace_properties WHERE catalog_name = ? AND "
            "(namespace = ? OR substr(namespace, 1, ?) = ?) LIMIT 1",
        ):
            if await self._query(sql, (self.catalog_name, namespace, len(below), below)):
                return {}
        return None

    async def tables(self, namespace: str, after: str, limit: int) -> list[str]:
        """Up to `limit` table names of a namespace after `after`, in name order."""
        kinds = await self._type_filter()
        rows = await self._query(
            "SELECT table_name FROM iceberg_tables WHERE catalog_name = ? AND "
            f"table_namespace = ? AND table_name > ?{kinds} ORDER BY table_name LIMIT ?",
            (self.catalog_name, namespace, after, limit),
        )
        return [str(row[0]) for row in rows]

    async def metadata_location(self, namespace: str, table: str) -> str | None:
        kinds = await self._type_filter()
        rows = await self._query(
            "SELECT metadata_location FROM iceberg_tables WHERE catalog_name = ? AND "
            f"table_namespace = ? AND table_name = ?{kinds}",
            (self.catalog_name, namespace, table),
        )
        if not rows or not rows[0][0]:
            return None
        return str(rows[0][0])


class _MissingTable(Exception):
    pass
