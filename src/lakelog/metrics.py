"""Prometheus metrics, one registry for the whole broker process.

Every module records into these objects; `/metrics` serves them.
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

REGISTRY = CollectorRegistry(auto_describe=True)

_LATENCY_BUCKETS = (
    0.0005,
    0.001,
    0.0025,
    0.005,
    0.01,
    0.025,
    0.05,
    0.1,
    0.25,
    0.5,
    1.0,
    2.5,
    5.0,
    10.0,
)

requests_total = Counter(
    "lakelog_requests", "Kafka requests handled", ["api", "version"], registry=REGISTRY
)
request_errors_total = Counter(
    "lakelog_request_errors",
    "Requests answered with a top-level failure or a closed connection",
    ["api"],
    registry=REGISTRY,
)
request_latency_seconds = Histogram(
    "lakelog_request_latency_seconds",
    "Time from request read to response queued",
    ["api"],
    buckets=_LATENCY_BUCKETS,
    registry=REGISTRY,
)
bytes_in_total = Counter("lakelog_bytes_in", "Record batch bytes produced", registry=REGISTRY)
bytes_out_total = Counter("lakelog_bytes_out", "Record batch bytes fetched", registry=REGISTRY)
connections = Gauge("lakelog_connections", "Open client connections", registry=REGISTRY)

object_requests_total = Counter(
    "lakelog_object_requests", "Object storage requests", ["op"], registry=REGISTRY
)
object_bytes_total = Counter(
    "lakelog_object_bytes", "Object storage bytes moved", ["op"], registry=REGISTRY
)
object_latency_seconds = Histogram(
    "lakelog_object_latency_seconds",
    "Object storage request latency",
    ["op"],
    buckets=_LATENCY_BUCKETS,
    registry=REGISTRY,
)
object_errors_total = Counter(
    "lakelog_object_errors", "Failed object storage requests", ["op"], registry=REGISTRY
)

coordinator_latency_seconds = Histogram(
    "lakelog_coordinator_latency_seconds",
    "Batch coordinator call latency",
    ["method"],
    buckets=_LATENCY_BUCKETS,
    registry=REGISTRY,
)

cache_hits_total = Counter("lakelog_cache_hits", "Fetch cache hits", registry=REGISTRY)
cache_misses_total = Counter("lakelog_cache_misses", "Fetch cache misses", registry=REGISTRY)
cache_bytes = Gauge("lakelog_cache_bytes", "Bytes held by the fetch cache", registry=REGISTRY)

wal_buffer_bytes = Gauge(
    "lakelog_wal_buffer_bytes", "Bytes in the active WAL buffer", registry=REGISTRY
)
wal_buffers_in_flight = Gauge(
    "lakelog_wal_buffers_in_flight",
    "Sealed WAL buffers uploading or committing",
    registry=REGISTRY,
)
wal_objects_total = Counter("lakelog_wal_objects", "WAL objects committed", registry=REGISTRY)
wal_commit_failures_total = Counter(
    "lakelog_wal_commit_failures",
    "WAL objects whose upload or commit failed",
    ["stage"],
    registry=REGISTRY,
)
retention_deleted_batches_total = Counter(
    "lakelog_retention_deleted_batches", "Batches dropped by retention", registry=REGISTRY
)
files_deleted_total = Counter(
    "lakelog_files_deleted", "Objects deleted by the cleaner", registry=REGISTRY
)

groups = Gauge(
    "lakelog_groups", "Consumer groups on this broker by state", ["state"], registry=REGISTRY
)
group_rebalances_total = Counter(
    "lakelog_group_rebalances", "Group rebalances started", registry=REGISTRY
)
offset_commits_total = Counter(
    "lakelog_offset_commits", "Committed partition offsets", registry=REGISTRY
)
group_lag = Gauge(
    "lakelog_group_lag",
    "Records between a group's committed offset and the log end",
    ["group", "topic", "partition"],
    registry=REGISTRY,
)

zone_bytes_total = Counter(
    "lakelog_zone_bytes",
    "Record bytes by direction, client zone and broker zone",
    ["direction", "client_zone", "broker_zone"],
    registry=REGISTRY,
)
cross_zone_bytes_total = Counter(
    "lakelog_cross_zone_bytes",
    "Record bytes between a client and a broker in different zones",
    ["direction"],
    registry=REGISTRY,
)
