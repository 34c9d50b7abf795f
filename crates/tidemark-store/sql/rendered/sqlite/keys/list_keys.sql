SELECT k.table_name, k.branch, k.consumer_id, k.version, k.epoch, k.next_snapshot, k.consumer_created_at, k.consumer_updated_at, k.latest_snapshot, k.lease_id, k.lease_holder, k.lease_epoch, k.lease_status, k.lease_ttl_us, k.lease_acquired_at, k.lease_deadline, k.last_batch_id, k.last_end_snapshot, k.last_end_index, k.last_end_full, k.last_end_total_splits, k.lease_wrote_consumer, k.legacy_warned_snapshot, k.full_scan_pin, k.lease_principal, k.lease_peer, k.lease_client, k.lease_committed_at, k.lease_caller_of, o.expiration_us AS opt_expiration_us, o.changelog_only AS opt_changelog_only, o.mode AS opt_mode
         FROM consumer_keys k LEFT JOIN table_options o ON o.table_name = k.table_name
         WHERE (?1 IS NULL OR k.table_name = ?1) AND (?2 IS NULL OR k.branch = ?2)
           AND (?3 IS NULL OR substr(k.consumer_id, 1, length(?3)) = ?3)
           AND (?4 IS NULL OR (k.table_name, k.branch, k.consumer_id) > (?4, ?5, ?6))
           AND (k.next_snapshot IS NOT NULL OR (k.lease_status = 1 AND k.lease_deadline > ?8))
         ORDER BY k.table_name, k.branch, k.consumer_id LIMIT ?7
