-- Consumer groups: committed offsets and classic group records. Times are ms since the epoch.

-- Keyed by topic name, as Kafka does: a group may commit for a topic that is gone.
CREATE TABLE group_offsets (
    group_id TEXT COLLATE "C" NOT NULL,
    topic TEXT COLLATE "C" NOT NULL,
    partition INTEGER NOT NULL,
    committed_offset BIGINT NOT NULL,
    leader_epoch INTEGER NOT NULL DEFAULT -1,
    metadata TEXT,                          -- NULL and '' are different, as on the wire
    commit_time BIGINT NOT NULL,
    PRIMARY KEY (group_id, topic, partition)
);

CREATE INDEX group_offsets_by_commit_time ON group_offsets (commit_time);
CREATE INDEX group_offsets_by_topic ON group_offsets (topic);

CREATE TABLE groups (
    group_id TEXT COLLATE "C" PRIMARY KEY,
    state TEXT NOT NULL,
    protocol_type TEXT,
    protocol TEXT,
    generation INTEGER NOT NULL,
    leader TEXT,
    updated_at BIGINT NOT NULL
);

-- Members in the record's order; `position` keeps it, since member ids are the group
-- coordinator's business. Saving a group rewrites all of its members.
CREATE TABLE group_members (
    group_id TEXT COLLATE "C" NOT NULL REFERENCES groups (group_id) ON DELETE CASCADE,
    position INTEGER NOT NULL,
    member_id TEXT NOT NULL,
    group_instance_id TEXT,
    client_id TEXT NOT NULL,
    client_host TEXT NOT NULL,
    rebalance_timeout_ms INTEGER NOT NULL,
    session_timeout_ms INTEGER NOT NULL,
    assignment BYTEA NOT NULL,
    PRIMARY KEY (group_id, position)
);

-- Each member's (protocol name, metadata) pairs in its order of preference.
CREATE TABLE group_member_protocols (
    group_id TEXT COLLATE "C" NOT NULL,
    member_position INTEGER NOT NULL,
    position INTEGER NOT NULL,
    name TEXT NOT NULL,
    metadata BYTEA NOT NULL,
    PRIMARY KEY (group_id, member_position, position),
    FOREIGN KEY (group_id, member_position)
        REFERENCES group_members (group_id, position) ON DELETE CASCADE
);
