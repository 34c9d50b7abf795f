-- The branch view's consumers at the fence only (`branch_view_sql` with
-- ties): the lowest unexpired position of the branch, found by a walk that
-- stops at the first row. Binds as the branch view's.

AND k.next_snapshot = (
               SELECT k.next_snapshot
               FROM consumer_keys k LEFT JOIN table_options o ON o.table_name = k.table_name
               WHERE k.table_name = $1 AND k.branch = $2 AND k.next_snapshot IS NOT NULL AND {{unexpired}}
               ORDER BY k.next_snapshot, k.consumer_id LIMIT 1)
