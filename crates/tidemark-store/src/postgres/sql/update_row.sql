-- A general update of a key row (keys.rs, `UPDATE_ROW`): the row's lock
-- and the clock, the compare-and-set update, then the grant and history.
-- Binds: $1-$3 the key; $4 to $6 + EVENT_COLUMNS the grant and history
-- (`grant_and_history.sql`); then four checks (`bind_checks`); then the
-- row's columns (KeyRow::bind_pg). Holes: {{lock_then_clock}},
-- {{update}} (`update_key_row.sql`), {{written_columns}},
-- {{grant_and_history}}.

{{lock_then_clock}}, written AS ({{update}} RETURNING {{written_columns}}){{grant_and_history}}
