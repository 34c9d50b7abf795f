//! Every generated SQLite statement, rendered, against the copy kept in
//! `sql/rendered/sqlite/` (see the Postgres twin).

#[test]
fn every_statement_renders_as_recorded() {
    let statements: Vec<(String, String)> = [
        ("backup/export_keys", super::backup::EXPORT_KEYS.to_string()),
        ("history/insert_history", super::history::INSERT_HISTORY.to_string()),
        ("keys/select_key", super::keys::SELECT_KEY.to_string()),
        ("keys/list_keys", super::keys::LIST_KEYS.to_string()),
        ("keys/branch_consumers", super::keys::BRANCH_CONSUMERS.to_string()),
        ("keys/branch_pins", super::keys::BRANCH_PINS.to_string()),
        ("keys/update_row", super::keys::UPDATE_ROW.to_string()),
        ("keys/insert_row", super::keys::INSERT_ROW.to_string()),
        ("paimon/mirror_inventory", super::paimon::MIRROR_INVENTORY.to_string()),
        ("paimon/mirror_tasks", super::paimon::MIRROR_TASKS.to_string()),
        ("stats/branch_overview", super::stats::BRANCH_OVERVIEW.to_string()),
    ]
    .into_iter()
    .map(|(name, sql)| (name.to_owned(), sql))
    .collect();
    crate::rendered_sql::check_rendered("sqlite", &statements);
}
