WITH locked AS (
           SELECT ctid AS row_at FROM consumer_keys WHERE table_name = $1 AND branch = $2 AND consumer_id = $3
           FOR UPDATE SKIP LOCKED),
         clock AS (SELECT tidemark_write_now() AS t, row_at FROM locked),
         written AS (UPDATE consumer_keys SET version = version + 1, epoch = $19, next_snapshot = $20, consumer_created_at = CASE WHEN $21 IS NOT DISTINCT FROM consumer_keys.consumer_created_at THEN $21 ELSE $21 + (clock.t - $6::timestamptz) END, consumer_updated_at = CASE WHEN $22 IS NOT DISTINCT FROM consumer_keys.consumer_updated_at THEN $22 ELSE $22 + (clock.t - $6::timestamptz) END, latest_snapshot = $23, lease_id = $24, lease_holder = $25, lease_epoch = $26, lease_status = $27, lease_ttl_us = $28, lease_acquired_at = CASE WHEN $29 IS NOT DISTINCT FROM consumer_keys.lease_acquired_at THEN $29 ELSE $29 + (clock.t - $6::timestamptz) END, lease_deadline = CASE WHEN $30 IS NOT DISTINCT FROM consumer_keys.lease_deadline THEN $30 ELSE $30 + (clock.t - $6::timestamptz) END, last_batch_id = $31, last_end_snapshot = $32, last_end_index = $33, last_end_full = $34, last_end_total_splits = $35, lease_wrote_consumer = $36, legacy_warned_snapshot = $37, full_scan_pin = $38, lease_principal = $39, lease_peer = $40, lease_client = $41, lease_committed_at = CASE WHEN $42 IS NOT DISTINCT FROM consumer_keys.lease_committed_at THEN $42 ELSE $42 + (clock.t - $6::timestamptz) END, lease_caller_of = $43
         FROM clock
         WHERE ctid = clock.row_at AND version = $4
             AND (NOT $5 OR (lease_status = 1 AND lease_deadline > clock.t))
             AND ($6::timestamptz IS NULL OR $7::int8 IS NULL
                  OR (clock.t >= $6::timestamptz AND clock.t < $6::timestamptz + $7::int8 * interval '1 microsecond')) RETURNING table_name, branch, consumer_id),
         logged AS (INSERT INTO history (at, table_name, branch, consumer_id, principal, request_id, event, old_next, new_next, epoch, lease_id, batch_id, holder, detail, latest_snapshot) SELECT (SELECT t FROM clock), w.table_name, w.branch, w.consumer_id, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18 FROM written w)
         SELECT EXISTS (SELECT 1 FROM locked) AS locked, EXISTS (SELECT 1 FROM written) AS written,
                coalesce((SELECT t FROM clock), tidemark_write_now()) AS at
