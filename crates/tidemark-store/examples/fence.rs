//! Measures the retention-fence query on a branch holding many consumers.
//!
//!     scripts/bench-fence.sh [--consumers 100000] [--runs 50]
//!
//! Loads the consumers into a fresh Postgres schema (DATABASE_URL) and a
//! fresh SQLite file, then times `Store::fence` (what GetRetentionFence runs)
//! and prints the median and p99 per backend, with the same query's
//! `EXPLAIN ANALYZE` plan on Postgres.

#![allow(clippy::print_stdout)]

use std::sync::Arc;
use std::time::{Duration, Instant};

use tidemark_core::{BranchName, LeasePolicy, TableName};
use tidemark_store::{Backend, PostgresBackend, PostgresOptions, SqliteBackend, Store, SystemClock};

fn arg(name: &str, default: usize) -> usize {
    let args: Vec<String> = std::env::args().collect();
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i]
}

async fn measure(store: &Store, runs: usize) -> (Duration, Duration, Option<i64>) {
    let table = TableName::parse("db.big", "table").unwrap();
    let branch = BranchName::main();
    // Warm up caches and prepared statements.
    for _ in 0..5 {
        store.fence(&table, &branch, false, 100).await.unwrap();
    }
    let mut times = Vec::with_capacity(runs);
    let mut fence = None;
    for _ in 0..runs {
        let started = Instant::now();
        let report = store.fence(&table, &branch, false, 100).await.unwrap();
        times.push(started.elapsed());
        fence = report.fences.snapshot;
    }
    times.sort();
    (percentile(&times, 0.5), percentile(&times, 0.99), fence)
}

const LOAD: &str = "INSERT INTO consumer_keys (table_name, branch, consumer_id, version, epoch, next_snapshot, \
    consumer_created_at, consumer_updated_at) \
    SELECT 'db.big', 'main', 'consumer-' || i, 1, 0, 1000 + (i * 7919) % 50000, {now}, {now} FROM {series}";

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let consumers = arg("--consumers", 100_000);
    let runs = arg("--runs", 50);
    println!("fence query on one branch with {consumers} consumers, {runs} runs each (plus 5 warm-up)");

    if let Ok(url) = std::env::var("DATABASE_URL") {
        let schema = format!("fence_bench_{}", std::process::id());
        let admin = sqlx::PgPool::connect(&url).await?;
        sqlx::query(sqlx::AssertSqlSafe(format!("CREATE SCHEMA {schema}")))
            .execute(&admin)
            .await?;
        let backend = PostgresBackend::connect(
            &url,
            &PostgresOptions {
                schema: Some(schema.clone()),
                ..PostgresOptions::default()
            },
        )?;
        backend.migrate().await?;
        let load = LOAD
            .replace("{now}", "now()")
            .replace("{series}", &format!("generate_series(1, {consumers}) AS i"));
        sqlx::query(sqlx::AssertSqlSafe(load)).execute(backend.pool()).await?;
        sqlx::query("ANALYZE consumer_keys").execute(backend.pool()).await?;
        let store = Store::new(Arc::new(backend.clone()), LeasePolicy::default());
        let (p50, p99, fence) = measure(&store, runs).await;
        println!("postgres: median {p50:?}, p99 {p99:?}, snapshot fence {fence:?}");
        let plan: Vec<(String,)> = sqlx::query_as(sqlx::AssertSqlSafe(format!(
            "EXPLAIN ANALYZE {}",
            tidemark_store::postgres::BRANCH_CONSUMERS.as_str()
        )))
        .bind("db.big")
        .bind("main")
        .bind(100_i64)
        .fetch_all(backend.pool())
        .await?;
        for (line,) in plan {
            println!("  {line}");
        }
        backend.close().await;
        sqlx::query(sqlx::AssertSqlSafe(format!("DROP SCHEMA {schema} CASCADE")))
            .execute(&admin)
            .await?;
    } else {
        println!("postgres: skipped (no DATABASE_URL)");
    }

    let dir = tempfile::tempdir()?;
    let url = format!("sqlite://{}", dir.path().join("fence.db").display());
    let backend = SqliteBackend::open(&url, Arc::new(SystemClock)).await?;
    backend.migrate().await?;
    let pool = sqlx::SqlitePool::connect(&url).await?;
    let now = SystemClock.now_micros();
    let load = LOAD.replace("{now}", &now.to_string()).replace(
        "{series}",
        &format!(
            "(WITH RECURSIVE s(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM s WHERE i < {consumers}) SELECT i FROM s)"
        ),
    );
    sqlx::query(sqlx::AssertSqlSafe(load)).execute(&pool).await?;
    sqlx::query("ANALYZE").execute(&pool).await?;
    pool.close().await;
    let store = Store::new(Arc::new(backend), LeasePolicy::default());
    let (p50, p99, fence) = measure(&store, runs).await;
    println!("sqlite:   median {p50:?}, p99 {p99:?}, snapshot fence {fence:?}");
    Ok(())
}

trait NowMicros {
    fn now_micros(&self) -> i64;
}

impl NowMicros for SystemClock {
    fn now_micros(&self) -> i64 {
        use tidemark_store::Clock;
        self.now().as_micros()
    }
}
