-- A sparse time index replaces the per-batch index on timestamp_high: one row per
-- partition per commit, (its timestamp_high, its last offset) after the commit, instead of
-- an index entry per batch (16 per partition in a full object). timestamp_high never
-- decreases with the offset, so the last mark below a timestamp bounds where a search by
-- timestamp starts; a missing mark only makes that scan longer. The batch index cost about
-- a quarter of a full object's commit.
DROP INDEX batches_by_timestamp_high;

CREATE TABLE time_index (
    topic_id BIGINT NOT NULL,
    partition INTEGER NOT NULL,
    timestamp_high BIGINT NOT NULL,
    last_offset BIGINT NOT NULL,
    PRIMARY KEY (topic_id, partition, timestamp_high, last_offset)
);

INSERT INTO time_index (topic_id, partition, timestamp_high, last_offset)
SELECT topic_id, partition, MAX(timestamp_high), MAX(last_offset)
FROM batches GROUP BY topic_id, partition, file_id;
