//! Every generated SQLite statement, rendered, against the copy kept in
//! `sql/rendered/sqlite/` (see the Postgres twin).

#[test]
fn every_statement_renders_as_recorded() {
    let statements: Vec<(String, String)> = [
        super::backup::rendered(),
        super::history::rendered(),
        super::keys::rendered(),
        super::paimon::rendered(),
    ]
    .concat();
    crate::rendered_sql::check_rendered("sqlite", &statements);
}
