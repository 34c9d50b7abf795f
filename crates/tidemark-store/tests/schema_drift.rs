//! The Postgres and SQLite schemas cannot drift apart. After every
//! migration both have the same tables, the same columns in the same order,
//! the same nullability, the same primary keys and the same indexes — except
//! for the differences the dialects force or that were chosen on purpose,
//! each listed below with its reason. A column added to one dialect's
//! migration and not the other's fails here.

use std::collections::{BTreeMap, BTreeSet};

use sqlx::Row;
use tidemark_testkit::{Kind, TestDb};

/// How each Postgres column type is stored in SQLite.
const TYPE_MAPPING: &[(&str, &str, &str)] = &[
    ("text", "TEXT", "the same"),
    ("bigint", "INTEGER", "SQLite integers are 64-bit"),
    ("integer", "INTEGER", "SQLite integers are 64-bit"),
    ("smallint", "INTEGER", "SQLite integers are 64-bit"),
    ("boolean", "INTEGER", "SQLite has no boolean: 0 or 1"),
    ("uuid", "BLOB", "SQLite has no uuid: its 16 bytes"),
    ("bytea", "BLOB", "the same bytes"),
    (
        "timestamp with time zone",
        "INTEGER",
        "SQLite has no timestamp: microseconds since the epoch (UTC)",
    ),
];

/// Indexes only one dialect has, on purpose.
const INDEXES_ONLY_IN_SQLITE: &[(&str, &str)] = &[
    (
        "consumer_keys_by_idle",
        "Postgres dropped it so commits stay HOT updates (postgres/0004_lean_writes); SQLite's sweeper still uses it",
    ),
    (
        "history_by_key",
        "Postgres reads a key's history through history_by_table (postgres/0004_lean_writes)",
    ),
];

/// Tables not compared.
const INTERNAL_TABLES: &[(&str, &str)] = &[
    ("sqlite_sequence", "SQLite's own AUTOINCREMENT bookkeeping"),
    (
        "_sqlx_migrations",
        "sqlx's bookkeeping, which sqlx creates in each dialect its own way",
    ),
];

/// Primary keys that differ on purpose: (table, Postgres key, SQLite key).
const PRIMARY_KEYS_DIFFERING: &[(&str, &[&str], &[&str], &str)] = &[(
    "history",
    &["table_name", "branch", "consumer_id", "id"],
    &["id"],
    "on Postgres the per-key index became the primary key, one b-tree fewer per history row \
     (postgres/0004_lean_writes); SQLite keeps the rowid and history_by_key",
)];

#[derive(Debug, Clone, PartialEq, Eq)]
struct Column {
    name: String,
    /// The Postgres type, or the Postgres type this SQLite type stands for.
    kind: String,
    nullable: bool,
}

#[derive(Debug, Default, PartialEq, Eq)]
struct Schema {
    /// Columns of each table, in order.
    tables: BTreeMap<String, Vec<Column>>,
    /// Primary-key columns of each table, in order.
    primary_keys: BTreeMap<String, Vec<String>>,
    /// Index names (primary keys apart).
    indexes: BTreeSet<String>,
}

async fn postgres_schema(db: &TestDb) -> Schema {
    let pool = db.postgres_pool().await.expect("a Postgres database");
    let mut schema = Schema::default();
    let columns = sqlx::query(
        "SELECT table_name::text, column_name::text, data_type::text, is_nullable = 'YES' AS nullable \
         FROM information_schema.columns WHERE table_schema = current_schema() \
         ORDER BY table_name, ordinal_position",
    )
    .fetch_all(&pool)
    .await
    .unwrap();
    for row in columns {
        if INTERNAL_TABLES.iter().any(|(t, _)| *t == row.get::<String, _>(0)) {
            continue;
        }
        schema.tables.entry(row.get::<String, _>(0)).or_default().push(Column {
            name: row.get(1),
            kind: row.get(2),
            nullable: row.get(3),
        });
    }
    let keys = sqlx::query(
        "SELECT k.table_name::text, k.column_name::text FROM information_schema.table_constraints c \
         JOIN information_schema.key_column_usage k \
           ON k.constraint_name = c.constraint_name AND k.table_schema = c.table_schema \
         WHERE c.table_schema = current_schema() AND c.constraint_type = 'PRIMARY KEY' \
         ORDER BY k.table_name, k.ordinal_position",
    )
    .fetch_all(&pool)
    .await
    .unwrap();
    for row in keys {
        if INTERNAL_TABLES.iter().any(|(t, _)| *t == row.get::<String, _>(0)) {
            continue;
        }
        schema
            .primary_keys
            .entry(row.get::<String, _>(0))
            .or_default()
            .push(row.get(1));
    }
    let indexes = sqlx::query(
        "SELECT i.relname::text FROM pg_index x JOIN pg_class i ON i.oid = x.indexrelid \
         JOIN pg_namespace n ON n.oid = i.relnamespace \
         WHERE n.nspname = current_schema() AND NOT x.indisprimary",
    )
    .fetch_all(&pool)
    .await
    .unwrap();
    schema.indexes = indexes.iter().map(|r| r.get::<String, _>(0)).collect();
    pool.close().await;
    schema
}

async fn sqlite_schema(db: &TestDb) -> Schema {
    let pool = sqlx::SqlitePool::connect(db.url()).await.unwrap();
    let mut schema = Schema::default();
    let tables = sqlx::query("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name")
        .fetch_all(&pool)
        .await
        .unwrap();
    for table in tables {
        let table: String = table.get(0);
        if INTERNAL_TABLES.iter().any(|(t, _)| *t == table) {
            continue;
        }
        let info = sqlx::query(sqlx::AssertSqlSafe(format!("PRAGMA table_info({table})")))
            .fetch_all(&pool)
            .await
            .unwrap();
        let mut key: Vec<(i64, String)> = Vec::new();
        let mut columns = Vec::new();
        for column in info {
            let name: String = column.get("name");
            let declared: String = column.get("type");
            let pk: i64 = column.get("pk");
            // INTEGER PRIMARY KEY is the rowid: never NULL, though PRAGMA
            // reports it nullable.
            let rowid = pk > 0 && declared == "INTEGER";
            let nullable = column.get::<i64, _>("notnull") == 0 && !rowid;
            if pk > 0 {
                key.push((pk, name.clone()));
            }
            columns.push((name, declared, nullable));
        }
        key.sort();
        schema
            .primary_keys
            .insert(table.clone(), key.into_iter().map(|(_, c)| c).collect());
        schema.tables.insert(
            table,
            columns
                .into_iter()
                .map(|(name, declared, nullable)| Column {
                    name,
                    kind: declared,
                    nullable,
                })
                .collect(),
        );
    }
    let indexes = sqlx::query("SELECT name FROM sqlite_master WHERE type = 'index' AND name NOT LIKE 'sqlite_%'")
        .fetch_all(&pool)
        .await
        .unwrap();
    schema.indexes = indexes.iter().map(|r| r.get::<String, _>(0)).collect();
    pool.close().await;
    schema
}

/// Whether SQLite's `declared` type stores Postgres's `postgres` type.
fn same_type(postgres: &str, declared: &str) -> bool {
    // sqlx's own bookkeeping table declares SQLite types by their names.
    let sqlx_names = [
        ("bigint", "BIGINT"),
        ("boolean", "BOOLEAN"),
        ("bytea", "BLOB"),
        ("timestamp with time zone", "TIMESTAMP"),
    ];
    TYPE_MAPPING
        .iter()
        .map(|(p, s, _)| (*p, *s))
        .chain(sqlx_names)
        .any(|(p, s)| p == postgres && s == declared)
}

/// Every difference between the two schemas that the lists above do not
/// explain.
fn unexplained_differences(postgres: &Schema, sqlite: &Schema) -> Vec<String> {
    let mut found = Vec::new();
    let names = |s: &Schema| s.tables.keys().cloned().collect::<BTreeSet<_>>();
    for table in names(postgres).symmetric_difference(&names(sqlite)) {
        found.push(format!("table {table} exists in only one dialect"));
    }
    for (table, pg_columns) in &postgres.tables {
        let Some(lite_columns) = sqlite.tables.get(table) else {
            continue;
        };
        let pg_names: Vec<_> = pg_columns.iter().map(|c| &c.name).collect();
        let lite_names: Vec<_> = lite_columns.iter().map(|c| &c.name).collect();
        if pg_names != lite_names {
            found.push(format!(
                "{table}: columns differ\n  postgres {pg_names:?}\n  sqlite   {lite_names:?}"
            ));
            continue;
        }
        for (pg, lite) in pg_columns.iter().zip(lite_columns) {
            if !same_type(&pg.kind, &lite.kind) {
                found.push(format!(
                    "{table}.{}: postgres {} is stored as sqlite {} (not in TYPE_MAPPING)",
                    pg.name, pg.kind, lite.kind
                ));
            }
            if pg.nullable != lite.nullable {
                found.push(format!(
                    "{table}.{}: nullable on {} only",
                    pg.name,
                    if pg.nullable { "postgres" } else { "sqlite" }
                ));
            }
        }
    }
    for (table, pg_key) in &postgres.primary_keys {
        let lite_key = sqlite.primary_keys.get(table).cloned().unwrap_or_default();
        let deliberate = PRIMARY_KEYS_DIFFERING
            .iter()
            .any(|(t, pg, lite, _)| t == table && pg_key == pg && lite_key == *lite);
        if *pg_key != lite_key && !deliberate {
            found.push(format!(
                "{table}: primary key {pg_key:?} on postgres, {lite_key:?} on sqlite"
            ));
        }
    }
    let only_sqlite: BTreeSet<&str> = INDEXES_ONLY_IN_SQLITE.iter().map(|(i, _)| *i).collect();
    for index in postgres.indexes.symmetric_difference(&sqlite.indexes) {
        if !(sqlite.indexes.contains(index) && only_sqlite.contains(index.as_str())) {
            found.push(format!("index {index} exists in only one dialect"));
        }
    }
    found
}

#[tokio::test]
async fn postgres_and_sqlite_schemas_match_but_for_the_listed_dialect_differences() {
    let Some(pg) = TestDb::new(Kind::Postgres).await else {
        return;
    };
    let lite = TestDb::new(Kind::Sqlite).await.expect("sqlite");
    pg.backend().await;
    lite.backend().await;
    let (postgres, sqlite) = (postgres_schema(&pg).await, sqlite_schema(&lite).await);
    assert!(
        postgres.tables.contains_key("consumer_keys") && sqlite.tables.contains_key("consumer_keys"),
        "both schemas were read: {postgres:?} {sqlite:?}"
    );
    let differences = unexplained_differences(&postgres, &sqlite);
    assert!(
        differences.is_empty(),
        "the schemas drifted apart (fix the migrations, or list a deliberate difference with its reason):\n{}",
        differences.join("\n")
    );
}

/// The comparison itself finds what it must: a column on one side only, a
/// type no mapping explains, a nullability or key mismatch, an index.
#[test]
fn the_comparison_catches_each_kind_of_drift() {
    let column = |name: &str, kind: &str, nullable| Column {
        name: name.into(),
        kind: kind.into(),
        nullable,
    };
    let schema = |columns: Vec<Column>, key: &[&str], indexes: &[&str]| Schema {
        tables: BTreeMap::from([("t".to_owned(), columns)]),
        primary_keys: BTreeMap::from([("t".to_owned(), key.iter().map(|k| (*k).to_owned()).collect())]),
        indexes: indexes.iter().map(|i| (*i).to_owned()).collect(),
    };
    let pg = schema(
        vec![
            column("id", "text", false),
            column("at", "timestamp with time zone", true),
        ],
        &["id"],
        &["t_by_at"],
    );
    let same = schema(
        vec![column("id", "TEXT", false), column("at", "INTEGER", true)],
        &["id"],
        &["t_by_at", "history_by_key"],
    );
    assert_eq!(unexplained_differences(&pg, &same), Vec::<String>::new());
    let drifted = [
        schema(vec![column("id", "TEXT", false)], &["id"], &["t_by_at"]),
        schema(
            vec![column("id", "TEXT", false), column("at", "TEXT", true)],
            &["id"],
            &["t_by_at"],
        ),
        schema(
            vec![column("id", "TEXT", false), column("at", "INTEGER", false)],
            &["id"],
            &["t_by_at"],
        ),
        schema(
            vec![column("id", "TEXT", false), column("at", "INTEGER", true)],
            &[],
            &["t_by_at"],
        ),
        schema(
            vec![column("id", "TEXT", false), column("at", "INTEGER", true)],
            &["id"],
            &[],
        ),
    ];
    for sqlite in &drifted {
        assert_eq!(unexplained_differences(&pg, sqlite).len(), 1, "{sqlite:?}");
    }
}
