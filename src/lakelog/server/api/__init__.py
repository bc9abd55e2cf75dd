"""Kafka API handlers, one module per family. Importing this package fills the handler
table that ApiVersions advertises."""

from lakelog.server.api import (  # noqa: F401
    acls,
    admin,
    api_versions,
    configs,
    consumer_groups,
    describe_cluster,
    describe_topics,
    fetch,
    groups,
    log_dirs,
    metadata,
    offsets,
    partitions_admin,
    placement,
    produce,
    producer_id,
    quorum,
    scram_credentials,
    share_admin,
    share_fetch,
    share_groups,
    transactions,
    transactions_admin,
)
