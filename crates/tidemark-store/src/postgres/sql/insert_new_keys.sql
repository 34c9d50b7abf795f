-- An import's new key rows (StateStore::insert_new_keys), each with its one
-- history row, in one statement; a key that has a row already is skipped
-- (ON CONFLICT DO NOTHING) and not logged. Answers the places of the rows
-- written.
--
-- Binds, in order:
--   $1  int4[]  each row's place (0, 1, ...)
--   $2  text[]  table_name    $3 text[] branch    $4 text[] consumer_id
--   $5  text    principal     $6 text   request id
--   $7...       the history event's columns, as arrays (HistoryRow, EVENT_COLUMNS of them)
--   then        the key row's columns, as arrays (KeyRow)
-- Holes: {{event_arrays}} and {{event_columns}} (the history event's),
-- {{row_arrays}} and {{columns}} (the key row's), {{logged}} the history insert.

WITH v AS (
           SELECT * FROM unnest($1::int4[], $2::text[], $3::text[], $4::text[], {{event_arrays}}, {{row_arrays}})
             AS v(ord, table_name, branch, consumer_id, {{event_columns}}, {{columns}})),
         clock AS (SELECT tidemark_write_now() AS t),
         written AS (
           INSERT INTO consumer_keys (table_name, branch, consumer_id, version, {{columns}})
           SELECT table_name, branch, consumer_id, 1, {{columns}} FROM v ORDER BY ord
           ON CONFLICT DO NOTHING RETURNING table_name, branch, consumer_id),
         logged AS ({{logged}})
         SELECT v.ord FROM written w JOIN v USING (table_name, branch, consumer_id)
