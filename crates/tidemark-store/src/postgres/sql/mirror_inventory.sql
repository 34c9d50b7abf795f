-- What the mirror keeper checks (PaimonStore::mirror_inventory): every
-- consumer and live full-scan pin of registered tables, with what its file
-- was last written with (nothing, when written at a location the table
-- has since left). No binds. Holes: {{unexpired}}, {{live_lease}}.

SELECT k.table_name, k.branch, k.consumer_id, t.location, k.next_snapshot, k.consumer_updated_at,
                k.lease_id, CASE WHEN m.location IS NULL OR m.location = t.location THEN m.mirrored_next END
                  AS mirrored_next, coalesce(k.next_snapshot IS NOT NULL AND {{unexpired}}, false) AS kept,
                CASE WHEN k.full_scan_pin IS NOT NULL AND {{live_lease}} THEN k.lease_id END AS pin_lease,
                CASE WHEN k.full_scan_pin IS NOT NULL AND {{live_lease}} THEN k.full_scan_pin END AS pin_snapshot
         FROM paimon_tables t JOIN consumer_keys k ON k.table_name = t.table_name
         LEFT JOIN table_options o ON o.table_name = k.table_name
         LEFT JOIN consumer_mirrors m
           ON m.table_name = k.table_name AND m.branch = k.branch AND m.consumer_id = k.consumer_id
         WHERE k.next_snapshot IS NOT NULL OR (k.full_scan_pin IS NOT NULL AND {{live_lease}})
         ORDER BY k.table_name, k.branch, k.consumer_id
