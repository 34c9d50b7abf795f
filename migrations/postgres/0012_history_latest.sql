-- The latest snapshot a commit knew of (issue 55), on its history row: a
-- consumer's lag over time is read back from its ADVANCE rows. NULL on
-- rows written before this column, by a previous release during a rollout,
-- and on events that are not commits.
ALTER TABLE history ADD COLUMN IF NOT EXISTS latest_snapshot bigint;
-- Expand: a nullable column the previous release neither reads nor needs.
INSERT INTO tidemark_schema_rule (migration, oldest_compatible) VALUES (12, 1)
ON CONFLICT (migration) DO NOTHING;
