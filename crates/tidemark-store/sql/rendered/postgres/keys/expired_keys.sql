SELECT k.table_name, k.branch, k.consumer_id
         FROM table_options o JOIN consumer_keys k ON k.table_name = o.table_name
         WHERE o.expiration_us IS NOT NULL AND ($1::text IS NULL OR k.table_name = $1)
           AND ($2::text IS NULL OR k.branch = $2) AND k.next_snapshot IS NOT NULL
           AND k.consumer_updated_at < tidemark_now() - o.expiration_us * interval '1 microsecond'
           AND NOT coalesce((k.lease_status = 1 AND k.lease_deadline > tidemark_now()), false)
         ORDER BY k.consumer_updated_at LIMIT $3
