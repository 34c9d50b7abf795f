-- Kept in step with Postgres' 0011: who holds a lease (peer, client, last
-- commit, and the lease they describe).
ALTER TABLE consumer_keys ADD COLUMN lease_peer TEXT;
ALTER TABLE consumer_keys ADD COLUMN lease_client TEXT;
ALTER TABLE consumer_keys ADD COLUMN lease_committed_at INTEGER;
ALTER TABLE consumer_keys ADD COLUMN lease_caller_of BLOB;
-- Expand: nullable columns.
INSERT OR IGNORE INTO tidemark_schema_rule (migration, oldest_compatible) VALUES (10, 1);
