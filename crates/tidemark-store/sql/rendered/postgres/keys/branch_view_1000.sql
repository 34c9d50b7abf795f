WITH head AS (
           SELECT tidemark_now() AS db_now, o.expiration_us AS opt_expiration_us, o.changelog_only AS opt_changelog_only, o.mode AS opt_mode
           FROM (SELECT 1) AS one LEFT JOIN table_options o ON o.table_name = $1),
         holders AS (
           (SELECT 0 AS kind, k.next_snapshot AS fence_position, k.table_name, k.branch, k.consumer_id, k.version, k.epoch, k.next_snapshot, k.consumer_created_at, k.consumer_updated_at, k.latest_snapshot, k.lease_id, k.lease_holder, k.lease_epoch, k.lease_status, k.lease_ttl_us, k.lease_acquired_at, k.lease_deadline, k.last_batch_id, k.last_end_snapshot, k.last_end_index, k.last_end_full, k.last_end_total_splits, k.lease_wrote_consumer, k.legacy_warned_snapshot, k.full_scan_pin, k.lease_principal, k.lease_peer, k.lease_client, k.lease_committed_at, k.lease_caller_of
            FROM consumer_keys k LEFT JOIN table_options o ON o.table_name = k.table_name
            WHERE k.table_name = $1 AND k.branch = $2 AND k.next_snapshot IS NOT NULL AND (o.expiration_us IS NULL
      OR k.consumer_updated_at >= tidemark_now() - o.expiration_us * interval '1 microsecond'
      OR (k.lease_status = 1 AND k.lease_deadline > tidemark_now()))
              
            ORDER BY k.next_snapshot, k.consumer_id LIMIT 1000)
           UNION ALL
           (SELECT 1 AS kind, k.full_scan_pin AS fence_position, k.table_name, k.branch, k.consumer_id, k.version, k.epoch, k.next_snapshot, k.consumer_created_at, k.consumer_updated_at, k.latest_snapshot, k.lease_id, k.lease_holder, k.lease_epoch, k.lease_status, k.lease_ttl_us, k.lease_acquired_at, k.lease_deadline, k.last_batch_id, k.last_end_snapshot, k.last_end_index, k.last_end_full, k.last_end_total_splits, k.lease_wrote_consumer, k.legacy_warned_snapshot, k.full_scan_pin, k.lease_principal, k.lease_peer, k.lease_client, k.lease_committed_at, k.lease_caller_of
            FROM consumer_keys k
            WHERE k.table_name = $1 AND k.branch = $2 AND k.full_scan_pin IS NOT NULL
              AND CASE WHEN (k.lease_status = 1 AND k.lease_deadline > tidemark_now()) THEN true ELSE false END
              
            ORDER BY k.full_scan_pin, k.consumer_id LIMIT 1000))
         SELECT head.*, holders.* FROM head LEFT JOIN holders ON true
         ORDER BY holders.kind, holders.fence_position, holders.consumer_id
