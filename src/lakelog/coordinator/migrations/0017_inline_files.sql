-- Inline files (issue 32): a small WAL object's bytes kept in the coordinator instead of the
-- object store, written in the same transaction as its `files` row and batch rows, and
-- deleted with that row (`delete_files`). Keys are `inline/<uuid7>`; the broker moves them
-- into ordinary objects in the background, so the table stays small.
CREATE TABLE inline_files (
    object_key TEXT PRIMARY KEY,
    data BLOB NOT NULL
) WITHOUT ROWID;
