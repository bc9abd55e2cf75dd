-- Transactions (KIP-98): transaction state, markers and aborted ranges. Times are ms.

-- Marker rows live in `batches` with no file: file_id NULL, byte_size 0, control_type
-- 0 (abort) or 1 (commit). SQLite cannot drop NOT NULL in place, so the table is rebuilt.
CREATE TABLE batches_new (
    id INTEGER PRIMARY KEY,
    topic_id INTEGER NOT NULL,
    partition INTEGER NOT NULL,
    base_offset INTEGER NOT NULL,
    last_offset INTEGER NOT NULL,
    file_id INTEGER REFERENCES files (id),
    byte_offset INTEGER NOT NULL,
    byte_size INTEGER NOT NULL,
    base_timestamp INTEGER NOT NULL,
    max_timestamp INTEGER NOT NULL,
    timestamp_type INTEGER NOT NULL,
    log_append_time INTEGER NOT NULL,
    timestamp_high INTEGER NOT NULL,
    producer_id INTEGER NOT NULL,
    producer_epoch INTEGER NOT NULL,
    base_sequence INTEGER NOT NULL,
    is_transactional INTEGER NOT NULL,
    control_type INTEGER NOT NULL DEFAULT -1,
    FOREIGN KEY (topic_id, partition) REFERENCES partitions (topic_id, partition)
);

INSERT INTO batches_new (id, topic_id, partition, base_offset, last_offset, file_id,
    byte_offset, byte_size, base_timestamp, max_timestamp, timestamp_type, log_append_time,
    timestamp_high, producer_id, producer_epoch, base_sequence, is_transactional)
SELECT id, topic_id, partition, base_offset, last_offset, file_id, byte_offset, byte_size,
    base_timestamp, max_timestamp, timestamp_type, log_append_time, timestamp_high,
    producer_id, producer_epoch, base_sequence, is_transactional
FROM batches;

DROP TABLE batches;
ALTER TABLE batches_new RENAME TO batches;

CREATE UNIQUE INDEX batches_by_last_offset ON batches (topic_id, partition, last_offset);
CREATE INDEX batches_by_timestamp_high
    ON batches (topic_id, partition, timestamp_high, last_offset);
CREATE INDEX batches_by_file ON batches (file_id);

-- One row per transactional id. start_time is -1 unless a transaction is Ongoing.
CREATE TABLE transactions (
    transactional_id TEXT PRIMARY KEY,
    producer_id INTEGER NOT NULL,
    producer_epoch INTEGER NOT NULL,
    -- The epoch before a client-requested bump (KIP-360/588), so a retried InitProducerId
    -- is recognized; -1 after a bump that fenced the previous producer.
    last_producer_epoch INTEGER NOT NULL DEFAULT -1,
    state TEXT NOT NULL,
    timeout_ms INTEGER NOT NULL,
    start_time INTEGER NOT NULL DEFAULT -1,
    updated_at INTEGER NOT NULL
) WITHOUT ROWID;

CREATE INDEX transactions_by_producer ON transactions (producer_id);
CREATE INDEX transactions_ongoing ON transactions (start_time) WHERE state = 'Ongoing';

-- Partitions of the ongoing transactions. first_offset is -1 until the transaction's first
-- batch commits there; the last stable offset is the smallest first_offset >= 0.
CREATE TABLE txn_partitions (
    transactional_id TEXT NOT NULL REFERENCES transactions (transactional_id),
    topic_id INTEGER NOT NULL,
    partition INTEGER NOT NULL,
    first_offset INTEGER NOT NULL DEFAULT -1,
    PRIMARY KEY (transactional_id, topic_id, partition)
) WITHOUT ROWID;

CREATE INDEX txn_partitions_lso ON txn_partitions (topic_id, partition, first_offset);

-- Groups added to the ongoing transactions (AddOffsetsToTxn).
CREATE TABLE txn_groups (
    transactional_id TEXT NOT NULL REFERENCES transactions (transactional_id),
    group_id TEXT NOT NULL,
    PRIMARY KEY (transactional_id, group_id)
) WITHOUT ROWID;

-- Offsets staged by TxnOffsetCommit, applied to group_offsets when the transaction commits.
CREATE TABLE txn_offsets (
    transactional_id TEXT NOT NULL REFERENCES transactions (transactional_id),
    group_id TEXT NOT NULL,
    topic TEXT NOT NULL,
    partition INTEGER NOT NULL,
    committed_offset INTEGER NOT NULL,
    leader_epoch INTEGER NOT NULL DEFAULT -1,
    metadata TEXT,
    PRIMARY KEY (transactional_id, group_id, topic, partition)
) WITHOUT ROWID;

CREATE INDEX txn_offsets_by_group ON txn_offsets (group_id, topic, partition);

-- Aborted ranges per partition: [first_offset, marker_offset]. Kept while the marker is
-- in the log (retention and DeleteRecords drop them with the batches).
CREATE TABLE aborted_txns (
    topic_id INTEGER NOT NULL,
    partition INTEGER NOT NULL,
    marker_offset INTEGER NOT NULL,
    producer_id INTEGER NOT NULL,
    first_offset INTEGER NOT NULL,
    PRIMARY KEY (topic_id, partition, marker_offset)
) WITHOUT ROWID;
