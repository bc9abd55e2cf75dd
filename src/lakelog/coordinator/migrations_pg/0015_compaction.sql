-- Compaction in the broker: per partition, how far the log is clean (the first offset not
-- yet compacted against the keys after it) and the lease that lets one broker at a time
-- compact the partition. A lease whose expiry passed (its broker died) is free to take.
CREATE TABLE compaction_state (
    topic_id BIGINT NOT NULL REFERENCES topics (id) ON DELETE CASCADE,
    partition INTEGER NOT NULL,
    cleaned_offset BIGINT NOT NULL DEFAULT 0,
    tombstones_due BIGINT NOT NULL DEFAULT 0,  -- ms: a kept tombstone may go then (0: none)
    lease_owner INTEGER NOT NULL DEFAULT -1,
    lease_expiry BIGINT NOT NULL DEFAULT 0,   -- ms since the epoch
    PRIMARY KEY (topic_id, partition)
);
