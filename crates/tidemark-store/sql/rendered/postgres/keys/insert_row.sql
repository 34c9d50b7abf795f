WITH clock AS (SELECT tidemark_write_now() AS t),
         written AS (
           INSERT INTO consumer_keys (table_name, branch, consumer_id, version, epoch, next_snapshot, consumer_created_at, consumer_updated_at, latest_snapshot, lease_id, lease_holder, lease_epoch, lease_status, lease_ttl_us, lease_acquired_at, lease_deadline, last_batch_id, last_end_snapshot, last_end_index, last_end_full, last_end_total_splits, lease_wrote_consumer, legacy_warned_snapshot, full_scan_pin, lease_principal, lease_peer, lease_client, lease_committed_at, lease_caller_of)
           VALUES ($1, $2, $3, 1, $17, $18, $19 + ((SELECT t FROM clock) - $16::timestamptz), $20 + ((SELECT t FROM clock) - $16::timestamptz), $21, $22, $23, $24, $25, $26, $27 + ((SELECT t FROM clock) - $16::timestamptz), $28 + ((SELECT t FROM clock) - $16::timestamptz), $29, $30, $31, $32, $33, $34, $35, $36, $37, $38, $39, $40 + ((SELECT t FROM clock) - $16::timestamptz), $41)
           ON CONFLICT DO NOTHING RETURNING table_name, branch, consumer_id, lease_id, lease_epoch, lease_holder, lease_acquired_at),
    grant_row AS (
      INSERT INTO lease_grants (lease_id, table_name, branch, consumer_id, epoch, holder, granted_at)
      SELECT w.lease_id, w.table_name, w.branch, w.consumer_id, w.lease_epoch, w.lease_holder, w.lease_acquired_at
      FROM written w WHERE $4),
    events AS (INSERT INTO history (at, table_name, branch, consumer_id, principal, request_id, event, old_next, new_next, epoch, lease_id, batch_id, holder, detail, latest_snapshot) SELECT (SELECT t FROM clock), w.table_name, w.branch, w.consumer_id, $5, $6, e.event, e.old_next, e.new_next, e.epoch, e.lease_id, e.batch_id, e.holder, e.detail, e.latest_snapshot
             FROM written w, unnest($7::text[], $8::int8[], $9::int8[], $10::int8[], $11::uuid[], $12::int8[], $13::text[], $14::text[], $15::int8[]) AS e(event, old_next, new_next, epoch, lease_id, batch_id, holder, detail, latest_snapshot))
    SELECT count(*), (SELECT t FROM clock) FROM written
