-- The schema registry (Confluent's REST API, served by every broker): schemas by global id,
-- the versions of each subject, references between schemas, and per-subject settings.

-- One row per distinct schema (type, normalized text, references), whatever the subjects:
-- an id is never reused, and registering the same schema again answers the same id.
CREATE TABLE registry_schemas (
    id INTEGER PRIMARY KEY,
    schema_type TEXT NOT NULL,              -- AVRO, JSON, PROTOBUF
    schema_text TEXT NOT NULL,
    refs TEXT NOT NULL,                     -- JSON list of {name, subject, version}
    fingerprint TEXT NOT NULL UNIQUE        -- sha256 of type, normalized form and refs
);

-- A subject's versions; `deleted` is a soft delete (a hard delete removes the row).
CREATE TABLE registry_versions (
    subject TEXT NOT NULL,
    version INTEGER NOT NULL,
    schema_id INTEGER NOT NULL,
    deleted INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (subject, version)
) WITHOUT ROWID;
CREATE INDEX registry_versions_schema ON registry_versions (schema_id);

-- Which subject versions each schema refers to (for referencedby and delete checks).
CREATE TABLE registry_references (
    schema_id INTEGER NOT NULL,
    name TEXT NOT NULL,
    subject TEXT NOT NULL,
    version INTEGER NOT NULL,
    PRIMARY KEY (schema_id, name)
) WITHOUT ROWID;
CREATE INDEX registry_references_target ON registry_references (subject, version);

-- Compatibility level and mode, global ('') and per subject; NULL: not set here.
CREATE TABLE registry_configs (
    subject TEXT PRIMARY KEY,
    compatibility TEXT,
    mode TEXT
) WITHOUT ROWID;
INSERT INTO registry_configs (subject) VALUES ('');
