-- A batch of one, which skips a row another transaction holds
-- (group_commit.rs, `UPDATE_ROW_ONE_EVENT_UNLESS_LOCKED`): answers whether
-- the row was locked, whether it was written, and the clock. Binds as
-- `update_row_one_event.sql`. Holes: {{update}}, {{one_event}}.

WITH locked AS (
           SELECT ctid AS row_at FROM consumer_keys WHERE table_name = $1 AND branch = $2 AND consumer_id = $3
           FOR UPDATE SKIP LOCKED),
         clock AS (SELECT tidemark_write_now() AS t, row_at FROM locked),
         written AS ({{update}} RETURNING table_name, branch, consumer_id),
         logged AS ({{one_event}})
         SELECT EXISTS (SELECT 1 FROM locked) AS locked, EXISTS (SELECT 1 FROM written) AS written,
                coalesce((SELECT t FROM clock), tidemark_write_now()) AS at
