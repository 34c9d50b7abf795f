WITH locked AS (
      SELECT ctid AS row_at FROM consumer_keys WHERE table_name = $1 AND branch = $2 AND consumer_id = $3
      FOR UPDATE),
    clock AS (SELECT tidemark_write_now() AS t, row_at FROM locked), written AS (UPDATE consumer_keys SET version = version + 1, epoch = $20, next_snapshot = $21, consumer_created_at = CASE WHEN $22 IS NOT DISTINCT FROM consumer_keys.consumer_created_at THEN $22 ELSE $22 + (clock.t - $18::timestamptz) END, consumer_updated_at = CASE WHEN $23 IS NOT DISTINCT FROM consumer_keys.consumer_updated_at THEN $23 ELSE $23 + (clock.t - $18::timestamptz) END, latest_snapshot = $24, lease_id = $25, lease_holder = $26, lease_epoch = $27, lease_status = $28, lease_ttl_us = $29, lease_acquired_at = CASE WHEN $30 IS NOT DISTINCT FROM consumer_keys.lease_acquired_at THEN $30 ELSE $30 + (clock.t - $18::timestamptz) END, lease_deadline = CASE WHEN $31 IS NOT DISTINCT FROM consumer_keys.lease_deadline THEN $31 ELSE $31 + (clock.t - $18::timestamptz) END, last_batch_id = $32, last_end_snapshot = $33, last_end_index = $34, last_end_full = $35, last_end_total_splits = $36, lease_wrote_consumer = $37, legacy_warned_snapshot = $38, full_scan_pin = $39, lease_principal = $40, lease_peer = $41, lease_client = $42, lease_committed_at = CASE WHEN $43 IS NOT DISTINCT FROM consumer_keys.lease_committed_at THEN $43 ELSE $43 + (clock.t - $18::timestamptz) END, lease_caller_of = $44
         FROM clock
         WHERE ctid = clock.row_at AND version = $16
             AND (NOT $17 OR (lease_status = 1 AND lease_deadline > clock.t))
             AND ($18::timestamptz IS NULL OR $19::int8 IS NULL
                  OR (clock.t >= $18::timestamptz AND clock.t < $18::timestamptz + $19::int8 * interval '1 microsecond')) RETURNING table_name, branch, consumer_id, lease_id, lease_epoch, lease_holder, lease_acquired_at),
    grant_row AS (
      INSERT INTO lease_grants (lease_id, table_name, branch, consumer_id, epoch, holder, granted_at)
      SELECT w.lease_id, w.table_name, w.branch, w.consumer_id, w.lease_epoch, w.lease_holder, w.lease_acquired_at
      FROM written w WHERE $4),
    events AS (INSERT INTO history (at, table_name, branch, consumer_id, principal, request_id, event, old_next, new_next, epoch, lease_id, batch_id, holder, detail, latest_snapshot) SELECT (SELECT t FROM clock), w.table_name, w.branch, w.consumer_id, $5, $6, e.event, e.old_next, e.new_next, e.epoch, e.lease_id, e.batch_id, e.holder, e.detail, e.latest_snapshot
             FROM written w, unnest($7::text[], $8::int8[], $9::int8[], $10::int8[], $11::uuid[], $12::int8[], $13::text[], $14::text[], $15::int8[]) AS e(event, old_next, new_next, epoch, lease_id, batch_id, holder, detail, latest_snapshot))
    SELECT count(*), (SELECT t FROM clock) FROM written
