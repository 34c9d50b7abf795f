//! Every generated Postgres statement, rendered, against the copy kept in
//! `sql/rendered/postgres/` (the spelling the next change must keep: a
//! statement moved into its own file renders the same text, so its plan is
//! the same). `TIDEMARK_UPDATE_RENDERED_SQL=1` rewrites the copies.

#[test]
fn every_statement_renders_as_recorded() {
    let statements: Vec<(String, String)> = [
        super::backup::rendered(),
        super::group_commit::rendered(),
        super::group_read::rendered(),
        super::history::rendered(),
        super::keys::rendered(),
        super::paimon::rendered(),
    ]
    .concat();
    crate::rendered_sql::check_rendered("postgres", &statements);
}
