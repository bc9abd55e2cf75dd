-- The batch coordinator's first schema (PostgreSQL), the twin of the SQLite one. Times are
-- ms since the epoch. Text that is sorted or compared uses COLLATE "C": byte order, as in
-- SQLite, whatever locale the database was created with.

CREATE TABLE topics (
    id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,  -- internal; small batch rows
    topic_uuid UUID NOT NULL UNIQUE,                     -- the Kafka topic id
    name TEXT COLLATE "C" NOT NULL UNIQUE,
    num_partitions INTEGER NOT NULL,
    replication_factor INTEGER NOT NULL,
    configs JSONB NOT NULL DEFAULT '{}',  -- the configs set on the topic
    created_at BIGINT NOT NULL
);

-- Writers lock the rows they change (SELECT ... FOR UPDATE) in (topic_id, partition) order.
CREATE TABLE partitions (
    topic_id BIGINT NOT NULL REFERENCES topics (id),
    partition INTEGER NOT NULL,
    log_start_offset BIGINT NOT NULL DEFAULT 0,
    high_watermark BIGINT NOT NULL DEFAULT 0,
    byte_size BIGINT NOT NULL DEFAULT 0,        -- bytes of the live batches
    max_timestamp BIGINT NOT NULL DEFAULT -1,   -- largest batch timestamp ever committed
    PRIMARY KEY (topic_id, partition)
);

CREATE TABLE files (
    id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    object_key TEXT COLLATE "C" NOT NULL UNIQUE,
    state TEXT NOT NULL CHECK (state IN ('committed', 'deleting')),
    size BIGINT NOT NULL,
    live_bytes BIGINT NOT NULL,
    uploader_broker_id INTEGER NOT NULL,
    broker_epoch BIGINT NOT NULL,
    committed_at BIGINT NOT NULL,
    marked_at BIGINT
);

CREATE INDEX files_deleting ON files (marked_at) WHERE state = 'deleting';

CREATE TABLE batches (
    id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    topic_id BIGINT NOT NULL,
    partition INTEGER NOT NULL,
    base_offset BIGINT NOT NULL,
    last_offset BIGINT NOT NULL,
    file_id BIGINT NOT NULL REFERENCES files (id),
    byte_offset BIGINT NOT NULL,
    byte_size BIGINT NOT NULL,
    base_timestamp BIGINT NOT NULL,
    max_timestamp BIGINT NOT NULL,
    timestamp_type SMALLINT NOT NULL,
    log_append_time BIGINT NOT NULL,
    -- The largest batch timestamp of the partition up to this batch: never decreasing, so
    -- "first batch whose timestamp >= T" is an index seek.
    timestamp_high BIGINT NOT NULL,
    producer_id BIGINT NOT NULL,
    producer_epoch INTEGER NOT NULL,
    base_sequence INTEGER NOT NULL,
    is_transactional BOOLEAN NOT NULL,
    FOREIGN KEY (topic_id, partition) REFERENCES partitions (topic_id, partition)
);

CREATE UNIQUE INDEX batches_by_last_offset ON batches (topic_id, partition, last_offset);
CREATE INDEX batches_by_timestamp_high
    ON batches (topic_id, partition, timestamp_high, last_offset);
CREATE INDEX batches_by_file ON batches (file_id);

CREATE TABLE producer_state (
    topic_id BIGINT NOT NULL,
    partition INTEGER NOT NULL,
    producer_id BIGINT NOT NULL,
    producer_epoch INTEGER NOT NULL,
    base_sequence INTEGER NOT NULL,
    last_sequence INTEGER NOT NULL,
    base_offset BIGINT NOT NULL,
    last_offset BIGINT NOT NULL,
    PRIMARY KEY (topic_id, partition, producer_id, base_offset)
);

CREATE TABLE brokers (
    broker_id INTEGER PRIMARY KEY,
    broker_epoch BIGINT NOT NULL,
    rack TEXT,
    host TEXT NOT NULL,
    port INTEGER NOT NULL,
    registered_at BIGINT NOT NULL,
    last_heartbeat BIGINT NOT NULL
);

-- Monotonic counters. Sequences never hand a value out twice, even when the transaction
-- that drew it rolls back, and never block other brokers.
CREATE SEQUENCE producer_ids AS BIGINT MINVALUE 0 START 0;
CREATE SEQUENCE broker_epochs AS BIGINT MINVALUE 1 START 1;
