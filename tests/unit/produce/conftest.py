"""A real SQLite coordinator in the test's own directory, for the WAL writer's tests."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from lakelog.coordinator import open_coordinator
from lakelog.coordinator.interface import BatchCoordinator


@pytest.fixture
async def coordinator(tmp_path: Path) -> AsyncIterator[BatchCoordinator]:
    coord = open_coordinator(f"sqlite:///{tmp_path}/c.sqlite3")
    await coord.start()
    yield coord
    await coord.close()
