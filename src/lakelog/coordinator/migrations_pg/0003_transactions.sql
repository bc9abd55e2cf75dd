-- Transactions (KIP-98): transaction state, markers and aborted ranges. Times are ms.

-- Marker rows live in `batches` with no file: file_id NULL, byte_size 0, control_type
-- 0 (abort) or 1 (commit).
ALTER TABLE batches ALTER COLUMN file_id DROP NOT NULL;
ALTER TABLE batches ADD COLUMN control_type SMALLINT NOT NULL DEFAULT -1;

-- One row per transactional id. start_time is -1 unless a transaction is Ongoing.
CREATE TABLE transactions (
    transactional_id TEXT COLLATE "C" PRIMARY KEY,
    producer_id BIGINT NOT NULL,
    producer_epoch INTEGER NOT NULL,
    -- The epoch before a client-requested bump (KIP-360/588), so a retried InitProducerId
    -- is recognized; -1 after a bump that fenced the previous producer.
    last_producer_epoch INTEGER NOT NULL DEFAULT -1,
    state TEXT NOT NULL,
    timeout_ms INTEGER NOT NULL,
    start_time BIGINT NOT NULL DEFAULT -1,
    updated_at BIGINT NOT NULL
);

CREATE INDEX transactions_by_producer ON transactions (producer_id);
CREATE INDEX transactions_ongoing ON transactions (start_time) WHERE state = 'Ongoing';

-- Partitions of the ongoing transactions. first_offset is -1 until the transaction's first
-- batch commits there; the last stable offset is the smallest first_offset >= 0.
CREATE TABLE txn_partitions (
    transactional_id TEXT COLLATE "C" NOT NULL REFERENCES transactions (transactional_id),
    topic_id BIGINT NOT NULL,
    partition INTEGER NOT NULL,
    first_offset BIGINT NOT NULL DEFAULT -1,
    PRIMARY KEY (transactional_id, topic_id, partition)
);

CREATE INDEX txn_partitions_lso ON txn_partitions (topic_id, partition, first_offset);

-- Groups added to the ongoing transactions (AddOffsetsToTxn).
CREATE TABLE txn_groups (
    transactional_id TEXT COLLATE "C" NOT NULL REFERENCES transactions (transactional_id),
    group_id TEXT COLLATE "C" NOT NULL,
    PRIMARY KEY (transactional_id, group_id)
);

-- Offsets staged by TxnOffsetCommit, applied to group_offsets when the transaction commits.
CREATE TABLE txn_offsets (
    transactional_id TEXT COLLATE "C" NOT NULL REFERENCES transactions (transactional_id),
    group_id TEXT COLLATE "C" NOT NULL,
    topic TEXT COLLATE "C" NOT NULL,
    partition INTEGER NOT NULL,
    committed_offset BIGINT NOT NULL,
    leader_epoch INTEGER NOT NULL DEFAULT -1,
    metadata TEXT,
    PRIMARY KEY (transactional_id, group_id, topic, partition)
);

CREATE INDEX txn_offsets_by_group ON txn_offsets (group_id, topic, partition);

-- Aborted ranges per partition: [first_offset, marker_offset]. Kept while the marker is
-- in the log (retention and DeleteRecords drop them with the batches).
CREATE TABLE aborted_txns (
    topic_id BIGINT NOT NULL,
    partition INTEGER NOT NULL,
    marker_offset BIGINT NOT NULL,
    producer_id BIGINT NOT NULL,
    first_offset BIGINT NOT NULL,
    PRIMARY KEY (topic_id, partition, marker_offset)
);
