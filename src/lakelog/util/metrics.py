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
    0.015,
    0.02,
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

event_loop_lag_seconds = Histogram(
    "lakelog_event_loop_lag_seconds",
    "How late a 100 ms timer of the broker's event loop fires: how long requests wait before "
    "the loop even reads them",
    buckets=_LATENCY_BUCKETS,
    registry=REGISTRY,
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
request_outage_total = Counter(
    "lakelog_request_outage",
    "Requests answered with a retriable error because a backend (database, store) was down",
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
sasl_authentications_total = Counter(
    "lakelog_sasl_authentications",
    "SASL logins on the listener, by mechanism and result (ok, failed)",
    ["mechanism", "result"],
    registry=REGISTRY,
)

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
object_put_recovered_total = Counter(
    "lakelog_object_put_recovered",
    "Create-only PUTs whose retry found our own earlier attempt stored (its response was "
    "lost): same size and bytes, so counted as a success",
    registry=REGISTRY,
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
wal_seals_total = Counter(
    "lakelog_wal_seals",
    "WAL buffers sealed, by reason: size, interval, early (no upload in progress and the"
    " buffer worth a PUT at the current load), epoch, flush",
    ["reason"],
    registry=REGISTRY,
)
wal_objects_total = Counter("lakelog_wal_objects", "WAL objects committed", registry=REGISTRY)
wal_inline_files_total = Counter(
    "lakelog_wal_inline_files",
    "WAL buffers committed inline in the coordinator instead of PUT (issue 32)",
    registry=REGISTRY,
)
wal_inline_bytes_total = Counter(
    "lakelog_wal_inline_bytes",
    "Bytes of WAL buffers committed inline in the coordinator (issue 32)",
    registry=REGISTRY,
)
inline_files_moved_total = Counter(
    "lakelog_inline_files_moved",
    "Inline files whose batches the background mover moved into an object",
    registry=REGISTRY,
)
wal_abandoned_batches_total = Counter(
    "lakelog_wal_abandoned_batches",
    "Batches not committed because their client closed the connection before the commit",
    registry=REGISTRY,
)
wal_moved_batches_total = Counter(
    "lakelog_wal_moved_batches",
    "Plain producers' batches refused: another broker leads their partition (this broker's"
    " view) or has claimed it since they were accepted",
    registry=REGISTRY,
)
wal_stale_epoch_batches_total = Counter(
    "lakelog_wal_stale_epoch_batches",
    "Batches refused because their request was read before this broker was fenced",
    registry=REGISTRY,
)
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
compaction_passes_total = Counter(
    "lakelog_compaction_passes",
    "Partitions compacted by this broker, by outcome (committed, changed_meanwhile, lost_lease)",
    ["outcome"],
    registry=REGISTRY,
)
compaction_seconds_total = Counter(
    "lakelog_compaction_seconds",
    "Wall time of this broker's compaction passes, paced waits included",
    registry=REGISTRY,
)
compaction_bytes_total = Counter(
    "lakelog_compaction_bytes",
    "Batch bytes this broker's compaction read (read: both passes), covered (compacted:"
    " the rows of committed passes) and removed",
    ["kind"],
    registry=REGISTRY,
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
offset_commit_batch_requests = Histogram(
    "lakelog_offset_commit_batch_requests",
    "OffsetCommit and TxnOffsetCommit requests written in one coordinator transaction",
    buckets=(1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024),
    registry=REGISTRY,
)
group_lag = Gauge(
    "lakelog_group_lag",
    "Records between a group's committed offset and the log end",
    ["group", "topic", "partition"],
    registry=REGISTRY,
)

transactions_open = Gauge(
    "lakelog_transactions_open",
    "Ongoing transactions whose transactional id this broker coordinates",
    registry=REGISTRY,
)
transaction_commits_total = Counter(
    "lakelog_transaction_commits", "Transactions committed (EndTxn)", registry=REGISTRY
)
transaction_aborts_total = Counter(
    "lakelog_transaction_aborts",
    "Transactions aborted, by the client (EndTxn) or by the timeout loop",
    ["reason"],
    registry=REGISTRY,
)
lso_lag = Gauge(
    "lakelog_lso_lag",
    "High watermark minus last stable offset (partitions with open transactions)",
    ["topic", "partition"],
    registry=REGISTRY,
)
txn_rejected_batches_total = Counter(
    "lakelog_txn_rejected_batches",
    "Transactional batches refused by the commit barrier (fenced producer or late batch)",
    ["error"],
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

# Cluster mirroring (KIP-1279): per-partition lag, throughput, states and fetch buffers.
mirror_lag_records = Gauge(
    "lakelog_mirror_lag_records",
    "Records the source holds below its last stable offset that are not mirrored yet",
    ["mirror", "topic", "partition"],
    registry=REGISTRY,
)
mirror_lag_seconds = Gauge(
    "lakelog_mirror_lag_seconds",
    "Age of the newest mirrored batch while the partition lags (0 when caught up)",
    ["mirror", "topic", "partition"],
    registry=REGISTRY,
)
mirror_bytes_total = Counter(
    "lakelog_mirror_bytes",
    "Record batch bytes mirrored into this cluster",
    ["mirror"],
    registry=REGISTRY,
)
mirror_partitions = Gauge(
    "lakelog_mirror_partitions",
    "Mirrored partitions by state (published by the broker running the mirror's task)",
    ["mirror", "state"],
    registry=REGISTRY,
)
mirror_owned_partitions = Gauge(
    "lakelog_mirror_owned_partitions",
    "Mirrored partitions leased to this broker",
    registry=REGISTRY,
)
mirror_buffer_bytes = Gauge(
    "lakelog_mirror_buffer_bytes",
    "Fetch buffer bytes reserved by mirror fetchers (capped by mirror.max.inflight.bytes)",
    registry=REGISTRY,
)
mirror_buffer_peak_bytes = Gauge(
    "lakelog_mirror_buffer_peak_bytes",
    "Highest fetch buffer reservation since the broker started",
    registry=REGISTRY,
)
mirror_failures_total = Counter(
    "lakelog_mirror_failures",
    "Mirrored partitions moved to FAILED, by cause",
    ["cause"],
    registry=REGISTRY,
)
share_records_total = Counter(
    "lakelog_share_records",
    "Share-group records by what happened to them on this broker: acquired, acknowledged,"
    " released, rejected, archived (GAP), renewed",
    ["group", "topic_id", "partition", "event"],
    registry=REGISTRY,
)
share_partition_records = Gauge(
    "lakelog_share_partition_records",
    "Share-partition records as this broker last stored them: in_flight (between start and"
    " end offset), acquired, available (waiting for redelivery), archived, lag (from the"
    " start offset to the high watermark)",
    ["group", "topic_id", "partition", "kind"],
    registry=REGISTRY,
)
share_archived_total = Counter(
    "lakelog_share_delivery_limit_archived",
    "Share-group records archived because they reached share.delivery.count.limit",
    ["group"],
    registry=REGISTRY,
)

table_lag_records = Gauge(
    "lakelog_table_lag_records",
    "Records of a table topic below its last stable offset that its Iceberg table does not "
    "hold yet (every broker publishes the same value)",
    ["topic"],
    registry=REGISTRY,
)
table_lag_seconds = Gauge(
    "lakelog_table_lag_seconds",
    "Age of a table topic's last table commit while records wait (0 when caught up; absent "
    "before the first commit)",
    ["topic"],
    registry=REGISTRY,
)
table_rows = Gauge(
    "lakelog_table_rows",
    "Rows in a table topic's table (its current snapshot's total-records)",
    ["topic"],
    registry=REGISTRY,
)
table_snapshots = Gauge(
    "lakelog_table_snapshots",
    "Snapshots in a table topic's table metadata",
    ["topic"],
    registry=REGISTRY,
)
