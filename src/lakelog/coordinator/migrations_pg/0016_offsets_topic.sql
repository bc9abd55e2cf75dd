-- __consumer_offsets: the records Kafka's group coordinator would append to it (offset
-- commits, classic group metadata, tombstones), written in the same transaction as the
-- change they record. Offsets come from offsets_topic_heads, one row per partition: a
-- writer holds that row until it commits, so a partition's offsets become visible in
-- order, without gaps filled later. Bounded by compaction (ops/offsets_topic.compact).
CREATE TABLE offsets_topic_heads (
    partition INTEGER PRIMARY KEY,
    next_offset BIGINT NOT NULL             -- the partition's high watermark
);

CREATE TABLE offsets_topic_records (
    partition INTEGER NOT NULL,
    log_offset BIGINT NOT NULL,
    record_key BYTEA NOT NULL,
    record_value BYTEA,                     -- NULL: a tombstone
    timestamp BIGINT NOT NULL,              -- ms since the epoch
    PRIMARY KEY (partition, log_offset)
);

-- Compaction finds a key's later records with it.
CREATE INDEX offsets_topic_records_by_key
    ON offsets_topic_records (partition, record_key, log_offset);
