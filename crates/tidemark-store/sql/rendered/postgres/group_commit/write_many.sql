WITH locked AS (
           SELECT v.ord, k.row_at
           FROM unnest($1::int4[], $2::text[], $3::text[], $4::text[]) AS v(ord, table_name, branch, consumer_id)
           CROSS JOIN LATERAL (
             SELECT ctid AS row_at FROM consumer_keys k
             WHERE k.table_name = v.table_name AND k.branch = v.branch AND k.consumer_id = v.consumer_id
             FOR UPDATE SKIP LOCKED) k),
         -- The clock is read once every row is locked (SPEC §1; see keys.rs).
         clock AS (SELECT tidemark_write_now() AS t FROM (SELECT count(*) FROM locked) AS c),
         written AS (
           UPDATE consumer_keys k SET version = k.version + 1, epoch = ($21::int8[])[l.ord + 1], next_snapshot = ($22::int8[])[l.ord + 1], consumer_created_at = CASE WHEN ($23::timestamptz[])[l.ord + 1] IS NOT DISTINCT FROM k.consumer_created_at THEN ($23::timestamptz[])[l.ord + 1] ELSE ($23::timestamptz[])[l.ord + 1] + (clock.t - ($19::timestamptz[])[l.ord + 1]) END, consumer_updated_at = CASE WHEN ($24::timestamptz[])[l.ord + 1] IS NOT DISTINCT FROM k.consumer_updated_at THEN ($24::timestamptz[])[l.ord + 1] ELSE ($24::timestamptz[])[l.ord + 1] + (clock.t - ($19::timestamptz[])[l.ord + 1]) END, latest_snapshot = ($25::int8[])[l.ord + 1], lease_id = ($26::uuid[])[l.ord + 1], lease_holder = ($27::text[])[l.ord + 1], lease_epoch = ($28::int8[])[l.ord + 1], lease_status = ($29::int2[])[l.ord + 1], lease_ttl_us = ($30::int8[])[l.ord + 1], lease_acquired_at = CASE WHEN ($31::timestamptz[])[l.ord + 1] IS NOT DISTINCT FROM k.lease_acquired_at THEN ($31::timestamptz[])[l.ord + 1] ELSE ($31::timestamptz[])[l.ord + 1] + (clock.t - ($19::timestamptz[])[l.ord + 1]) END, lease_deadline = CASE WHEN ($32::timestamptz[])[l.ord + 1] IS NOT DISTINCT FROM k.lease_deadline THEN ($32::timestamptz[])[l.ord + 1] ELSE ($32::timestamptz[])[l.ord + 1] + (clock.t - ($19::timestamptz[])[l.ord + 1]) END, last_batch_id = ($33::int8[])[l.ord + 1], last_end_snapshot = ($34::int8[])[l.ord + 1], last_end_index = ($35::int8[])[l.ord + 1], last_end_full = ($36::bool[])[l.ord + 1], last_end_total_splits = ($37::int8[])[l.ord + 1], lease_wrote_consumer = ($38::bool[])[l.ord + 1], legacy_warned_snapshot = ($39::int8[])[l.ord + 1], full_scan_pin = ($40::int8[])[l.ord + 1], lease_principal = ($41::text[])[l.ord + 1], lease_peer = ($42::text[])[l.ord + 1], lease_client = ($43::text[])[l.ord + 1], lease_committed_at = CASE WHEN ($44::timestamptz[])[l.ord + 1] IS NOT DISTINCT FROM k.lease_committed_at THEN ($44::timestamptz[])[l.ord + 1] ELSE ($44::timestamptz[])[l.ord + 1] + (clock.t - ($19::timestamptz[])[l.ord + 1]) END, lease_caller_of = ($45::uuid[])[l.ord + 1]
           FROM locked l CROSS JOIN clock
           WHERE k.ctid = l.row_at AND k.version = ($5::int8[])[l.ord + 1]
             AND (NOT ($6::bool[])[l.ord + 1] OR (k.lease_status = 1 AND k.lease_deadline > clock.t))
             AND (($7::timestamptz[])[l.ord + 1] IS NULL OR $20::int8 IS NULL
                  OR (clock.t >= ($7::timestamptz[])[l.ord + 1] AND clock.t < ($7::timestamptz[])[l.ord + 1] + $20::int8 * interval '1 microsecond'))
           RETURNING l.ord, k.table_name, k.branch, k.consumer_id),
         logged AS (INSERT INTO history (at, table_name, branch, consumer_id, principal, request_id, event, old_next, new_next, epoch, lease_id, batch_id, holder, detail, latest_snapshot) SELECT (SELECT t FROM clock), w.table_name, w.branch, w.consumer_id, ($8::text[])[w.ord + 1], ($9::text[])[w.ord + 1],
                    ($10::text[])[w.ord + 1], ($11::int8[])[w.ord + 1], ($12::int8[])[w.ord + 1], ($13::int8[])[w.ord + 1], ($14::uuid[])[w.ord + 1], ($15::int8[])[w.ord + 1], ($16::text[])[w.ord + 1], ($17::text[])[w.ord + 1], ($18::int8[])[w.ord + 1]
             FROM written w ORDER BY w.ord)
         SELECT v.ord, l.ord IS NOT NULL AS locked, w.ord IS NOT NULL AS written, (SELECT t FROM clock) AS at
         FROM unnest($1::int4[]) AS v(ord) LEFT JOIN locked l ON l.ord = v.ord LEFT JOIN written w ON w.ord = v.ord
