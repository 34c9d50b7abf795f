//! Long statements are kept as SQL, each in a `.sql` file next to the module
//! that sends it and read with `include_str!`, so a statement reads, diffs
//! and can be `EXPLAIN`ed as SQL. What must be spelled once — the key row's
//! column lists, the history row, the compare-and-set predicate — fills
//! `{{name}}` holes, rendered once per process (the statements live in
//! `LazyLock`s). A file opens with `--` lines saying what it is and what
//! each bind is (the one place its bind order is written); they are not
//! sent. `sql/rendered/` keeps every statement as rendered, and a test
//! holds the rendering to it.

/// `file` without its opening `--` lines (and the blank line after them)
/// and its final newline, each `{{name}}` of `holes` filled. Panics on a
/// hole the file lacks or one left unfilled: a statement is rendered the
/// first time it is used, and the rendered-SQL test renders every one.
pub(crate) fn render(file: &str, holes: &[(&str, &str)]) -> String {
    let mut body = file;
    while body.starts_with("--") {
        body = body.split_once('\n').map_or("", |(_, rest)| rest);
    }
    let body = body.strip_prefix('\n').unwrap_or(body);
    let mut sql = body.strip_suffix('\n').unwrap_or(body).to_owned();
    for (name, value) in holes {
        let hole = format!("{{{{{name}}}}}");
        assert!(sql.contains(&hole), "the statement has no hole {hole}");
        sql = sql.replace(&hole, value);
    }
    assert!(!sql.contains("{{"), "a hole is left unfilled in: {sql}");
    sql
}

/// [`render`], sent as one line: each line trimmed and joined by a space
/// (the SQLite statements, written with line continuations before).
pub(crate) fn render_one_line(file: &str, holes: &[(&str, &str)]) -> String {
    render(file, holes).lines().map(str::trim).collect::<Vec<_>>().join(" ")
}

#[cfg(test)]
mod tests {
    use super::render;

    #[test]
    fn the_header_is_not_sent_and_every_hole_is_filled() {
        let file = "-- what it is\n-- $1: a key\n\nSELECT {{a}}\n  FROM t WHERE x = {{b}} AND y = {{a}}\n";
        assert_eq!(
            render(file, &[("a", "1"), ("b", "$1")]),
            "SELECT 1\n  FROM t WHERE x = $1 AND y = 1"
        );
    }

    #[test]
    fn one_line_joins_trimmed_lines_with_a_space() {
        let file = "-- a header\n\nSELECT a,\n    b FROM t\n    WHERE c = ?1\n";
        assert_eq!(super::render_one_line(file, &[]), "SELECT a, b FROM t WHERE c = ?1");
    }

    #[test]
    #[should_panic(expected = "left unfilled")]
    fn an_unfilled_hole_is_refused() {
        render("SELECT {{a}}, {{b}}", &[("a", "1")]);
    }

    #[test]
    #[should_panic(expected = "has no hole")]
    fn a_hole_the_file_lacks_is_refused() {
        render("SELECT 1", &[("a", "1")]);
    }
}
