//! The readiness probe behind a transaction pooler (PgBouncer, pool_mode =
//! transaction): a server connection is the probe's only inside its
//! transaction, so a probe given up must never terminate a backend the
//! pooler has since handed to someone else.

use std::time::Duration;

use sqlx::{Connection, Row};
use tidemark_store::{Backend, DbPooler, PostgresBackend, PostgresOptions};
use tidemark_testkit::postgres::FreshDatabase;
use tidemark_testkit::{PgBouncer, PoolMode};

/// Opens a transaction through the pooler and says which backend serves it.
async fn hold_a_transaction(url: &str) -> (sqlx::PgConnection, i32) {
    let mut connection = sqlx::PgConnection::connect(url).await.unwrap();
    let pid: i32 = sqlx::raw_sql("BEGIN; SELECT pg_backend_pid()")
        .fetch_one(&mut connection)
        .await
        .unwrap()
        .try_get(0)
        .unwrap();
    (connection, pid)
}

/// Scenario: a probe commits on server connection P; other clients then
/// hold both server connections of the pool in transactions, so the next
/// probe waits in the pooler's queue before it learns its backend and is
/// given up; one bystander finishes; the probe after that must terminate
/// nothing (the previous probe's P now runs the other bystander's
/// transaction).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_abandoned_probe_behind_a_transaction_pooler_terminates_no_one_elses_backend() {
    let db = FreshDatabase::create()
        .await
        .expect("Postgres (scripts/test.sh starts one)");
    let bouncer = PgBouncer::start_with_pool_size(PoolMode::Transaction, &db.url, 2);
    let name = db.url.rsplit('/').next().unwrap().split('?').next().unwrap().to_owned();
    let pooled = bouncer.url(&name);
    let options = PostgresOptions {
        pooler: DbPooler::Transaction,
        readiness_abandon_after: Duration::from_millis(300),
        acquire_timeout: Duration::from_secs(5),
        ..PostgresOptions::default()
    };
    let backend = PostgresBackend::connect(&pooled, &options).unwrap();
    backend.ping().await.expect("a first probe through the pooler");
    // PgBouncer opens server connections as they are needed: the probe's is
    // the database's only backend so far.
    let mut direct = sqlx::PgConnection::connect(&db.url).await.unwrap();
    let backends: Vec<i32> = sqlx::query_scalar(
        "SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid() \
         AND backend_type = 'client backend'",
    )
    .fetch_all(&mut direct)
    .await
    .unwrap();
    let [probe_pid] = backends[..] else {
        panic!("one server connection after one probe, found {backends:?}")
    };

    let (mut first, first_pid) = hold_a_transaction(&pooled).await;
    let (mut second, second_pid) = hold_a_transaction(&pooled).await;
    assert_ne!(
        first_pid, second_pid,
        "the two transactions hold both server connections"
    );
    // The pool is taken: this probe waits in the pooler's queue and is cut
    // short by its caller, then left unanswered past the abandon limit.
    assert!(
        tokio::time::timeout(Duration::from_millis(200), backend.ping())
            .await
            .is_err()
    );
    tokio::time::sleep(Duration::from_millis(500)).await;
    // The bystander on the earlier probe's backend stays in its
    // transaction; the other ends, freeing a server connection.
    let (kept, kept_pid, other) = if first_pid == probe_pid {
        (&mut first, first_pid, &mut second)
    } else {
        assert_eq!(
            second_pid, probe_pid,
            "one bystander runs on the probe's former backend"
        );
        (&mut second, second_pid, &mut first)
    };
    sqlx::raw_sql("COMMIT").execute(&mut *other).await.unwrap();
    // The probe after the abandoned one gives its connection up and
    // connects afresh; it may terminate only a backend that is still its own.
    backend.ping().await.expect("a probe once a server connection is free");
    let still_alive = sqlx::raw_sql("SELECT pg_backend_pid()").fetch_one(&mut *kept).await;
    assert!(
        still_alive.is_ok(),
        "the bystander on backend {kept_pid} was terminated: {still_alive:?}"
    );
    sqlx::raw_sql("COMMIT").execute(&mut *kept).await.unwrap();
    backend.close().await;
    drop(bouncer);
    db.drop_now().await;
}
