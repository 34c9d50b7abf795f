//! The migration rule (docs/deploy.md, "Migrations"), checked on every
//! change: each migration records in `tidemark_schema_rule` the oldest
//! migration a running binary may have been built with and still use the
//! schema. An expand step keeps that floor; a contract step (a dropped or
//! renamed table or column, a changed type, a new NOT NULL without a
//! default, a replaced function) must raise it. And no floor may pass the
//! previous release's newest migration (the release `scripts/rollout.sh`
//! pins): a rollout runs both binaries on one schema, and a rollback runs
//! the previous one on it alone. The previous release's migrations are
//! also unchanged, byte for byte.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The first migration, per dialect, written under the rule (it records
/// the floors of those before it).
const RULE_STARTS: [(&str, i64); 2] = [("postgres", 9), ("sqlite", 8)];

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// A migration: its version, file name and SQL.
#[derive(Debug, Clone)]
struct File {
    version: i64,
    name: String,
    sql: String,
}

fn file(name: &str, sql: &str) -> File {
    File {
        version: name
            .split_once('_')
            .and_then(|(v, _)| v.parse().ok())
            .expect("NNNN_ prefix"),
        name: name.to_owned(),
        sql: sql.to_owned(),
    }
}

/// The previous release: its newest migration and its files.
struct Previous {
    commit: String,
    newest: i64,
    files: Vec<File>,
}

/// The SQL without comments, statement by statement, upper-cased and with
/// whitespace collapsed.
fn statements(sql: &str) -> Vec<String> {
    let without_comments: String = sql
        .lines()
        .map(|line| line.split_once("--").map_or(line, |(code, _)| code))
        .collect::<Vec<_>>()
        .join(" ");
    without_comments
        .split(';')
        .map(|s| s.split_whitespace().collect::<Vec<_>>().join(" ").to_uppercase())
        .filter(|s| !s.is_empty())
        .collect()
}

/// The contract steps in `sql`, as the statements that make them.
fn contract_steps(sql: &str) -> Vec<String> {
    let patterns = [
        r"\bDROP (TABLE|VIEW|FUNCTION|TYPE|SCHEMA|MATERIALIZED VIEW)\b",
        r"^ALTER TABLE .* DROP (COLUMN )?(IF EXISTS )?[A-Z_]+(\s|,|$)",
        r"\bRENAME\b",
        r"\bALTER COLUMN \S+ (SET DATA )?TYPE\b",
        r"\bSET NOT NULL\b",
        r"\bCREATE OR REPLACE FUNCTION\b",
    ];
    let patterns: Vec<regex::Regex> = patterns.iter().map(|p| regex::Regex::new(p).unwrap()).collect();
    let added_not_null = regex::Regex::new(r"\bADD (COLUMN )?[A-Z_]+ [^,]*\bNOT NULL\b").unwrap();
    statements(sql)
        .into_iter()
        .filter(|s| {
            // Dropping a constraint or an index changes what is allowed or
            // how fast, not what an older binary reads.
            let drops_only_constraints = s.contains(" DROP CONSTRAINT ") && !s.contains(" DROP COLUMN ");
            (patterns.iter().any(|p| p.is_match(s)) && !drops_only_constraints)
                || (added_not_null.is_match(s) && !s.contains(" DEFAULT "))
        })
        .collect()
}

/// The floors a migration records: (migration, oldest_compatible) pairs in
/// its inserts into tidemark_schema_rule.
fn recorded_floors(sql: &str) -> Vec<(i64, i64)> {
    let pair = regex::Regex::new(r"\(\s*(\d+)\s*,\s*(\d+)\s*\)").unwrap();
    statements(sql)
        .into_iter()
        .filter(|s| s.starts_with("INSERT") && s.contains("TIDEMARK_SCHEMA_RULE"))
        .flat_map(|s| {
            let values = s.split_once(" VALUES ").map(|(_, v)| v.to_owned()).unwrap_or_default();
            pair.captures_iter(&values)
                .map(|c| (c[1].parse().unwrap(), c[2].parse().unwrap()))
                .collect::<Vec<_>>()
        })
        .collect()
}

/// Everything wrong with `files` (one dialect's, in order) under the rule,
/// given the previous release.
fn rule_problems(files: &[File], rule_starts: i64, previous: &Previous) -> Vec<String> {
    let mut problems = Vec::new();
    for old in &previous.files {
        match files.iter().find(|f| f.name == old.name) {
            None => problems.push(format!(
                "{} was removed or renamed after release {}",
                old.name, previous.commit
            )),
            Some(now) if now.sql != old.sql => problems.push(format!(
                "{} was edited after release {} applied it: put the change in a new migration",
                old.name, previous.commit
            )),
            Some(_) => {}
        }
    }
    let mut floors: BTreeMap<i64, i64> = BTreeMap::new();
    let mut floor = 1;
    for f in files.iter().filter(|f| f.version >= rule_starts) {
        let recorded = recorded_floors(&f.sql);
        let Some(&(_, own)) = recorded.iter().find(|(m, _)| *m == f.version) else {
            problems.push(format!(
                "{} records no floor: end it with INSERT INTO tidemark_schema_rule (migration, oldest_compatible) \
                 VALUES ({}, <floor>)",
                f.name, f.version
            ));
            continue;
        };
        floors.extend(recorded.iter().copied());
        let contracts = contract_steps(&f.sql);
        if contracts.is_empty() && own != floor {
            problems.push(format!(
                "{} is an expand step but records floor {own} (it must keep {floor})",
                f.name
            ));
        }
        if !contracts.is_empty() && own <= floor {
            problems.push(format!(
                "{} contracts the schema ({}) but keeps floor {own}: raise it to the first migration that no longer \
                 reads what it removes",
                f.name,
                contracts.join("; ")
            ));
        }
        if own > previous.newest {
            problems.push(format!(
                "{} raises the floor to {own}, beyond the previous release {} (built with migration {}), which a \
                 rollout and a rollback still run on this schema: contract only what that release no longer reads",
                f.name, previous.commit, previous.newest
            ));
        }
        floor = floor.max(own);
    }
    if let Some(newest) = files.iter().map(|f| f.version).max() {
        for version in 1..=newest {
            if files.iter().any(|f| f.version == version) && !floors.contains_key(&version) && version >= 1 {
                problems.push(format!(
                    "migration {version} has no floor recorded in tidemark_schema_rule"
                ));
            }
        }
    }
    problems
}

/// The commit `scripts/rollout.sh` pins as the previous release.
fn previous_release_commit() -> String {
    let script = std::fs::read_to_string(root().join("scripts/rollout.sh")).expect("scripts/rollout.sh");
    script
        .lines()
        .find_map(|l| l.strip_prefix("PREVIOUS_RELEASE="))
        .map(|v| v.trim().trim_matches('"').to_owned())
        .expect("scripts/rollout.sh pins PREVIOUS_RELEASE=<commit>")
}

fn git(args: &[&str]) -> Result<String, String> {
    let output = Command::new("git")
        .current_dir(root())
        .args(args)
        .output()
        .map_err(|e| format!("cannot run git: {e}"))?;
    if !output.status.success() {
        return Err(String::from_utf8_lossy(&output.stderr).into_owned());
    }
    Ok(String::from_utf8_lossy(&output.stdout).into_owned())
}

fn previous_release(dialect: &str) -> Previous {
    let commit = previous_release_commit();
    let listing = git(&["ls-tree", "--name-only", &commit, &format!("migrations/{dialect}/")]).unwrap_or_else(|e| {
        panic!(
            "this clone lacks the previous release's commit {commit} (pinned in scripts/rollout.sh): fetch the \
             full history (git fetch --unshallow) to check the migration rule: {e}"
        )
    });
    let files: Vec<File> = listing
        .lines()
        .filter(|p| p.ends_with(".sql"))
        .map(|path| {
            let sql = git(&["show", &format!("{commit}:{path}")]).expect("git show");
            file(path.rsplit('/').next().unwrap(), &sql)
        })
        .collect();
    Previous {
        commit,
        newest: files
            .iter()
            .map(|f| f.version)
            .max()
            .expect("the previous release has migrations"),
        files,
    }
}

fn current(dialect: &str) -> Vec<File> {
    let mut files: Vec<File> = std::fs::read_dir(root().join("migrations").join(dialect))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "sql"))
        .map(|p| {
            file(
                &p.file_name().unwrap().to_string_lossy(),
                &std::fs::read_to_string(&p).unwrap(),
            )
        })
        .collect();
    files.sort_by_key(|f| f.version);
    files
}

#[test]
fn every_migration_follows_the_rule_against_the_previous_release() {
    for (dialect, starts) in RULE_STARTS {
        let previous = previous_release(dialect);
        let problems = rule_problems(&current(dialect), starts, &previous);
        assert!(problems.is_empty(), "{dialect}:\n  {}", problems.join("\n  "));
    }
}

/// The check fails each kind of change it exists to stop.
#[test]
fn the_rule_check_catches_contracts_edits_and_missing_floors() {
    let previous = Previous {
        commit: "prev".into(),
        newest: 10,
        files: vec![file(
            "0009_a.sql",
            "CREATE TABLE a (x int); INSERT INTO tidemark_schema_rule VALUES (9, 1);",
        )],
    };
    let kept = file(
        "0009_a.sql",
        "CREATE TABLE a (x int); INSERT INTO tidemark_schema_rule VALUES (9, 1);",
    );
    let ok = [
        kept.clone(),
        file(
            "0010_b.sql",
            "ALTER TABLE a ADD COLUMN y int NOT NULL DEFAULT 0;\nINSERT INTO tidemark_schema_rule (migration, oldest_compatible) VALUES (10, 1);",
        ),
    ];
    assert_eq!(rule_problems(&ok, 9, &previous), Vec::<String>::new());
    let cases: [(&str, Vec<File>, &str); 6] = [
        (
            "a dropped column with the floor kept",
            vec![
                kept.clone(),
                file(
                    "0010_b.sql",
                    "ALTER TABLE a DROP COLUMN x;\nINSERT INTO tidemark_schema_rule VALUES (10, 1);",
                ),
            ],
            "contracts the schema",
        ),
        (
            "a rename with the floor kept",
            vec![
                kept.clone(),
                file(
                    "0010_b.sql",
                    "ALTER TABLE a RENAME COLUMN x TO z; INSERT INTO tidemark_schema_rule VALUES (10, 1);",
                ),
            ],
            "contracts the schema",
        ),
        (
            "a new NOT NULL column without a default",
            vec![
                kept.clone(),
                file(
                    "0010_b.sql",
                    "ALTER TABLE a ADD COLUMN y int NOT NULL; INSERT INTO tidemark_schema_rule VALUES (10, 1);",
                ),
            ],
            "contracts the schema",
        ),
        (
            "a contract beyond the previous release",
            vec![
                kept.clone(),
                file("0010_b.sql", "INSERT INTO tidemark_schema_rule VALUES (10, 1);"),
                file(
                    "0011_c.sql",
                    "DROP TABLE a; INSERT INTO tidemark_schema_rule VALUES (11, 11);",
                ),
            ],
            "beyond the previous release",
        ),
        (
            "an edited migration of the previous release",
            vec![file(
                "0009_a.sql",
                "CREATE TABLE a (x bigint); INSERT INTO tidemark_schema_rule VALUES (9, 1);",
            )],
            "was edited after release",
        ),
        (
            "a migration that records no floor",
            vec![kept.clone(), file("0010_b.sql", "CREATE TABLE b (x int);")],
            "records no floor",
        ),
    ];
    for (what, files, expected) in cases {
        let problems = rule_problems(&files, 9, &previous);
        assert!(
            problems.iter().any(|p| p.contains(expected)),
            "{what}: not caught ({problems:?})"
        );
    }
    // Dropping an index or a constraint is not a contract step.
    assert!(contract_steps("DROP INDEX IF EXISTS a_by_b; ALTER TABLE h DROP CONSTRAINT h_pkey;").is_empty());
}
