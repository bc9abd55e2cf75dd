"""Versioned schema migrations for PostgreSQL: the numbered files in `migrations_pg`, each
applied once, in order, recorded in `schema_version`.

All pending migrations run in one transaction holding a transaction-level advisory lock, so
brokers starting together against a new database serialize: the first migrates, the others
wait for the lock and then find nothing left to do. PostgreSQL's DDL is transactional, so a
failing migration leaves nothing behind. A schema newer than this build's files is refused
(`migrate.check_not_newer`).
"""

from __future__ import annotations

import time
from importlib.resources import files
from importlib.resources.abc import Traversable
from typing import Any

from psycopg import AsyncConnection

from lakelog.coordinator.migrate import Migration, check_not_newer, load_migrations

MIGRATION_LOCK = 0x6C616B656C6F67  # "lakelog": the advisory lock key migrations hold


def migrations_dir() -> Traversable:
    return files("lakelog.coordinator") / "migrations_pg"


def load_pg_migrations() -> list[Migration]:
    return load_migrations(migrations_dir())


async def applied_versions(conn: AsyncConnection[Any]) -> set[int]:
    cursor = await conn.execute("SELECT to_regclass('schema_version') IS NOT NULL")
    row = await cursor.fetchone()
    if not row or not row[0]:
        return set()
    cursor = await conn.execute("SELECT version FROM schema_version")
    return {r[0] for r in await cursor.fetchall()}


async def apply_postgres(
    conn: AsyncConnection[Any], migrations: list[Migration] | None = None, where: str = "database"
) -> list[int]:
    """Apply the pending migrations on an autocommit connection; returns the versions this
    call applied. Each file is sent as one script (no parameters, so several statements
    are allowed) inside the surrounding transaction."""
    migrations = load_pg_migrations() if migrations is None else migrations
    applied: list[int] = []
    async with conn.transaction():
        await conn.execute("SELECT pg_advisory_xact_lock(%s)", (MIGRATION_LOCK,))
        await conn.execute(
            "CREATE TABLE IF NOT EXISTS schema_version ("
            " version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at BIGINT NOT NULL)"
        )
        done = await applied_versions(conn)
        check_not_newer(done, migrations, where)
        for migration in migrations:
            if migration.version in done:
                continue
            await conn.execute(migration.sql.encode())
            await conn.execute(
                "INSERT INTO schema_version (version, name, applied_at) VALUES (%s, %s, %s)",
                (migration.version, migration.name, time.time_ns() // 1_000_000),
            )
            applied.append(migration.version)
    return applied
