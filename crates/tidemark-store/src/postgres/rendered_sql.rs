//! Every generated Postgres statement, rendered, against the copy kept in
//! `sql/rendered/postgres/` (the spelling the next change must keep: a
//! statement moved into its own file renders the same text, so its plan is
//! the same). `TIDEMARK_UPDATE_RENDERED_SQL=1` rewrites the copies.

#[test]
fn every_statement_renders_as_recorded() {
    let mut statements: Vec<(String, String)> = [
        ("backup/export_keys", super::backup::EXPORT_KEYS.to_string()),
        ("backup/insert_new_keys", super::backup::INSERT_NEW_KEYS.to_string()),
        ("group_commit/one_event", super::group_commit::ONE_EVENT.to_string()),
        (
            "group_commit/update_row_one_event",
            super::group_commit::UPDATE_ROW_ONE_EVENT.to_string(),
        ),
        (
            "group_commit/update_row_one_event_unless_locked",
            super::group_commit::UPDATE_ROW_ONE_EVENT_UNLESS_LOCKED.to_string(),
        ),
        ("group_commit/write_many", super::group_commit::WRITE_MANY.to_string()),
        ("group_read/read_many", super::group_read::READ_MANY.to_string()),
        ("history/append_history", super::history::APPEND_HISTORY.to_string()),
        ("keys/load_by_key", super::keys::LOAD_BY_KEY.to_string()),
        ("keys/load_by_lease", super::keys::LOAD_BY_LEASE.to_string()),
        ("keys/list_keys", super::keys::LIST_KEYS.to_string()),
        ("keys/branch_consumers", super::keys::BRANCH_CONSUMERS.to_string()),
        ("keys/expired_keys", super::keys::EXPIRED_KEYS.to_string()),
        ("keys/grant_and_history", super::keys::GRANT_AND_HISTORY.to_string()),
        ("keys/update_row", super::keys::UPDATE_ROW.to_string()),
        ("keys/insert_row", super::keys::INSERT_ROW.to_string()),
        ("keys/update_row_no_event", super::keys::UPDATE_ROW_NO_EVENT.to_string()),
        ("paimon/mirror_inventory", super::paimon::MIRROR_INVENTORY.to_string()),
        ("paimon/mirror_tasks", super::paimon::MIRROR_TASKS.to_string()),
        ("stats/branch_overview", super::stats::BRANCH_OVERVIEW.to_string()),
    ]
    .into_iter()
    .map(|(name, sql)| (name.to_owned(), sql))
    .collect();
    for (i, limit) in super::fences::BRANCH_VIEW_LIMITS.iter().enumerate() {
        statements.push((
            format!("keys/branch_view_{limit}"),
            super::fences::BRANCH_VIEWS[i].clone(),
        ));
        statements.push((
            format!("keys/fence_view_{limit}"),
            super::fences::FENCE_VIEWS[i].clone(),
        ));
    }
    crate::rendered_sql::check_rendered("postgres", &statements);
}
