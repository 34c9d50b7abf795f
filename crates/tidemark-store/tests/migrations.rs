//! Applied migrations are history: once a migration has landed, databases
//! everywhere have run it, and sqlx refuses to start on a database whose
//! applied migration differs from the embedded one. So a landed migration
//! is never edited, renamed, removed or reordered; a change is a new
//! migration. `migrations/applied.sha256` records every landed migration
//! (`sha256sum` format, in order); this test holds the tree to it.
//!
//! Adding a migration: add the file, then append its line with
//! `(cd migrations && sha256sum postgres/NNNN_x.sql sqlite/NNNN_x.sql) >> migrations/applied.sha256`.

use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

fn migrations_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../migrations")
}

fn recorded() -> Vec<(String, String)> {
    let manifest = std::fs::read_to_string(migrations_dir().join("applied.sha256")).expect("the manifest");
    manifest
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|line| {
            let (hash, path) = line.split_once("  ").expect("sha256sum format: <hash>  <path>");
            (hash.to_owned(), path.to_owned())
        })
        .collect()
}

#[test]
fn landed_migrations_are_never_edited() {
    for (hash, path) in recorded() {
        let content = std::fs::read(migrations_dir().join(&path))
            .unwrap_or_else(|e| panic!("{path} was removed or renamed ({e}): landed migrations stay"));
        let actual: String = Sha256::digest(&content).iter().map(|b| format!("{b:02x}")).collect();
        assert_eq!(
            actual, hash,
            "{path} was edited after it landed: databases have already applied it; put the change in a new migration"
        );
    }
}

#[test]
fn every_migration_is_recorded_in_order() {
    let recorded = recorded();
    for dialect in ["postgres", "sqlite"] {
        let mut on_disk: Vec<String> = std::fs::read_dir(migrations_dir().join(dialect))
            .unwrap()
            .map(|e| format!("{dialect}/{}", e.unwrap().file_name().to_string_lossy()))
            .filter(|name| name.ends_with(".sql"))
            .collect();
        on_disk.sort();
        let listed: Vec<String> = recorded
            .iter()
            .map(|(_, path)| path.clone())
            .filter(|path| path.starts_with(&format!("{dialect}/")))
            .collect();
        assert_eq!(
            listed, on_disk,
            "{dialect}: migrations/applied.sha256 must list every migration, in order (append new ones)"
        );
    }
}
