-- A general write's lease grant and history (keys.rs, `GRANT_AND_HISTORY`),
-- the tail of `update_row.sql` and `insert_row.sql`, after their `written`
-- CTE. Binds ($4 to $6 + EVENT_COLUMNS, `bind_grant_and_history`): $4 bool whether a new
-- lease was granted; $5 principal; $6 request id; $7... the events'
-- columns as arrays (HistoryRow). Holes: {{events}} the history insert.

,
    grant_row AS (
      INSERT INTO lease_grants (lease_id, table_name, branch, consumer_id, epoch, holder, granted_at)
      SELECT w.lease_id, w.table_name, w.branch, w.consumer_id, w.lease_epoch, w.lease_holder, w.lease_acquired_at
      FROM written w WHERE $4),
    events AS ({{events}})
    SELECT count(*), (SELECT t FROM clock) FROM written
