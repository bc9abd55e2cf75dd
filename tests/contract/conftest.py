"""The coordinator contract suite runs every test against every implementation.

A backend is a function that makes a fresh, empty database and returns its URL; instances
are opened with `open_coordinator(url)`, so a second instance on the same database is just
another open. Adding PostgreSQL is one more entry in BACKENDS.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
from contract_support import OpenInstance

from lakelog.coordinator import BatchCoordinator, open_coordinator


@dataclass(frozen=True)
class Backend:
    name: str
    new_database: Callable[[Path], str]
    """A fresh database under the given scratch directory, as a coordinator URL."""


def _sqlite(tmp_path: Path) -> str:
    return f"sqlite://{tmp_path / 'db' / 'coordinator.sqlite3'}"


BACKENDS = [Backend("sqlite", _sqlite)]


@pytest.fixture(params=BACKENDS, ids=lambda backend: backend.name)
def coordinator_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    backend: Backend = request.param
    return backend.new_database(tmp_path)


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
