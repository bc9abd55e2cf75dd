"""Kafka API handlers, one module per family. Importing this package fills the handler
table that ApiVersions advertises."""

from lakelog.api import (  # noqa: F401
    admin,
    api_versions,
    configs,
    consumer_groups,
    fetch,
    groups,
    metadata,
    offsets,
    produce,
    producer_id,
    transactions,
    transactions_admin,
)
