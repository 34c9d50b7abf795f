-- The row's lock, then the clock (update.rs, `LOCK_THEN_CLOCK`): the CTEs
-- every single-row update starts with. Binds: $1 table_name, $2 branch,
-- $3 consumer_id.

WITH locked AS (
      SELECT ctid AS row_at FROM consumer_keys WHERE table_name = $1 AND branch = $2 AND consumer_id = $3
      FOR UPDATE),
    clock AS (SELECT tidemark_write_now() AS t, row_at FROM locked)
