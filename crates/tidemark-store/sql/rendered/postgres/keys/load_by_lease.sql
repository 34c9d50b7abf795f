SELECT tidemark_now() AS db_now, k.table_name, k.branch, k.consumer_id, k.version, k.epoch, k.next_snapshot, k.consumer_created_at, k.consumer_updated_at, k.latest_snapshot, k.lease_id, k.lease_holder, k.lease_epoch, k.lease_status, k.lease_ttl_us, k.lease_acquired_at, k.lease_deadline, k.last_batch_id, k.last_end_snapshot, k.last_end_index, k.last_end_full, k.last_end_total_splits, k.lease_wrote_consumer, k.legacy_warned_snapshot, k.full_scan_pin, k.lease_principal, k.lease_peer, k.lease_client, k.lease_committed_at, k.lease_caller_of, o.expiration_us AS opt_expiration_us, o.changelog_only AS opt_changelog_only, o.mode AS opt_mode
         FROM (SELECT 1) AS one
         LEFT JOIN lease_grants g ON g.lease_id = $1
         LEFT JOIN consumer_keys k
           ON k.table_name = g.table_name AND k.branch = g.branch AND k.consumer_id = g.consumer_id
         LEFT JOIN table_options o ON o.table_name = g.table_name
