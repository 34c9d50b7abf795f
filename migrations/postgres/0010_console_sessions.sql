-- Console sessions any replica honours (docs/operations.md, "Console
-- sessions"): a browser's session id is kept only as its SHA-256, and the
-- token it signed in with only as the token's SHA-256 (the credentials
-- file's own form), so what is at rest opens nothing. Sign-out deletes the
-- row, which every replica reads on every request.
CREATE TABLE IF NOT EXISTS console_sessions (
    id_sha256    bytea       PRIMARY KEY,
    token_sha256 bytea       NOT NULL,
    principal    text        NOT NULL,
    created_at   timestamptz NOT NULL,
    expires_at   timestamptz NOT NULL
);
CREATE INDEX IF NOT EXISTS console_sessions_by_expiry ON console_sessions (expires_at);
-- Expand: a new table.
INSERT INTO tidemark_schema_rule (migration, oldest_compatible) VALUES (10, 1)
ON CONFLICT (migration) DO NOTHING;
