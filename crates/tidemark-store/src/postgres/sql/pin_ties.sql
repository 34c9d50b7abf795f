-- The branch view's live full-scan pins at the fence only: the lowest
-- live pin of the branch. Binds as the branch view's.

AND k.full_scan_pin = (
               SELECT k.full_scan_pin FROM consumer_keys k
               WHERE k.table_name = $1 AND k.branch = $2 AND k.full_scan_pin IS NOT NULL
                 AND CASE WHEN {{live_lease}} THEN true ELSE false END
               ORDER BY k.full_scan_pin, k.consumer_id LIMIT 1)
