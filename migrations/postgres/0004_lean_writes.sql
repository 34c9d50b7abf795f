-- Fewer index writes per commit (the hot path):
--
-- * consumer_keys_by_idle made every commit a non-HOT update (the indexed
--   consumer_updated_at changes on every write). The sweeper finds idle
--   consumers per table through the primary key instead. With it gone, a
--   commit that leaves next_snapshot alone can be a HOT update; leave room
--   on each page for that.
-- * history_by_time (a b-tree insert per history row) becomes a BRIN index:
--   rows arrive in time order, and it only serves pruning.
DROP INDEX IF EXISTS consumer_keys_by_idle;
ALTER TABLE consumer_keys SET (fillfactor = 80);
DROP INDEX IF EXISTS history_by_time;
CREATE INDEX history_by_time ON history USING brin (at);

-- One b-tree fewer per history row: the per-key index becomes the primary
-- key (id stays unique: it is an identity column). Listing by table keeps
-- history_by_table; pruning finds old rows through the BRIN index.
ALTER TABLE history DROP CONSTRAINT history_pkey;
ALTER TABLE history ADD PRIMARY KEY (table_name, branch, consumer_id, id);
DROP INDEX IF EXISTS history_by_key;
