"""The coordinator contract suite runs every test against every implementation.

A backend is a function that makes a fresh, empty database and returns its URL; instances
are opened with `open_coordinator(url)`, so a second instance on the same database is just
another open. PostgreSQL databases are cloned from a template migrated once per session
(`CREATE DATABASE ... TEMPLATE`), which is much faster than migrating each one.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

import psycopg
import pytest
from contract_support import OpenInstance

from lakelog.coordinator import BatchCoordinator, open_coordinator
from lakelog.coordinator.postgres.migrate import apply_postgres


@dataclass(frozen=True)
class Backend:
    name: str
    new_database: Callable[[pytest.FixtureRequest, Path], str]
    """A fresh database for the test, as a coordinator URL; the request serves to reach
    session fixtures and register cleanups, the path is the test's scratch directory."""


def _sqlite(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    return f"sqlite://{tmp_path / 'db' / 'coordinator.sqlite3'}"


def database_url(server_url: str, name: str) -> str:
    """The server's URL with another database name."""
    return urlsplit(server_url)._replace(path=f"/{name}").geturl()


class PostgresDatabases:
    """Makes and drops per-test databases on one server, from a migrated template."""

    def __init__(self, server_url: str) -> None:
        self.server_url = server_url
        self.prefix = f"lakelog_test_{uuid.uuid4().hex[:8]}"
        self.template = f"{self.prefix}_template"
        self._admin = psycopg.connect(server_url, autocommit=True)
        self._admin.execute(f'CREATE DATABASE "{self.template}"')
        asyncio.run(self._migrate(database_url(server_url, self.template)))

    @staticmethod
    async def _migrate(url: str) -> None:
        async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
            await apply_postgres(conn)

    def create(self) -> str:
        name = f"{self.prefix}_{uuid.uuid4().hex[:12]}"
        self._admin.execute(f'CREATE DATABASE "{name}" TEMPLATE "{self.template}"')
        return name

    def drop(self, name: str) -> None:
        self._admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')

    def close(self) -> None:
        self.drop(self.template)
        self._admin.close()


@pytest.fixture(scope="session")
def postgres_databases(postgres_url: str) -> Iterator[PostgresDatabases]:
    databases = PostgresDatabases(postgres_url)
    try:
        yield databases
    finally:
        databases.close()


def _postgres(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    databases: PostgresDatabases = request.getfixturevalue("postgres_databases")
    name = databases.create()
    request.addfinalizer(lambda: databases.drop(name))
    return database_url(databases.server_url, name)


BACKENDS = [Backend("sqlite", _sqlite), Backend("postgres", _postgres)]


@pytest.fixture(params=BACKENDS, ids=lambda backend: backend.name)
def coordinator_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    backend: Backend = request.param
    return backend.new_database(request, tmp_path)


@pytest.fixture
async def open_instance(coordinator_url: str) -> AsyncIterator[OpenInstance]:
    """Opens (and at the end closes) another started instance on the test's database."""
    opened: list[BatchCoordinator] = []

    async def open_() -> BatchCoordinator:
        instance = open_coordinator(coordinator_url)
        await instance.start()
        opened.append(instance)
        return instance

    yield open_
    for instance in opened:
        await instance.close()


@pytest.fixture
async def coordinator(open_instance: OpenInstance) -> BatchCoordinator:
    return await open_instance()
