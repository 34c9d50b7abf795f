-- GroupCommit's batched write (group_commit.rs, `WRITE_MANY`): every
-- queued write's values as parallel arrays, one element per write, in key
-- order; why it is shaped so is written above `WRITE_MANY`.
--
-- Binds, in order (`write_many` binds them so):
--   $1  int4[]         each write's place in the batch (0, 1, ...)
--   $2  text[]         table_name
--   $3  text[]         branch
--   $4  text[]         consumer_id
--   $5  int8[]         the row version the write was decided on
--   $6  bool[]         whether it needs the lease live by the database clock
--   $7  timestamptz[]  the decision's estimate of the database clock (or NULL)
--   $8  text[]         principal, for the history row
--   $9  text[]         request id, for the history row
--   $10...             the history event's columns (HistoryRow::bind_pg_arrays,
--                      EVENT_COLUMNS of them); then, numbered on from there:
--   timestamptz[]      when the write was decided (restamping, stamp.rs)
--   int8               how far the estimate may be from the clock (µs)
--   ...                the key row's columns (KeyRow::bind_pg_arrays)
--
-- Holes: {{assignments}} the key row's columns set from their arrays,
-- {{checks}} the compare-and-set predicate, {{logged}} the history insert.

WITH locked AS (
           SELECT v.ord, k.row_at
           FROM unnest($1::int4[], $2::text[], $3::text[], $4::text[]) AS v(ord, table_name, branch, consumer_id)
           CROSS JOIN LATERAL (
             SELECT ctid AS row_at FROM consumer_keys k
             WHERE k.table_name = v.table_name AND k.branch = v.branch AND k.consumer_id = v.consumer_id
             FOR UPDATE SKIP LOCKED) k),
         -- The clock is read once every row is locked (SPEC §1; see keys.rs).
         clock AS (SELECT tidemark_write_now() AS t FROM (SELECT count(*) FROM locked) AS c),
         written AS (
           UPDATE consumer_keys k SET version = k.version + 1, {{assignments}}
           FROM locked l CROSS JOIN clock
           WHERE k.ctid = l.row_at AND {{checks}}
           RETURNING l.ord, k.table_name, k.branch, k.consumer_id),
         logged AS ({{logged}})
         SELECT v.ord, l.ord IS NOT NULL AS locked, w.ord IS NOT NULL AS written, (SELECT t FROM clock) AS at
         FROM unnest($1::int4[]) AS v(ord) LEFT JOIN locked l ON l.ord = v.ord LEFT JOIN written w ON w.ord = v.ord
