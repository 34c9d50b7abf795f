-- Kept in step with Postgres' 0010: console sessions kept by the SHA-256 of
-- their id and of their token (times in microseconds since the epoch).
CREATE TABLE IF NOT EXISTS console_sessions (
    id_sha256    BLOB    NOT NULL PRIMARY KEY,
    token_sha256 BLOB    NOT NULL,
    principal    TEXT    NOT NULL,
    created_at   INTEGER NOT NULL,
    expires_at   INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS console_sessions_by_expiry ON console_sessions (expires_at);
-- Expand: a new table.
INSERT OR IGNORE INTO tidemark_schema_rule (migration, oldest_compatible) VALUES (9, 1);
