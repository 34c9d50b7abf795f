-- What the mirror keeper checks, on SQLite (see postgres/sql/mirror_inventory.sql).
-- Binds: ?1 the clock (µs). Sent as one line.

SELECT k.table_name, k.branch, k.consumer_id, t.location, k.next_snapshot,
    k.consumer_updated_at, k.lease_id,
    CASE WHEN m.location IS NULL OR m.location = t.location THEN m.mirrored_next END AS mirrored_next, coalesce(k.next_snapshot IS NOT NULL AND (o.expiration_us IS NULL
    OR k.consumer_updated_at >= ?1 - o.expiration_us OR (k.lease_status = 1 AND k.lease_deadline > ?1)), 0) AS kept,
    CASE WHEN k.full_scan_pin IS NOT NULL AND k.lease_status = 1 AND k.lease_deadline > ?1 THEN k.lease_id END
    AS pin_lease,
    CASE WHEN k.full_scan_pin IS NOT NULL AND k.lease_status = 1 AND k.lease_deadline > ?1 THEN k.full_scan_pin END
    AS pin_snapshot
    FROM paimon_tables t JOIN consumer_keys k ON k.table_name = t.table_name
    LEFT JOIN table_options o ON o.table_name = k.table_name
    LEFT JOIN consumer_mirrors m ON m.table_name = k.table_name AND m.branch = k.branch
    AND m.consumer_id = k.consumer_id
    WHERE k.next_snapshot IS NOT NULL OR (k.full_scan_pin IS NOT NULL AND k.lease_status = 1 AND k.lease_deadline > ?1)
    ORDER BY k.table_name, k.branch, k.consumer_id
