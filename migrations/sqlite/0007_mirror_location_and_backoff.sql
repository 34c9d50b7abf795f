-- Kept in step with Postgres' 0008: each mirror record's location (NULL
-- from a release before this one), and when a failing record may be tried
-- again (microseconds since the epoch; NULL once written).
ALTER TABLE consumer_mirrors ADD COLUMN location TEXT;
ALTER TABLE consumer_mirrors ADD COLUMN retry_at INTEGER;
