-- KIP-848 consumer groups (group.protocol=consumer). The state machine's own document
-- (members, epochs, target and current assignments) is stored whole as JSON text; the
-- columns beside it are what other queries need (listing, offset expiry, ordering).
CREATE TABLE consumer_groups (
    group_id TEXT PRIMARY KEY,
    state TEXT NOT NULL,                    -- Empty, Assigning, Reconciling, Stable
    group_epoch INTEGER NOT NULL,
    revision INTEGER NOT NULL,              -- a save only replaces an older revision
    document TEXT NOT NULL,
    updated_at INTEGER NOT NULL
) WITHOUT ROWID;
