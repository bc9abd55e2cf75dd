"""CLI tests run `lakelog` as a user does, against real broker processes (tests/e2e's)."""

import sys
from pathlib import Path

_E2E = str(Path(__file__).resolve().parent.parent / "e2e")
if _E2E not in sys.path:
    sys.path.insert(0, _E2E)

from e2e_fixtures import (  # noqa: E402
    pytest_collection_modifyitems,
    pytest_configure,
    pytest_runtest_makereport,
)

__all__ = ["pytest_collection_modifyitems", "pytest_configure", "pytest_runtest_makereport"]
