-- The mirror's next files to write, on SQLite (see postgres/sql/mirror_tasks.sql).
-- Binds: ?1 how much newer (µs) a consumer's updated_at may be than its
-- file's; ?2 the most tasks; ?3 the clock (µs). Sent as one line.

SELECT * FROM (
    SELECT k.table_name, k.branch, k.consumer_id, t.location, k.next_snapshot, k.consumer_updated_at,
    coalesce(m.failures, 0) AS failures
    FROM paimon_tables t JOIN consumer_keys k ON k.table_name = t.table_name
    LEFT JOIN consumer_mirrors m ON m.table_name = k.table_name AND m.branch = k.branch AND m.consumer_id = k.consumer_id
    WHERE ((k.next_snapshot IS NOT NULL AND (m.mirrored_next IS NOT k.next_snapshot
    OR m.mirrored_updated_at IS NULL OR k.consumer_updated_at > m.mirrored_updated_at + ?1
    OR m.location <> t.location))
    OR (k.next_snapshot IS NULL AND m.mirrored_next IS NOT NULL))
    AND (m.retry_at IS NULL OR m.retry_at <= ?3)
    UNION ALL
    SELECT m.table_name, m.branch, m.consumer_id, t.location, NULL, NULL, m.failures
    FROM consumer_mirrors m JOIN paimon_tables t ON t.table_name = m.table_name
    WHERE m.mirrored_next IS NOT NULL AND (m.retry_at IS NULL OR m.retry_at <= ?3) AND NOT EXISTS (SELECT 1 FROM consumer_keys k WHERE k.table_name = m.table_name
    AND k.branch = m.branch AND k.consumer_id = m.consumer_id))
    ORDER BY failures, table_name, branch, consumer_id LIMIT ?2
