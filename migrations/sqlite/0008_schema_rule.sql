-- Kept in step with Postgres' 0009: the migration rule (docs/deploy.md,
-- "Migrations"), in SQLite's own numbering. Each migration records the
-- oldest migration a running binary may have been built with and still use
-- the schema; a binary below the highest floor refuses to start.
-- 0001-0007 were expand steps.
CREATE TABLE IF NOT EXISTS tidemark_schema_rule (
    migration         INTEGER PRIMARY KEY,
    oldest_compatible INTEGER NOT NULL CHECK (oldest_compatible <= migration)
);
INSERT OR IGNORE INTO tidemark_schema_rule (migration, oldest_compatible)
VALUES (1, 1), (2, 1), (3, 1), (4, 1), (5, 1), (6, 1), (7, 1), (8, 1);
