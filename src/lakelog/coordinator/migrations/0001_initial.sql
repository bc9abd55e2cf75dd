-- The batch coordinator's first schema (SQLite). Times are ms since the epoch.

CREATE TABLE topics (
    id INTEGER PRIMARY KEY AUTOINCREMENT,  -- internal; keeps batch rows and indexes small
    topic_uuid TEXT NOT NULL UNIQUE,       -- the Kafka topic id, canonical text form
    name TEXT NOT NULL UNIQUE,
    num_partitions INTEGER NOT NULL,
    replication_factor INTEGER NOT NULL,
    configs TEXT NOT NULL DEFAULT '{}',    -- JSON object of the configs set on the topic
    created_at INTEGER NOT NULL
);

CREATE TABLE partitions (
    topic_id INTEGER NOT NULL REFERENCES topics (id),
    partition INTEGER NOT NULL,
    log_start_offset INTEGER NOT NULL DEFAULT 0,
    high_watermark INTEGER NOT NULL DEFAULT 0,
    byte_size INTEGER NOT NULL DEFAULT 0,        -- bytes of the live batches
    max_timestamp INTEGER NOT NULL DEFAULT -1,   -- largest batch timestamp ever committed
    PRIMARY KEY (topic_id, partition)
) WITHOUT ROWID;

CREATE TABLE files (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    object_key TEXT NOT NULL UNIQUE,
    state TEXT NOT NULL CHECK (state IN ('committed', 'deleting')),
    size INTEGER NOT NULL,
    live_bytes INTEGER NOT NULL,
    uploader_broker_id INTEGER NOT NULL,
    broker_epoch INTEGER NOT NULL,
    committed_at INTEGER NOT NULL,
    marked_at INTEGER
);

CREATE INDEX files_deleting ON files (marked_at) WHERE state = 'deleting';

CREATE TABLE batches (
    id INTEGER PRIMARY KEY,
    topic_id INTEGER NOT NULL,
    partition INTEGER NOT NULL,
    base_offset INTEGER NOT NULL,
    last_offset INTEGER NOT NULL,
    file_id INTEGER NOT NULL REFERENCES files (id),
    byte_offset INTEGER NOT NULL,
    byte_size INTEGER NOT NULL,
    base_timestamp INTEGER NOT NULL,
    max_timestamp INTEGER NOT NULL,
    timestamp_type INTEGER NOT NULL,
    log_append_time INTEGER NOT NULL,
    -- The largest batch timestamp of the partition up to this batch: never decreasing, so
    -- "first batch whose timestamp >= T" is an index seek.
    timestamp_high INTEGER NOT NULL,
    producer_id INTEGER NOT NULL,
    producer_epoch INTEGER NOT NULL,
    base_sequence INTEGER NOT NULL,
    is_transactional INTEGER NOT NULL,
    FOREIGN KEY (topic_id, partition) REFERENCES partitions (topic_id, partition)
);

CREATE UNIQUE INDEX batches_by_last_offset ON batches (topic_id, partition, last_offset);
CREATE INDEX batches_by_timestamp_high
    ON batches (topic_id, partition, timestamp_high, last_offset);
CREATE INDEX batches_by_file ON batches (file_id);

CREATE TABLE producer_state (
    topic_id INTEGER NOT NULL,
    partition INTEGER NOT NULL,
    producer_id INTEGER NOT NULL,
    producer_epoch INTEGER NOT NULL,
    base_sequence INTEGER NOT NULL,
    last_sequence INTEGER NOT NULL,
    base_offset INTEGER NOT NULL,
    last_offset INTEGER NOT NULL,
    PRIMARY KEY (topic_id, partition, producer_id, base_offset)
) WITHOUT ROWID;

CREATE TABLE brokers (
    broker_id INTEGER PRIMARY KEY,
    broker_epoch INTEGER NOT NULL,
    rack TEXT,
    host TEXT NOT NULL,
    port INTEGER NOT NULL,
    registered_at INTEGER NOT NULL,
    last_heartbeat INTEGER NOT NULL
);

-- Monotonic counters: the producer-id sequence and the broker epochs.
CREATE TABLE counters (
    name TEXT PRIMARY KEY,
    value INTEGER NOT NULL
) WITHOUT ROWID;

INSERT INTO counters (name, value) VALUES ('producer_id', 0), ('broker_epoch', 0);
