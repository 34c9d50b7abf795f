-- Per-table consumer options (SPEC E1), indexes for fences, expiration,
-- operator listings and pruning.

CREATE TABLE table_options (
    table_name      TEXT    PRIMARY KEY,
    expiration_us   INTEGER CHECK (expiration_us IS NULL OR expiration_us > 0),
    changelog_only  INTEGER NOT NULL DEFAULT 0,
    mode            TEXT    CHECK (mode IS NULL OR mode IN ('exactly-once', 'at-least-once')),
    version         INTEGER NOT NULL,
    updated_at      INTEGER NOT NULL,
    updated_by      TEXT    NOT NULL
) WITHOUT ROWID;

CREATE INDEX consumer_keys_by_pin
    ON consumer_keys (table_name, branch, full_scan_pin, consumer_id)
    WHERE full_scan_pin IS NOT NULL;

CREATE INDEX consumer_keys_by_idle
    ON consumer_keys (table_name, consumer_updated_at)
    WHERE next_snapshot IS NOT NULL;

CREATE INDEX history_by_table ON history (table_name, id);
CREATE INDEX history_by_time ON history (at);
CREATE INDEX lease_grants_by_time ON lease_grants (granted_at);
