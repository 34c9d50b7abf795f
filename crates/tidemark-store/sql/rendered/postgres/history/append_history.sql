INSERT INTO history (at, table_name, branch, consumer_id, principal, request_id, event, old_next, new_next, epoch, lease_id, batch_id, holder, detail, latest_snapshot) SELECT tidemark_now(), $1, $2, $3, $4, $5, e.event, e.old_next, e.new_next, e.epoch, e.lease_id, e.batch_id, e.holder, e.detail, e.latest_snapshot
         FROM unnest($6::text[], $7::int8[], $8::int8[], $9::int8[], $10::uuid[], $11::int8[], $12::text[], $13::text[], $14::int8[]) WITH ORDINALITY AS e(event, old_next, new_next, epoch, lease_id, batch_id, holder, detail, latest_snapshot, n)
         ORDER BY e.n
