-- One write with one history row, alone (group_commit.rs,
-- `UPDATE_ROW_ONE_EVENT`). Binds: $1-$3 the key; $4-$7 the checks
-- (`bind_checks`); $8 principal; $9 request id; $10 on the event's columns (EVENT_COLUMNS of them)
-- (HistoryRow); then the row's columns. Holes: {{lock_then_clock}},
-- {{update}}, {{one_event}} (the history insert).

{{lock_then_clock}}, written AS ({{update}} RETURNING table_name, branch, consumer_id)
         {{one_event}} RETURNING at
