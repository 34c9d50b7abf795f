-- A new key row (keys.rs, `INSERT_ROW`), unless another transaction made it
-- first (then nothing is written), then the grant and history.
-- Binds: $1-$3 the key; $4 to $6 + EVENT_COLUMNS the grant and history
-- (`grant_and_history.sql`); then a timestamptz when the row was decided
-- (restamping); then the row's columns (KeyRow::bind_pg). Holes:
-- {{columns}}, {{values}} (restamped placeholders), {{written_columns}},
-- {{grant_and_history}}.

WITH clock AS (SELECT tidemark_write_now() AS t),
         written AS (
           INSERT INTO consumer_keys (table_name, branch, consumer_id, version, {{columns}})
           VALUES ($1, $2, $3, 1, {{values}})
           ON CONFLICT DO NOTHING RETURNING {{written_columns}}){{grant_and_history}}
