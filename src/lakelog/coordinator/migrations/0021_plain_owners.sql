-- Plain-write owners (issue 32's fault run): which broker may commit a plain producer's
-- batches (no producer id, so no sequence orders them) for a partition and client zone.
-- A broker claims the row before it accepts such a batch and carries the claim's epoch
-- to its commit, which refuses the batch if another broker has claimed since: so two
-- brokers that both think they lead the partition for a moment cannot commit a client's
-- records out of the order it sent them. Epochs come from one counter and are never
-- handed out twice, so a row may be dropped (topic deletion, the row cap) at any time:
-- its owner's uncommitted batches are then refused, which is safe.
CREATE TABLE plain_owners (
    topic_id INTEGER NOT NULL,
    partition INTEGER NOT NULL,
    zone TEXT NOT NULL,
    epoch INTEGER NOT NULL,
    broker_id INTEGER NOT NULL,
    broker_epoch INTEGER NOT NULL,
    PRIMARY KEY (topic_id, partition, zone)
) WITHOUT ROWID;

CREATE INDEX plain_owners_by_epoch ON plain_owners (epoch);

INSERT INTO counters (name, value) VALUES ('plain_owner_epoch', 0);
