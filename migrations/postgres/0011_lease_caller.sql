-- Who holds a lease (issue 55): the peer address the grant was asked from
-- (behind a proxy, the proxy's), the client's name and version (its
-- user-agent, at most 128 characters), and when it last committed a new
-- batch. `lease_caller_of` is the lease these describe: a release that
-- predates these columns writes a new grant without touching them, and a
-- reader ignores values left by an earlier lease. When the lease was last
-- renewed needs no column: a grant, a renewal and a commit all set the
-- deadline to that moment plus the ttl.
ALTER TABLE consumer_keys ADD COLUMN IF NOT EXISTS lease_peer text;
ALTER TABLE consumer_keys ADD COLUMN IF NOT EXISTS lease_client text;
ALTER TABLE consumer_keys ADD COLUMN IF NOT EXISTS lease_committed_at timestamptz;
ALTER TABLE consumer_keys ADD COLUMN IF NOT EXISTS lease_caller_of uuid;
-- Expand: nullable columns the previous release neither reads nor needs.
INSERT INTO tidemark_schema_rule (migration, oldest_compatible) VALUES (11, 1)
ON CONFLICT (migration) DO NOTHING;
