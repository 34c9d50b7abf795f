//! Migrations across rolling upgrades and rollbacks: an older binary runs
//! on a schema a newer release expanded (a fixture migration applied
//! beyond the binary's own), migrations are not cut short by the statement
//! timeout, and a failed run leaves no advisory lock behind for the other
//! replicas to wait on; and a binary refuses a schema a later contract step
//! moved beyond it (the migration rule).

mod support;

use std::process::Command;
use std::time::{Duration, Instant};

use support::{BIN, Served};
use tidemark_proto::v1 as pb;
use tidemark_proto::v1::coordinator_client::CoordinatorClient;
use tidemark_testkit::postgres::FreshDatabase;

/// A later release's migration, as `_sqlx_migrations` records it, and the
/// table it added.
const LATER_VERSION: i64 = 99_990_101_000_000;

fn migrate(url: &str, extra: &[&str]) -> std::process::Output {
    Command::new(BIN)
        .args(["migrate", "--database-url", url, "--wait-for-database", "0s"])
        .args(extra)
        .output()
        .expect("run tidemark migrate")
}

async fn acquire_works(url: String) {
    let mut client = CoordinatorClient::connect(url).await.unwrap();
    let granted = client
        .acquire_lease(pb::AcquireLeaseRequest {
            consumer: Some(pb::ConsumerKey {
                table: "db.t".into(),
                branch: "main".into(),
                consumer_id: "upgrade".into(),
            }),
            holder: "w".into(),
            ttl: None,
        })
        .await
        .expect("the older binary serves on the newer schema");
    assert!(granted.into_inner().lease.is_some());
}

/// Migrates `url` with this binary, then leaves the schema as a later
/// release's migration would: `change` applied and the migration recorded
/// in `_sqlx_migrations` (as its migrator records it). Returns this
/// binary's newest migration.
async fn as_a_later_release_left_it(url: &str, change: &str) -> i64 {
    let first = migrate(url, &[]);
    assert!(first.status.success(), "{}", String::from_utf8_lossy(&first.stderr));
    let sqlite = url.starts_with("sqlite:");
    let (success, checksum) = if sqlite { ("1", "x'00'") } else { ("true", "'\\x00'") };
    let record = format!(
        "INSERT INTO _sqlx_migrations (version, description, success, checksum, execution_time) \
         VALUES ({LATER_VERSION}, 'a later release', {success}, {checksum}, 1)"
    );
    let newest = "SELECT max(version) FROM _sqlx_migrations";
    if sqlite {
        let pool = sqlx::SqlitePool::connect(url).await.unwrap();
        let own: i64 = sqlx::query_scalar(newest).fetch_one(&pool).await.unwrap();
        for sql in [change, &record] {
            sqlx::query(sqlx::AssertSqlSafe(sql.to_owned()))
                .execute(&pool)
                .await
                .unwrap();
        }
        pool.close().await;
        own
    } else {
        let pool = sqlx::PgPool::connect(url).await.unwrap();
        let own: i64 = sqlx::query_scalar(newest).fetch_one(&pool).await.unwrap();
        for sql in [change, &record] {
            sqlx::query(sqlx::AssertSqlSafe(sql.to_owned()))
                .execute(&pool)
                .await
                .unwrap();
        }
        pool.close().await;
        own
    }
}

#[tokio::test]
async fn an_older_binary_migrates_and_serves_on_a_newer_expand_only_schema_postgres() {
    let Some(db) = FreshDatabase::create().await else {
        return;
    };
    as_a_later_release_left_it(&db.url, "CREATE TABLE later_release_feature (id bigint PRIMARY KEY)").await;
    let again = migrate(&db.url, &[]);
    assert!(again.status.success(), "{}", String::from_utf8_lossy(&again.stderr));
    let dir = tempfile::tempdir().unwrap();
    let served = Served::start(&["--database-url", &db.url], dir.path());
    acquire_works(served.url()).await;
    drop(served);
    db.drop_now().await;
}

#[tokio::test]
async fn an_older_binary_migrates_and_serves_on_a_newer_expand_only_schema_sqlite() {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite://{}", dir.path().join("t.db").display());
    as_a_later_release_left_it(&url, "CREATE TABLE later_release_feature (id INTEGER PRIMARY KEY)").await;
    let again = migrate(&url, &[]);
    assert!(again.status.success(), "{}", String::from_utf8_lossy(&again.stderr));
    let served = Served::start(&["--database-url", &url], dir.path());
    acquire_works(served.url()).await;
}

#[tokio::test]
async fn migrations_are_not_cut_short_by_the_statement_timeout() {
    let Some(db) = FreshDatabase::create().await else {
        return;
    };
    // Every migration file takes longer than a millisecond.
    let output = migrate(&db.url, &["--db-statement-timeout", "1ms"]);
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    db.drop_now().await;
}

#[tokio::test]
async fn a_failed_migration_leaves_no_advisory_lock_behind() {
    let Some(db) = FreshDatabase::create().await else {
        return;
    };
    let first = migrate(&db.url, &[]);
    assert!(first.status.success(), "{}", String::from_utf8_lossy(&first.stderr));
    // A run that failed halfway, as sqlx records it: every later run
    // refuses (after taking the lock).
    let pool = sqlx::PgPool::connect(&db.url).await.unwrap();
    sqlx::query(
        "UPDATE _sqlx_migrations SET success = false WHERE version = (SELECT max(version) FROM _sqlx_migrations)",
    )
    .execute(&pool)
    .await
    .unwrap();
    // serve keeps retrying its migrations meanwhile (a pod waiting for its
    // database); between attempts it must hold no lock.
    let log = tempfile::NamedTempFile::new().unwrap();
    let mut serve = Command::new(BIN)
        .args(["serve", "--listen", "127.0.0.1:0", "--metrics-listen", "off"])
        .args(["--database-url", &db.url, "--wait-for-database", "60s"])
        .stderr(log.reopen().unwrap())
        .spawn()
        .unwrap();
    let limit = Instant::now() + Duration::from_secs(10);
    let (mut samples, mut held) = (0, 0);
    while Instant::now() < limit {
        tokio::time::sleep(Duration::from_millis(100)).await;
        let locks: i64 = sqlx::query_scalar(
            // This database only: other tests' servers (and their gauge
            // collectors, which hold an advisory lock by design) share the
            // cluster.
            "SELECT count(*) FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid \
             WHERE l.locktype = 'advisory' AND l.granted AND a.application_name = 'tidemark' \
               AND a.datname = current_database()",
        )
        .fetch_one(&pool)
        .await
        .unwrap();
        samples += 1;
        held += usize::from(locks > 0);
    }
    let _ = serve.kill();
    let _ = serve.wait();
    pool.close().await;
    let attempts = std::fs::read_to_string(log.path())
        .unwrap()
        .matches("migrations failed")
        .count();
    assert!(attempts >= 2, "serve did not keep retrying its migrations");
    // A lock is held only while an attempt runs (milliseconds), not
    // between attempts, which is nearly every sample.
    assert!(
        held * 5 < samples,
        "an advisory lock stayed held between attempts ({held} of {samples} samples)"
    );
    db.drop_now().await;
}

/// The migration rule: a later release's contract step raised the floor
/// beyond this binary's newest migration, so it refuses to start, at once
/// (not after --wait-for-database), naming its migration and the schema's —
/// through `migrate`, `serve`, and `serve --no-migrate`.
fn refuses_a_schema_beyond_it(url: &str, own: &str) {
    let later = LATER_VERSION.to_string();
    let expect_refusal = |what: &str, output: std::process::Output, elapsed: Duration| {
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(
            !output.status.success(),
            "{what} started on a schema beyond it: {stderr}"
        );
        assert!(
            stderr.contains(&format!("built with {own}"))
                && stderr.contains(&format!("schema is at migration {later}")),
            "{what}: the refusal names neither migration: {stderr}"
        );
        assert!(elapsed < Duration::from_secs(20), "{what} took {elapsed:?} to refuse");
    };
    let started = Instant::now();
    expect_refusal("migrate", migrate(url, &[]), started.elapsed());
    for extra in [&[][..], &["--no-migrate"][..]] {
        let started = Instant::now();
        let output = Command::new(BIN)
            .args(["serve", "--listen", "127.0.0.1:0", "--metrics-listen", "off"])
            .args(["--database-url", url, "--wait-for-database", "60s"])
            .args(extra)
            .output()
            .expect("run tidemark serve");
        expect_refusal(&format!("serve {extra:?}"), output, started.elapsed());
    }
}

#[tokio::test]
async fn a_binary_refuses_a_schema_a_later_contract_step_moved_beyond_it_postgres() {
    let Some(db) = FreshDatabase::create().await else {
        return;
    };
    let contract = format!("INSERT INTO tidemark_schema_rule VALUES ({LATER_VERSION}, {LATER_VERSION})");
    let own = as_a_later_release_left_it(&db.url, &contract).await;
    refuses_a_schema_beyond_it(&db.url, &format!("postgres migration {own:04}"));
    db.drop_now().await;
}

#[tokio::test]
async fn a_binary_refuses_a_schema_a_later_contract_step_moved_beyond_it_sqlite() {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite://{}", dir.path().join("t.db").display());
    let contract = format!("INSERT INTO tidemark_schema_rule VALUES ({LATER_VERSION}, {LATER_VERSION})");
    let own = as_a_later_release_left_it(&url, &contract).await;
    refuses_a_schema_beyond_it(&url, &format!("sqlite migration {own:04}"));
}
