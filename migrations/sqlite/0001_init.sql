-- tidemark schema, SQLite flavour (the embedded default). Same shape as the
-- Postgres schema; times are INTEGER microseconds since the Unix epoch and
-- UUIDs are 16-byte BLOBs.

CREATE TABLE consumer_keys (
    table_name              TEXT    NOT NULL,
    branch                  TEXT    NOT NULL,
    consumer_id             TEXT    NOT NULL,
    version                 INTEGER NOT NULL,
    epoch                   INTEGER NOT NULL,
    next_snapshot           INTEGER,
    consumer_created_at     INTEGER,
    consumer_updated_at     INTEGER,
    latest_snapshot         INTEGER,
    lease_id                BLOB,
    lease_holder            TEXT,
    lease_epoch             INTEGER,
    lease_status            INTEGER,
    lease_ttl_us            INTEGER,
    lease_acquired_at       INTEGER,
    lease_deadline          INTEGER,
    last_batch_id           INTEGER,
    last_end_snapshot       INTEGER,
    last_end_index          INTEGER,
    last_end_full           INTEGER,
    last_end_total_splits   INTEGER,
    lease_wrote_consumer    INTEGER,
    legacy_warned_snapshot  INTEGER,
    full_scan_pin           INTEGER,
    PRIMARY KEY (table_name, branch, consumer_id),
    CONSTRAINT next_snapshot_positive CHECK (next_snapshot IS NULL OR next_snapshot >= 1),
    CONSTRAINT consumer_complete CHECK ((next_snapshot IS NULL) = (consumer_updated_at IS NULL)),
    CONSTRAINT epoch_covers_lease CHECK (lease_epoch IS NULL OR lease_epoch <= epoch)
) WITHOUT ROWID;

CREATE INDEX consumer_keys_by_position
    ON consumer_keys (table_name, branch, next_snapshot, consumer_id)
    WHERE next_snapshot IS NOT NULL;

CREATE TABLE lease_grants (
    lease_id    BLOB    PRIMARY KEY,
    table_name  TEXT    NOT NULL,
    branch      TEXT    NOT NULL,
    consumer_id TEXT    NOT NULL,
    epoch       INTEGER NOT NULL,
    holder      TEXT    NOT NULL,
    granted_at  INTEGER NOT NULL
) WITHOUT ROWID;

CREATE TABLE history (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    at          INTEGER NOT NULL,
    table_name  TEXT    NOT NULL,
    branch      TEXT    NOT NULL,
    consumer_id TEXT    NOT NULL,
    event       TEXT    NOT NULL,
    old_next    INTEGER,
    new_next    INTEGER,
    epoch       INTEGER,
    lease_id    BLOB,
    batch_id    INTEGER,
    holder      TEXT,
    principal   TEXT    NOT NULL,
    request_id  TEXT    NOT NULL,
    detail      TEXT
);

CREATE INDEX history_by_key ON history (table_name, branch, consumer_id, id);
