"""The coordinator contract suite runs every test against every implementation.

A backend is a function that makes a fresh, empty database and returns its URL; instances
are opened with `open_coordinator(url)`, so a second instance on the same database is just
another open. On PostgreSQL each test gets a fresh schema of one shared database (the URL
puts it first in the search_path), which is several times faster than a database each.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from contract_support import OpenInstance
from postgres_support import PostgresSchemas, schema_url

from lakelog.coordinator import BatchCoordinator, open_coordinator


@dataclass(frozen=True)
class Backend:
    name: str
    new_database: Callable[[pytest.FixtureRequest, Path], str]
    """A fresh database for the test, as a coordinator URL; the request serves to reach
    session fixtures and register cleanups, the path is the test's scratch directory."""


def _sqlite(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    return f"sqlite://{tmp_path / 'db' / 'coordinator.sqlite3'}"


@pytest.fixture(scope="session")
def postgres_schemas(postgres_url: str) -> Iterator[PostgresSchemas]:
    schemas = PostgresSchemas(postgres_url)
    try:
        yield schemas
    finally:
        schemas.close()


def _postgres(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    schemas: PostgresSchemas = request.getfixturevalue("postgres_schemas")
    name = schemas.create()
    request.addfinalizer(lambda: schemas.drop(name))
    return schema_url(schemas.server_url, name)


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
