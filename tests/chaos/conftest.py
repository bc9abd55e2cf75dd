"""Chaos tests reuse the e2e broker fixtures; their helpers live in tests/e2e."""

import sys
from pathlib import Path

_E2E = str(Path(__file__).resolve().parent.parent / "e2e")
if _E2E not in sys.path:
    sys.path.insert(0, _E2E)

from e2e_fixtures import (  # noqa: E402
    broker,
    broker_factory,
    pytest_collection_modifyitems,
    pytest_configure,
    pytest_runtest_makereport,
    topic_name,
)

__all__ = [
    "broker",
    "broker_factory",
    "pytest_collection_modifyitems",
    "pytest_configure",
    "pytest_runtest_makereport",
    "topic_name",
]
