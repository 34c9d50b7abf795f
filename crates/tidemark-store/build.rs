//! Embeds the migrations (`migrations/postgres`, `migrations/sqlite`) as
//! `(file name, SQL)` lists, which `migrations::embedded` turns into
//! migrators exactly as sqlx's `migrate!` macro resolves a directory. The
//! macro is not used: its proc macro builds sqlx's Postgres and SQLite
//! drivers (and SQLite's C sources) a second time, for the compiler host,
//! minutes of every clean build on two cores.
use std::fmt::Write as _;
use std::path::Path;
use std::{env, fs};

fn main() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../migrations");
    let mut out = String::new();
    for dialect in ["postgres", "sqlite"] {
        let dir = root
            .join(dialect)
            .canonicalize()
            .expect("the migrations directory exists");
        println!("cargo:rerun-if-changed={}", dir.display());
        let mut files: Vec<_> = fs::read_dir(&dir)
            .expect("the migrations directory can be read")
            .map(|entry| entry.expect("a migrations directory entry").path())
            .filter(|path| path.is_file())
            .collect();
        files.sort();
        writeln!(out, "pub(crate) const {}: &[(&str, &str)] = &[", dialect.to_uppercase()).unwrap();
        for file in files {
            println!("cargo:rerun-if-changed={}", file.display());
            let name = file
                .file_name()
                .and_then(|n| n.to_str())
                .expect("a UTF-8 migration file name");
            let path = file.to_str().expect("a UTF-8 migration path");
            writeln!(out, "    ({name:?}, include_str!({path:?})),").unwrap();
        }
        writeln!(out, "];").unwrap();
    }
    let target = Path::new(&env::var("OUT_DIR").expect("cargo sets OUT_DIR")).join("migrations.rs");
    fs::write(target, out).expect("the embedded migrations can be written");
}
