-- Cluster mirroring (KIP-1279): mirror definitions, per-partition state, and the open
-- mirrored transactions that bound a mirror topic's last stable offset. Times are ms.

CREATE TABLE mirrors (
    name TEXT COLLATE "C" PRIMARY KEY,
    source_bootstrap TEXT NOT NULL,
    source_configs TEXT NOT NULL DEFAULT '{}',  -- JSON object: source client settings
    topics TEXT NOT NULL DEFAULT '[]',          -- JSON array of topic names
    patterns TEXT NOT NULL DEFAULT '[]',        -- JSON array of regular expressions
    task_owner INTEGER NOT NULL DEFAULT -1,     -- broker running the mirror's singleton work
    task_expiry BIGINT NOT NULL DEFAULT 0,
    created_at BIGINT NOT NULL
);

-- One row per mirrored partition. A topic with a row in any state but STOPPED is
-- read-only. The local log end (partitions.high_watermark) is the next offset to copy.
CREATE TABLE mirror_partitions (
    topic_id BIGINT NOT NULL REFERENCES topics (id) ON DELETE CASCADE,
    partition INTEGER NOT NULL,
    mirror_name TEXT COLLATE "C" NOT NULL,
    state TEXT NOT NULL,
    source_epoch INTEGER NOT NULL DEFAULT -1,
    lease_owner INTEGER NOT NULL DEFAULT -1,
    lease_expiry BIGINT NOT NULL DEFAULT 0,
    reason TEXT,
    source_end_offset BIGINT NOT NULL DEFAULT -1,
    source_high_watermark BIGINT NOT NULL DEFAULT -1,
    lag_ms BIGINT NOT NULL DEFAULT 0,
    failover_offset BIGINT NOT NULL DEFAULT -1,
    updated_at BIGINT NOT NULL,
    PRIMARY KEY (topic_id, partition)
);

CREATE INDEX mirror_partitions_by_mirror ON mirror_partitions (mirror_name);
CREATE INDEX mirror_partitions_by_owner ON mirror_partitions (lease_owner);

-- Open transactions of mirrored producers: rebuilt from the mirrored batches (a
-- transactional batch opens, a control batch closes), never copied from the source.
CREATE TABLE mirror_txns (
    topic_id BIGINT NOT NULL REFERENCES topics (id) ON DELETE CASCADE,
    partition INTEGER NOT NULL,
    producer_id BIGINT NOT NULL,
    first_offset BIGINT NOT NULL,
    PRIMARY KEY (topic_id, partition, producer_id)
);

CREATE INDEX mirror_txns_lso ON mirror_txns (topic_id, partition, first_offset);
