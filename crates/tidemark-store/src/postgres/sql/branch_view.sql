-- A branch's options, lowest consumers and lowest live full-scan pins in
-- one statement, so one snapshot (SPEC §8); `branch_view_sql` says why it
-- is shaped so. One row per consumer (kind 0) and pin (kind 1), each with
-- the clock and the options; one row with a NULL kind when there are none.
--
-- Binds: $1 text the table, $2 text the branch.
-- Holes: {{option_columns}}, {{row}} (the key row's columns), {{unexpired}}
-- and {{live_lease}} (predicates), {{consumer_ties}} and {{pin_ties}}
-- (`consumer_ties.sql`, `pin_ties.sql`, or nothing), {{limit}} (written in,
-- not bound, so each limit step has a plan of its own).

WITH head AS (
           SELECT tidemark_now() AS db_now, {{option_columns}}
           FROM (SELECT 1) AS one LEFT JOIN table_options o ON o.table_name = $1),
         holders AS (
           (SELECT 0 AS kind, k.next_snapshot AS fence_position, {{row}}
            FROM consumer_keys k LEFT JOIN table_options o ON o.table_name = k.table_name
            WHERE k.table_name = $1 AND k.branch = $2 AND k.next_snapshot IS NOT NULL AND {{unexpired}}
              {{consumer_ties}}
            ORDER BY k.next_snapshot, k.consumer_id LIMIT {{limit}})
           UNION ALL
           (SELECT 1 AS kind, k.full_scan_pin AS fence_position, {{row}}
            FROM consumer_keys k
            WHERE k.table_name = $1 AND k.branch = $2 AND k.full_scan_pin IS NOT NULL
              AND CASE WHEN {{live_lease}} THEN true ELSE false END
              {{pin_ties}}
            ORDER BY k.full_scan_pin, k.consumer_id LIMIT {{limit}}))
         SELECT head.*, holders.* FROM head LEFT JOIN holders ON true
         ORDER BY holders.kind, holders.fence_position, holders.consumer_id
