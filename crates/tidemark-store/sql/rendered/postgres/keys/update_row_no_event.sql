WITH locked AS (
      SELECT ctid AS row_at FROM consumer_keys WHERE table_name = $1 AND branch = $2 AND consumer_id = $3
      FOR UPDATE),
    clock AS (SELECT tidemark_write_now() AS t, row_at FROM locked), written AS (UPDATE consumer_keys SET version = version + 1, epoch = $8, next_snapshot = $9, consumer_created_at = CASE WHEN $10 IS NOT DISTINCT FROM consumer_keys.consumer_created_at THEN $10 ELSE $10 + (clock.t - $6::timestamptz) END, consumer_updated_at = CASE WHEN $11 IS NOT DISTINCT FROM consumer_keys.consumer_updated_at THEN $11 ELSE $11 + (clock.t - $6::timestamptz) END, latest_snapshot = $12, lease_id = $13, lease_holder = $14, lease_epoch = $15, lease_status = $16, lease_ttl_us = $17, lease_acquired_at = CASE WHEN $18 IS NOT DISTINCT FROM consumer_keys.lease_acquired_at THEN $18 ELSE $18 + (clock.t - $6::timestamptz) END, lease_deadline = CASE WHEN $19 IS NOT DISTINCT FROM consumer_keys.lease_deadline THEN $19 ELSE $19 + (clock.t - $6::timestamptz) END, last_batch_id = $20, last_end_snapshot = $21, last_end_index = $22, last_end_full = $23, last_end_total_splits = $24, lease_wrote_consumer = $25, legacy_warned_snapshot = $26, full_scan_pin = $27, lease_principal = $28, lease_peer = $29, lease_client = $30, lease_committed_at = CASE WHEN $31 IS NOT DISTINCT FROM consumer_keys.lease_committed_at THEN $31 ELSE $31 + (clock.t - $6::timestamptz) END, lease_caller_of = $32
         FROM clock
         WHERE ctid = clock.row_at AND version = $4
             AND (NOT $5 OR (lease_status = 1 AND lease_deadline > clock.t))
             AND ($6::timestamptz IS NULL OR $7::int8 IS NULL
                  OR (clock.t >= $6::timestamptz AND clock.t < $6::timestamptz + $7::int8 * interval '1 microsecond')) RETURNING 1) SELECT (SELECT t FROM clock) FROM written
