"""End-to-end fixtures: real broker processes (see `e2e_fixtures`)."""

from e2e_fixtures import (
    broker,
    broker_factory,
    pytest_collection_modifyitems,
    pytest_configure,
    pytest_runtest_makereport,
    shared_broker,
    shared_broker_process,
    topic_name,
)

__all__ = [
    "broker",
    "broker_factory",
    "pytest_collection_modifyitems",
    "pytest_configure",
    "pytest_runtest_makereport",
    "shared_broker",
    "shared_broker_process",
    "topic_name",
]
