//! The generated statements as rendered, kept under `sql/rendered/` so a
//! change to how a statement is spelled (a template, a file of its own)
//! is proven to render the same text, and so to plan the same.

/// Compares each `(name, statement)` with `sql/rendered/<dialect>/<name>.sql`
/// (or rewrites those files when `TIDEMARK_UPDATE_RENDERED_SQL=1`), and
/// refuses a recorded statement that no longer exists.
pub(crate) fn check_rendered(dialect: &str, statements: &[(String, String)]) {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("sql/rendered")
        .join(dialect);
    let update = std::env::var("TIDEMARK_UPDATE_RENDERED_SQL").is_ok_and(|v| v == "1");
    let mut expected: Vec<String> = Vec::new();
    for (name, sql) in statements {
        let path = dir.join(format!("{name}.sql"));
        expected.push(format!("{name}.sql"));
        let text = format!("{sql}\n");
        if update {
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(&path, &text).unwrap();
            continue;
        }
        let recorded = std::fs::read_to_string(&path)
            .unwrap_or_else(|e| panic!("{}: {e} (TIDEMARK_UPDATE_RENDERED_SQL=1 records it)", path.display()));
        assert_eq!(recorded, text, "{name} renders differently from {}", path.display());
    }
    let mut recorded: Vec<String> = Vec::new();
    for module in std::fs::read_dir(&dir).unwrap() {
        let module = module.unwrap().path();
        for file in std::fs::read_dir(&module).unwrap() {
            let file = file.unwrap().path();
            let module_name = module.file_name().unwrap().to_string_lossy().into_owned();
            recorded.push(format!("{module_name}/{}", file.file_name().unwrap().to_string_lossy()));
        }
    }
    recorded.sort();
    expected.sort();
    assert_eq!(
        recorded, expected,
        "a recorded statement no longer exists, or one is new"
    );
}
