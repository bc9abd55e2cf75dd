-- __consumer_offsets: the records Kafka's group coordinator would append to it (offset
-- commits, classic group metadata, tombstones), written in the same transaction as the
-- change they record. Offsets come from offsets_topic_heads, one row per partition: a
-- writer holds that row until it commits, so a partition's offsets become visible in
-- order, without gaps filled later. Bounded by compaction (ops/offsets_topic.compact).
CREATE TABLE offsets_topic_heads (
    partition INTEGER PRIMARY KEY,
    next_offset INTEGER NOT NULL            -- the partition's high watermark
) WITHOUT ROWID;

CREATE TABLE offsets_topic_records (
    partition INTEGER NOT NULL,
    log_offset INTEGER NOT NULL,
    record_key BLOB NOT NULL,
    record_value BLOB,                      -- NULL: a tombstone
    timestamp INTEGER NOT NULL,             -- ms since the epoch
    PRIMARY KEY (partition, log_offset)
) WITHOUT ROWID;

-- Compaction finds a key's later records with it.
CREATE INDEX offsets_topic_records_by_key
    ON offsets_topic_records (partition, record_key, log_offset);
