-- The compare-and-set update of one key row (update.rs, `update_key_row`),
-- after `lock_then_clock.sql`. Its binds are placed by the statement that
-- embeds it: the checks from `checks` (version, lease must be live, when
-- decided, tolerance; `bind_checks`), the row's columns from `row`.
-- Holes: {{set}} the columns restamped, {{checks}} the compare-and-set
-- predicate (sql/compare_and_set.sql).

UPDATE consumer_keys SET version = version + 1, {{set}}
         FROM clock
         WHERE ctid = clock.row_at AND {{checks}}
