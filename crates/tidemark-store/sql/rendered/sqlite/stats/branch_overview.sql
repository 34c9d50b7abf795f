SELECT k.table_name, k.branch, ?2 AS db_now, count(*) AS keys,
                count(*) FILTER (WHERE (k.lease_status = 1 AND k.lease_deadline > ?2)) AS leased,
                count(*) FILTER (WHERE k.next_snapshot IS NOT NULL AND o.expiration_us IS NOT NULL
                                 AND k.consumer_updated_at < ?2 - o.expiration_us AND NOT (k.lease_status = 1 AND k.lease_deadline > ?2)) AS expired,
                min(k.next_snapshot) AS min_next,
                max(CASE WHEN k.latest_snapshot >= k.next_snapshot THEN k.latest_snapshot - k.next_snapshot + 1
                         WHEN k.latest_snapshot IS NOT NULL AND k.next_snapshot IS NOT NULL THEN 0 END)
                  AS worst_reported_lag
         FROM consumer_keys k LEFT JOIN table_options o ON o.table_name = k.table_name
         WHERE (k.next_snapshot IS NOT NULL OR (k.lease_status = 1 AND k.lease_deadline > ?2)) AND (?3 IS NULL OR EXISTS (SELECT 1 FROM json_each(?3) AS p WHERE k.table_name GLOB p.value))
         GROUP BY k.table_name, k.branch ORDER BY k.table_name, k.branch LIMIT ?1
