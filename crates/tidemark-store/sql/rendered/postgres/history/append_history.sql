INSERT INTO history (at, table_name, branch, consumer_id, principal, request_id, event, old_next, new_next, epoch, lease_id, batch_id, holder, detail) SELECT tidemark_now(), $1, $2, $3, $4, $5, e.event, e.old_next, e.new_next, e.epoch, e.lease_id, e.batch_id, e.holder, e.detail
         FROM unnest($6::text[], $7::int8[], $8::int8[], $9::int8[], $10::uuid[], $11::int8[], $12::text[], $13::text[]) WITH ORDINALITY AS e(event, old_next, new_next, epoch, lease_id, batch_id, holder, detail, n)
         ORDER BY e.n
