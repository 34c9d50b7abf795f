-- Kept in step with Postgres' 0012: the latest snapshot a commit knew of,
-- on its history row.
ALTER TABLE history ADD COLUMN latest_snapshot INTEGER;
-- Expand: a nullable column.
INSERT OR IGNORE INTO tidemark_schema_rule (migration, oldest_compatible) VALUES (11, 1);
