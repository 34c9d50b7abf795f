-- SPEC §9: Paimon tables registered with their storage location, and what
-- each consumer's Paimon file (consumer/consumer-<id>) shows. Times are
-- microseconds since the epoch, as everywhere in this schema.

CREATE TABLE paimon_tables (
    table_name      TEXT    PRIMARY KEY,
    location        TEXT    NOT NULL,
    registered_at   INTEGER NOT NULL,
    registered_by   TEXT    NOT NULL
) WITHOUT ROWID;

CREATE TABLE consumer_mirrors (
    table_name          TEXT    NOT NULL,
    branch              TEXT    NOT NULL,
    consumer_id         TEXT    NOT NULL,
    mirrored_next       INTEGER,
    mirrored_updated_at INTEGER,
    mirrored_at         INTEGER,
    failures            INTEGER NOT NULL DEFAULT 0,
    last_error          TEXT,
    PRIMARY KEY (table_name, branch, consumer_id)
) WITHOUT ROWID;
