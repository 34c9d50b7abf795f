,
    grant_row AS (
      INSERT INTO lease_grants (lease_id, table_name, branch, consumer_id, epoch, holder, granted_at)
      SELECT w.lease_id, w.table_name, w.branch, w.consumer_id, w.lease_epoch, w.lease_holder, w.lease_acquired_at
      FROM written w WHERE $4),
    events AS (INSERT INTO history (at, table_name, branch, consumer_id, principal, request_id, event, old_next, new_next, epoch, lease_id, batch_id, holder, detail, latest_snapshot) SELECT (SELECT t FROM clock), w.table_name, w.branch, w.consumer_id, $5, $6, e.event, e.old_next, e.new_next, e.epoch, e.lease_id, e.batch_id, e.holder, e.detail, e.latest_snapshot
             FROM written w, unnest($7::text[], $8::int8[], $9::int8[], $10::int8[], $11::uuid[], $12::int8[], $13::text[], $14::text[], $15::int8[]) AS e(event, old_next, new_next, epoch, lease_id, batch_id, holder, detail, latest_snapshot))
    SELECT count(*), (SELECT t FROM clock) FROM written
