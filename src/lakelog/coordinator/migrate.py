"""Versioned schema migrations: numbered `.sql` files, each applied once, in order.

The `schema_version` table records what was applied. All pending migrations run in one
`BEGIN IMMEDIATE` transaction, so two processes opening the same new file at once
serialize: the second waits for the write lock, then finds nothing left to do. A database
that records a version this build has no file for was written by a newer build: it is
refused before anything is read or written (`SchemaTooNewError`), as an older build cannot
know what the newer tables mean.
"""

from __future__ import annotations

import re
import sqlite3
import time
from dataclasses import dataclass
from importlib.resources import files
from importlib.resources.abc import Traversable

_NAME = re.compile(r"^(\d{4})_[a-z0-9_]+\.sql$")


@dataclass(frozen=True, slots=True)
class Migration:
    version: int
    name: str
    sql: str


class SchemaTooNewError(RuntimeError):
    """The coordinator's database was migrated by a newer Lakelog than this one."""


def check_not_newer(applied: set[int], migrations: list[Migration], where: str) -> None:
    """SchemaTooNewError when `applied` holds a version beyond the newest this build knows:
    running on it could misread or overwrite what the newer build wrote."""
    known = max((m.version for m in migrations), default=0)
    newest = max(applied, default=0)
    if newest > known:
        raise SchemaTooNewError(
            f"the coordinator {where} has schema version {newest}, newer than this"
            f" Lakelog build knows ({known}): run a Lakelog at least as new as the one"
            " that wrote it"
        )


def migrations_dir() -> Traversable:
    return files("lakelog.coordinator") / "migrations"


def load_migrations(directory: Traversable | None = None) -> list[Migration]:
    """The migrations in `directory` (default: the packaged SQLite ones), by version."""
    directory = directory or migrations_dir()
    found: dict[int, Migration] = {}
    for entry in directory.iterdir():
        match = _NAME.match(entry.name)
        if not match:
            continue
        version = int(match.group(1))
        if version in found:
            raise ValueError(f"two migrations numbered {version}: {entry.name}")
        found[version] = Migration(version, entry.name, entry.read_text(encoding="utf-8"))
    return [found[v] for v in sorted(found)]


def split_statements(script: str) -> list[str]:
    """Split a script into statements, because `executescript` would commit the
    surrounding transaction."""
    statements: list[str] = []
    pending = ""
    for line in script.splitlines(keepends=True):
        pending += line
        if sqlite3.complete_statement(pending):
            statement = pending.strip()
            if _has_code(statement):
                statements.append(statement)
            pending = ""
    if _has_code(pending):
        raise ValueError(f"incomplete SQL statement at the end: {pending.strip()[:80]!r}")
    return statements


def _has_code(sql: str) -> bool:
    return any(line.strip() and not line.strip().startswith("--") for line in sql.splitlines())


def applied_versions(conn: sqlite3.Connection) -> set[int]:
    exists = conn.execute(
        "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'schema_version'"
    ).fetchone()
    if not exists:
        return set()
    return {row[0] for row in conn.execute("SELECT version FROM schema_version")}


def apply_sqlite(
    conn: sqlite3.Connection, migrations: list[Migration] | None = None, where: str = "database"
) -> list[int]:
    """Apply the pending migrations on a connection in autocommit mode
    (isolation_level=None); returns the versions this call applied."""
    migrations = load_migrations() if migrations is None else migrations
    conn.execute("BEGIN IMMEDIATE")
    try:
        conn.execute(
            "CREATE TABLE IF NOT EXISTS schema_version ("
            " version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at INTEGER NOT NULL)"
        )
        done = applied_versions(conn)
        check_not_newer(done, migrations, where)
        applied: list[int] = []
        for migration in migrations:
            if migration.version in done:
                continue
            for statement in split_statements(migration.sql):
                conn.execute(statement)
            conn.execute(
                "INSERT INTO schema_version (version, name, applied_at) VALUES (?, ?, ?)",
                (migration.version, migration.name, time.time_ns() // 1_000_000),
            )
            applied.append(migration.version)
        conn.execute("COMMIT")
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise
    return applied
