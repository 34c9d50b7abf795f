-- An update with no history row (keys.rs, `UPDATE_ROW_NO_EVENT`: a
-- renewal). Binds: $1-$3 the key; $4-$7 the checks (`bind_checks`); $8...
-- the row's columns. Holes: {{lock_then_clock}}, {{update}}.

{{lock_then_clock}}, written AS ({{update}} RETURNING 1) SELECT (SELECT t FROM clock) FROM written
