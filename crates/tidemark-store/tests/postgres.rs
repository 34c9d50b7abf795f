//! The storage conformance suite on a real Postgres, plus Postgres-only
//! checks (database clock, unavailability).

mod conformance;

use std::sync::Arc;
use std::time::Duration;

use tidemark_core::lease::LeasePolicy;
use tidemark_store::{Backend, CallContext, PostgresBackend, PostgresOptions, Store, StoreError};
use tidemark_testkit::{Kind, TestDb};

all_conformance_cases!(Kind::Postgres);
admin_conformance_suite!(Kind::Postgres);
remembered_conformance_suite!(Kind::Postgres);
model_conformance_suite!(Kind::Postgres);
mirror_conformance_suite!(Kind::Postgres);

/// Deadlines are stamped with the database clock: a lease granted now ends
/// `ttl` after Postgres' `now()`.
#[tokio::test]
async fn postgres_deadlines_come_from_the_database_clock() {
    let Some(db) = TestDb::new(Kind::Postgres).await else {
        return;
    };
    let backend = PostgresBackend::connect(db.url(), &db.postgres_options()).unwrap();
    backend.migrate().await.unwrap();
    let store = Store::new(Arc::new(backend.clone()), LeasePolicy::default());
    let key = tidemark_core::ConsumerKey::parse("db.t", "main", "c", "").unwrap();
    let lease = store
        .acquire_lease(&CallContext::internal("t"), &key, "q", Some(Duration::from_secs(60)))
        .await
        .unwrap()
        .lease;
    let (db_deadline, db_now): (chrono::DateTime<chrono::Utc>, chrono::DateTime<chrono::Utc>) =
        sqlx::query_as("SELECT lease_deadline, now() FROM consumer_keys WHERE consumer_id = 'c'")
            .fetch_one(backend.pool())
            .await
            .unwrap();
    assert_eq!(db_deadline.timestamp_micros(), lease.deadline.as_micros());
    let ahead = db_deadline - db_now;
    assert!(
        ahead <= chrono::Duration::seconds(60) && ahead > chrono::Duration::seconds(55),
        "{ahead}"
    );
}

/// An unreachable database is UNAVAILABLE (retryable), never a hang or an
/// internal error.
#[tokio::test]
async fn unreachable_postgres_is_unavailable() {
    let options = PostgresOptions {
        acquire_timeout: Duration::from_millis(500),
        ..PostgresOptions::default()
    };
    // A port nothing listens on.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    drop(listener);
    let backend = PostgresBackend::connect(&format!("postgres://nobody@127.0.0.1:{port}/x"), &options).unwrap();
    let started = std::time::Instant::now();
    let err = backend.ping().await.unwrap_err();
    assert!(matches!(err, StoreError::Unavailable(_)), "{err:?}");
    assert!(started.elapsed() < Duration::from_secs(5));
}

/// The fence query walks the (table, branch, next_snapshot, consumer_id)
/// index and stops after its limit: no sequential scan, no sort, however many
/// consumers the branch holds.
#[tokio::test]
async fn the_fence_query_walks_the_position_index() {
    let Some(db) = TestDb::new(Kind::Postgres).await else {
        return;
    };
    db.backend().await;
    let pool = db.postgres_pool().await.unwrap();
    sqlx::query(
        "INSERT INTO consumer_keys (table_name, branch, consumer_id, version, epoch, next_snapshot, \
         consumer_created_at, consumer_updated_at) \
         SELECT 'db.big', 'main', 'c' || i, 1, 0, 1000 + (i * 7919) % 5000, now(), now() \
         FROM generate_series(1, 20000) AS i",
    )
    .execute(&pool)
    .await
    .unwrap();
    sqlx::query("ANALYZE consumer_keys").execute(&pool).await.unwrap();
    let plan: Vec<(String,)> = sqlx::query_as(sqlx::AssertSqlSafe(format!(
        "EXPLAIN {}",
        tidemark_store::postgres::BRANCH_CONSUMERS
    )))
    .bind("db.big")
    .bind("main")
    .bind(100_i64)
    .fetch_all(&pool)
    .await
    .unwrap();
    let plan: String = plan.into_iter().map(|(line,)| line + "\n").collect();
    assert!(plan.contains("consumer_keys_by_position"), "{plan}");
    assert!(!plan.contains("Seq Scan on consumer_keys"), "{plan}");
    assert!(!plan.contains("Sort"), "{plan}");
    pool.close().await;
}
