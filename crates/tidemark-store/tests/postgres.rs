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
seams_conformance_suite!(Kind::Postgres);
mirror_conformance_suite!(Kind::Postgres);
sessions_conformance_suite!(Kind::Postgres);

/// Deadlines are stamped with the database clock: a lease granted now ends
/// `ttl` after Postgres' `now()`.
#[tokio::test]
async fn postgres_deadlines_come_from_the_database_clock() {
    let Some(db) = TestDb::new(Kind::Postgres).await else {
        return;
    };
    let backend = PostgresBackend::connect(db.url(), &db.direct_postgres_options()).unwrap();
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

/// A load balancer (a Kubernetes service, haproxy, pgbouncer) whose database
/// is down accepts the connection and closes it at once: the driver sees
/// the handshake cut short, which is UNAVAILABLE like any other lost
/// connection, not an internal error.
#[tokio::test]
async fn a_balancer_with_no_database_behind_it_is_unavailable() {
    let options = PostgresOptions {
        acquire_timeout: Duration::from_millis(500),
        ..PostgresOptions::default()
    };
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for connection in listener.incoming() {
            // The client's first message (its SSLRequest) is read, then the
            // connection is closed, as a balancer does once it finds no
            // backend.
            let Ok(mut connection) = connection else { continue };
            let mut first = [0u8; 8];
            let _ = std::io::Read::read_exact(&mut connection, &mut first);
        }
    });
    let backend = PostgresBackend::connect(&format!("postgres://nobody@127.0.0.1:{port}/x"), &options).unwrap();
    let err = backend.ping().await.unwrap_err();
    assert!(matches!(err, StoreError::Unavailable(_)), "{err:?}");
}

/// `n` unleased consumers (`{prefix}1` …) on `table`'s main branch, spread
/// over snapshots 1000 .. 1000 + `spread` in an order unrelated to their ids.
async fn insert_idle_consumers(pool: &sqlx::PgPool, table: &str, prefix: &str, spread: i64, n: i64) {
    sqlx::query(
        "INSERT INTO consumer_keys (table_name, branch, consumer_id, version, epoch, next_snapshot, \
         consumer_created_at, consumer_updated_at) \
         SELECT $1, 'main', $2 || i, 1, 0, 1000 + (i * 7919) % $3, now(), now() \
         FROM generate_series(1, $4) AS i",
    )
    .bind(table)
    .bind(prefix)
    .bind(spread)
    .bind(n)
    .execute(pool)
    .await
    .unwrap();
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
    insert_idle_consumers(&pool, "db.big", "c", 5_000, 20_000).await;
    sqlx::query("ANALYZE consumer_keys").execute(&pool).await.unwrap();
    let plan: Vec<(String,)> = sqlx::query_as(sqlx::AssertSqlSafe(format!(
        "EXPLAIN {}",
        tidemark_store::postgres::BRANCH_CONSUMERS.as_str()
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

/// The fence's pins are read through the pin index in order and the read
/// stops after its limit of live ones, in the generic plan a cached fence
/// statement runs as well as in a custom one. Estimated from the whole
/// table a live lease is rare, so the planner once expected a single live
/// pin and read every pin of the branch through a bitmap scan and sorted
/// them (990 pins: ten times the buffers).
#[tokio::test]
async fn the_fence_reads_pins_in_index_order() {
    let Some(db) = TestDb::new(Kind::Postgres).await else {
        return;
    };
    db.backend().await;
    let pool = db.postgres_pool().await.unwrap();
    // The bench's hard branch (`tidemark-bench`'s `seed_hard_consumers`): a
    // week-old fleet of 100,000 under a one-day expiration time, the lowest
    // 1% idle for two days, one in a hundred above them holding a live
    // lease with a pin; beside it a branch as large without leases, so
    // that, estimated from the whole table, a live lease is rare. That
    // table's name sorts first though its rows came later, as in a real
    // store: with the rows in name order the planner costs an index scan as
    // a sequential read and took the ordered scan by luck.
    sqlx::query(
        "INSERT INTO table_options (table_name, expiration_us, changelog_only, mode, version, updated_at, updated_by) \
         VALUES ('db.hard', 86400000000, false, NULL, 1, now(), 'test')",
    )
    .execute(&pool)
    .await
    .unwrap();
    sqlx::query(
        "INSERT INTO consumer_keys (table_name, branch, consumer_id, version, epoch, next_snapshot, \
           consumer_created_at, consumer_updated_at, lease_id, lease_holder, lease_principal, lease_epoch, \
           lease_status, lease_ttl_us, lease_acquired_at, lease_deadline, lease_wrote_consumer, full_scan_pin) \
         SELECT 'db.hard', 'main', 'consumer-' || i, 1, CASE WHEN leased THEN 1 ELSE 0 END, pos, now() - interval '7 days', \
           CASE WHEN pos < 1500 THEN now() - interval '2 days' ELSE now() END, \
           CASE WHEN leased THEN gen_random_uuid() END, CASE WHEN leased THEN 'w' END, \
           CASE WHEN leased THEN 'anonymous' END, CASE WHEN leased THEN 1 END, CASE WHEN leased THEN 1 END, \
           CASE WHEN leased THEN 3600000000 END, CASE WHEN leased THEN now() END, \
           CASE WHEN leased THEN now() + interval '1 hour' END, CASE WHEN leased THEN false END, \
           CASE WHEN leased THEN 1500 + (i * 31) % 20000 END \
         FROM (SELECT i, 1000 + (i * 7919) % 50000 AS pos, i % 100 = 0 AND 1000 + (i * 7919) % 50000 >= 1500 AS leased \
               FROM generate_series(1, 100000) AS i) AS s",
    )
    .execute(&pool)
    .await
    .unwrap();
    insert_idle_consumers(&pool, "db.archive", "consumer-", 50_000, 100_000).await;
    // Statistics from every row, not a sample, so the plans compared are
    // the same on every run.
    let mut connection = pool.acquire().await.unwrap();
    sqlx::raw_sql("SET default_statistics_target = 10000; ANALYZE consumer_keys")
        .execute(&mut *connection)
        .await
        .unwrap();
    for mode in ["auto", "force_generic_plan"] {
        sqlx::query(sqlx::AssertSqlSafe(format!("SET plan_cache_mode = {mode}")))
            .execute(&mut *connection)
            .await
            .unwrap();
        let statements = [
            tidemark_store::postgres::branch_view_statement,
            tidemark_store::postgres::fence_view_statement,
        ];
        for (limit, statement) in [1, 10, 100].into_iter().flat_map(|l| statements.map(|s| (l, s))) {
            let prepare = format!("PREPARE fence_view(text, text) AS {}", statement(limit));
            sqlx::raw_sql(sqlx::AssertSqlSafe(prepare))
                .execute(&mut *connection)
                .await
                .unwrap();
            let plan: Vec<(String,)> = sqlx::query_as("EXPLAIN EXECUTE fence_view('db.hard', 'main')")
                .fetch_all(&mut *connection)
                .await
                .unwrap();
            sqlx::raw_sql("DEALLOCATE fence_view")
                .execute(&mut *connection)
                .await
                .unwrap();
            let plan: String = plan.into_iter().map(|(line,)| line + "\n").collect();
            assert!(
                plan.contains("Index Scan using consumer_keys_by_pin"),
                "{mode}, limit {limit}:\n{plan}"
            );
            assert!(!plan.contains("Bitmap Heap Scan"), "{mode}, limit {limit}:\n{plan}");
        }
    }
    drop(connection);
    pool.close().await;
}

/// A fence reports only the holders at the fence, so its statement returns
/// only those: the consumers tied at the lowest position and the pins tied
/// at the lowest pin, not the lowest hundred of each for the server to
/// decode and drop.
#[tokio::test]
async fn the_fence_statement_returns_only_the_holders_at_the_fence() {
    let Some(db) = TestDb::new(Kind::Postgres).await else {
        return;
    };
    db.backend().await;
    let pool = db.postgres_pool().await.unwrap();
    // 20,000 consumers, four at each position from 1000; every tenth holds a
    // live lease pinning a full scan, two at each pin from 500.
    sqlx::query(
        "INSERT INTO consumer_keys (table_name, branch, consumer_id, version, epoch, next_snapshot, \
           consumer_created_at, consumer_updated_at, lease_id, lease_holder, lease_principal, lease_epoch, \
           lease_status, lease_ttl_us, lease_acquired_at, lease_deadline, lease_wrote_consumer, full_scan_pin) \
         SELECT 'db.big', 'main', 'c' || i, 1, CASE WHEN pinned THEN 1 ELSE 0 END, 1000 + i % 5000, \
           now(), now(), CASE WHEN pinned THEN gen_random_uuid() END, CASE WHEN pinned THEN 'w' END, \
           CASE WHEN pinned THEN 'anonymous' END, CASE WHEN pinned THEN 1 END, CASE WHEN pinned THEN 1 END, \
           CASE WHEN pinned THEN 3600000000 END, CASE WHEN pinned THEN now() END, \
           CASE WHEN pinned THEN now() + interval '1 hour' END, CASE WHEN pinned THEN false END, \
           CASE WHEN pinned THEN 500 + (i / 10) % 1000 END \
         FROM (SELECT i, i % 10 = 0 AS pinned FROM generate_series(1, 20000) AS i) AS s",
    )
    .execute(&pool)
    .await
    .unwrap();
    sqlx::query("ANALYZE consumer_keys").execute(&pool).await.unwrap();
    for limit in [1, 3, 100, 1000] {
        let rows: Vec<(Option<i32>, Option<i64>, Option<String>)> = sqlx::query(sqlx::AssertSqlSafe(
            tidemark_store::postgres::fence_view_statement(limit),
        ))
        .bind("db.big")
        .bind("main")
        .fetch_all(&pool)
        .await
        .unwrap()
        .into_iter()
        .map(|row: sqlx::postgres::PgRow| {
            use sqlx::Row;
            (row.get("kind"), row.get("fence_position"), row.get("consumer_id"))
        })
        .collect();
        let consumers: Vec<_> = rows.iter().filter(|r| r.0 == Some(0)).collect();
        let pins: Vec<_> = rows.iter().filter(|r| r.0 == Some(1)).collect();
        let (consumer_ties, pin_ties) = if limit == 1 { (1, 1) } else { (4, 2) };
        assert_eq!(consumers.len(), consumer_ties, "limit {limit}: {rows:?}");
        assert!(consumers.iter().all(|r| r.1 == Some(1000)), "limit {limit}: {rows:?}");
        assert_eq!(pins.len(), pin_ties, "limit {limit}: {rows:?}");
        assert!(pins.iter().all(|r| r.1 == Some(500)), "limit {limit}: {rows:?}");
    }
    pool.close().await;
}

/// Fences are read thousands of times a second: after Postgres' first few
/// custom plans the fence statement must run from its cached generic plan.
/// With the holder limit bound as a parameter it never did (the planner
/// costs `LIMIT $n` at a tenth of the branch, so a custom plan always won
/// and every fence paid ~0.4 ms of planning for ~0.07 ms of execution).
#[tokio::test]
async fn fences_run_from_a_cached_generic_plan() {
    let Some(db) = TestDb::new(Kind::Postgres).await else {
        return;
    };
    // One connection, so every fence below uses the statement cached on it.
    let options = PostgresOptions {
        max_connections: 1,
        ..db.direct_postgres_options()
    };
    let backend = PostgresBackend::connect(db.url(), &options).unwrap();
    backend.migrate().await.unwrap();
    insert_idle_consumers(backend.pool(), "db.big", "c", 5_000, 20_000).await;
    sqlx::query("ANALYZE consumer_keys")
        .execute(backend.pool())
        .await
        .unwrap();
    let store = Store::new(Arc::new(backend.clone()), LeasePolicy::default());
    let table = tidemark_core::TableName::parse("db.big", "table").unwrap();
    let branch = tidemark_core::BranchName::parse("main", "branch").unwrap();
    for holders in [1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 3, 3, 3, 3, 3, 3, 3, 3] {
        let report = store.fence(&table, &branch, false, holders).await.unwrap();
        assert_eq!(report.fences.snapshot, Some(1000));
    }
    let plans: Vec<(String, i64, i64)> = sqlx::query_as(
        "SELECT statement, generic_plans, custom_plans FROM pg_prepared_statements \
         WHERE statement LIKE '%holders AS%' AND statement NOT LIKE '%pg_prepared_statements%'",
    )
    .fetch_all(backend.pool())
    .await
    .unwrap();
    assert!(!plans.is_empty(), "the fence statement is prepared");
    for (statement, generic, custom) in &plans {
        assert!(
            *generic > 0 && *custom <= 5,
            "{generic} generic and {custom} custom plans for:\n{statement}"
        );
    }
    eprintln!(
        "fence statements' (generic, custom) plans: {:?}",
        plans.iter().map(|p| (p.1, p.2)).collect::<Vec<_>>()
    );
}

/// The fence statement reads a step of holders (1, 10, 100, 1000) and
/// keeps the caller's own number: ties at the fence beyond it are left out,
/// lowest consumer ids kept, as a statement limited to that number would.
#[tokio::test]
async fn fences_keep_the_callers_number_of_holders_within_a_step() {
    let Some(db) = TestDb::new(Kind::Postgres).await else {
        return;
    };
    let backend = PostgresBackend::connect(db.url(), &db.direct_postgres_options()).unwrap();
    backend.migrate().await.unwrap();
    sqlx::query(
        "INSERT INTO consumer_keys (table_name, branch, consumer_id, version, epoch, next_snapshot, \
         consumer_created_at, consumer_updated_at) \
         SELECT 'db.ties', 'main', 'c' || i, 1, 0, 7, now(), now() FROM generate_series(0, 5) AS i",
    )
    .execute(backend.pool())
    .await
    .unwrap();
    let store = Store::new(Arc::new(backend.clone()), LeasePolicy::default());
    let table = tidemark_core::TableName::parse("db.ties", "table").unwrap();
    let branch = tidemark_core::BranchName::parse("main", "branch").unwrap();
    let report = store.fence(&table, &branch, false, 2).await.unwrap();
    assert_eq!(report.fences.snapshot, Some(7));
    let holders: Vec<&str> = report
        .snapshot_holders
        .iter()
        .map(|h| h.view.state.key.consumer_id.as_str())
        .collect();
    assert_eq!(holders, ["c0", "c1"]);
    let explained = store.explain(&table, &branch, false, 3).await.unwrap();
    assert_eq!(explained.holders.len(), 3);
    assert!(explained.truncated);
}

mod group_commit {
    use std::sync::Arc;
    use std::time::Duration;

    use futures::future::join_all;
    use tidemark_core::CommitOutcome;
    use tidemark_store::{PostgresBackend, PostgresOptions, Store};
    use tidemark_testkit::{Kind, TestDb};

    use crate::conformance::{commit_req, ctx, key, off, policy, rule};

    /// A replica whose statements gather for 1 ms (off by default): the
    /// checks below then hold on the path with the most batching.
    async fn replica(db: &TestDb, in_flight: usize) -> (PostgresBackend, Store) {
        gathering_replica(db, in_flight, Duration::from_millis(1)).await
    }

    async fn gathering_replica(db: &TestDb, in_flight: usize, wait: Duration) -> (PostgresBackend, Store) {
        let options = PostgresOptions {
            group_commit: in_flight,
            group_commit_wait: wait,
            ..db.direct_postgres_options()
        };
        let backend = PostgresBackend::connect(db.url(), &options).unwrap();
        tidemark_store::Backend::migrate(&backend).await.unwrap();
        let store = Store::new(Arc::new(backend.clone()), policy());
        (backend, store)
    }

    /// Commits arriving together share statements, yet each is applied on
    /// its own terms: every acknowledged commit is in the history and the
    /// final position, a revoked lease's commits are refused, and commits
    /// racing on one lease serialize.
    #[tokio::test]
    async fn concurrent_commits_share_statements_and_each_keeps_its_own_checks() {
        let Some(db) = TestDb::new(Kind::Postgres).await else {
            return;
        };
        // One statement in flight: everything that arrives meanwhile waits
        // for the next one, so batches surely form.
        let (backend, store) = replica(&db, 1).await;
        let (_, operator) = replica(&db, 0).await;
        let keys: Vec<_> = (0..32).map(|i| key(&format!("group-{i}"))).collect();
        let mut leases = Vec::new();
        for k in &keys {
            leases.push(store.acquire_lease(&ctx("a"), k, "q", None).await.unwrap().lease);
        }
        let workers = leases.iter().enumerate().map(|(i, lease)| {
            let store = store.clone();
            let operator = operator.clone();
            let k = keys[i].clone();
            let lease_id = lease.lease_id;
            tokio::spawn(async move {
                let mut acked = Vec::new();
                for batch in 0..12i64 {
                    // Every fourth key is revoked by an operator midway.
                    if i % 4 == 0 && batch == 6 {
                        operator
                            .revoke(&ctx("revoke"), &k, "test", true)
                            .await
                            .map(|planned| planned.change)
                            .unwrap();
                    }
                    match store
                        .commit_batch(
                            &ctx(&format!("c{i}-{batch}")),
                            &commit_req(lease_id, 1, batch, off(10 + batch, 0, false, Some(1))),
                        )
                        .await
                    {
                        Ok(done) => {
                            assert_eq!(done.next_snapshot, Some(10 + batch + 1));
                            acked.push(batch);
                        }
                        Err(e) => {
                            assert_eq!(rule(e).reason(), "LEASE_NOT_HELD", "key {i} batch {batch}");
                            assert!(i % 4 == 0 && batch >= 6, "key {i} batch {batch} refused");
                            break;
                        }
                    }
                }
                (i, k, lease_id, acked)
            })
        });
        // Meanwhile, 24 commits race on one more lease.
        let shared = key("group-shared");
        let shared_lease = store.acquire_lease(&ctx("a"), &shared, "q", None).await.unwrap().lease;
        let racing = (0..24i64).map(|batch| {
            let store = store.clone();
            tokio::spawn(async move {
                let end = off(100 + batch, 0, false, Some(2));
                (
                    batch,
                    store
                        .commit_batch(&ctx("r"), &commit_req(shared_lease.lease_id, 1, batch, end))
                        .await,
                )
            })
        });
        let (workers, racing) = futures::join!(join_all(workers), join_all(racing));
        for worker in workers {
            let (i, k, lease_id, acked) = worker.unwrap();
            let history = store.history(&k, 100).await.unwrap();
            let mut committed: Vec<i64> = history.iter().filter_map(|h| h.event.batch_id).collect();
            committed.reverse();
            assert_eq!(committed, acked, "{k}: history holds exactly the acknowledged commits");
            // Each batched history row is its own commit's, column by column.
            for h in history.iter().filter(|h| h.event.batch_id.is_some()) {
                let batch = h.event.batch_id.unwrap();
                assert_eq!(
                    (h.principal.as_str(), h.request_id.as_str()),
                    ("tester", format!("c{i}-{batch}").as_str()),
                    "{k} batch {batch}"
                );
                assert_eq!(
                    (h.event.epoch, h.event.lease_id, h.event.holder.as_deref()),
                    (Some(1), Some(lease_id), Some("q")),
                    "{k} batch {batch}"
                );
                assert_eq!(h.event.new_next, Some(10 + batch + 1), "{k} batch {batch}");
            }
            let last = *acked.last().unwrap();
            assert_eq!(
                store.key_state(&k).await.unwrap().unwrap().next_snapshot(),
                Some(10 + last + 1)
            );
        }
        let mut applied = 0;
        for r in racing {
            match r.unwrap() {
                (batch, Ok(c)) if c.outcome.writes_consumer() => {
                    applied += 1;
                    assert_eq!(c.next_snapshot, Some(100 + batch));
                }
                (batch, Ok(c)) => assert_eq!(c.outcome, CommitOutcome::Duplicate, "batch {batch}"),
                (batch, Err(e)) => panic!("batch {batch}: {e:?}"),
            }
        }
        let state = store.key_state(&shared).await.unwrap().unwrap();
        let last = state.lease.as_ref().unwrap().last_batch.unwrap();
        assert_eq!(state.next_snapshot(), Some(100 + last.batch_id));
        let history = store.history(&shared, 100).await.unwrap();
        assert_eq!(history.iter().filter(|h| h.event.batch_id.is_some()).count(), applied);

        let stats = backend.group_commit_stats().unwrap();
        assert!(
            stats.statements < stats.writes,
            "commits that arrived together shared statements: {stats:?}"
        );
    }

    /// Mean writes per statement for 16 workers committing in a closed loop
    /// (each sends its next commit once the last is answered).
    async fn closed_loop_batch_size(db: &TestDb, name: &str, wait: Duration) -> f64 {
        const WORKERS: usize = 16;
        const COMMITS: i64 = 30;
        let (backend, store) = gathering_replica(db, 1, wait).await;
        let mut leases = Vec::new();
        for i in 0..WORKERS {
            let k = key(&format!("{name}-{i}"));
            leases.push(store.acquire_lease(&ctx("a"), &k, "q", None).await.unwrap().lease);
        }
        let before = backend.group_commit_stats().unwrap();
        let workers = leases.into_iter().map(|lease| {
            let store = store.clone();
            tokio::spawn(async move {
                for batch in 0..COMMITS {
                    let done = store
                        .commit_batch(
                            &ctx("c"),
                            &commit_req(lease.lease_id, 1, batch, off(10 + batch, 0, false, Some(1))),
                        )
                        .await
                        .unwrap();
                    assert_eq!(done.next_snapshot, Some(11 + batch));
                }
            })
        });
        for worker in join_all(workers).await {
            worker.unwrap();
        }
        let after = backend.group_commit_stats().unwrap();
        assert_eq!(after.writes - before.writes, (WORKERS as u64) * COMMITS as u64);
        (after.writes - before.writes) as f64 / (after.statements - before.statements) as f64
    }

    /// Closed-loop workers (every Spark query: its next commit waits for the
    /// last) split into cohorts that alternate between statements, each
    /// paying a statement's fixed cost for a share of the writes; gathering
    /// lets those just answered ride the next statement, which is what
    /// halves the database's CPU per commit at 16 workers.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn gathering_puts_closed_loop_workers_in_one_statement() {
        let Some(db) = TestDb::new(Kind::Postgres).await else {
            return;
        };
        let alternating = closed_loop_batch_size(&db, "cohorts", Duration::ZERO).await;
        // Generous: a loaded test machine may delay a worker's next call
        // by milliseconds, and a wait that runs out only shrinks one batch.
        let gathered = closed_loop_batch_size(&db, "gathered", Duration::from_millis(50)).await;
        eprintln!("writes per statement: {alternating:.1} without gathering, {gathered:.1} with");
        assert!(
            gathered >= 12.0,
            "16 closed-loop workers share statements of {gathered:.1} writes"
        );
    }

    /// Two replicas batching commits on the same keys in opposite orders:
    /// a batch never waits for a row the other holds (it skips it and that
    /// write goes on its own), so nothing deadlocks and every commit
    /// resolves.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn replicas_batching_the_same_keys_resolve_every_commit() {
        const ROUNDS: i64 = 100;
        let Some(db) = TestDb::new(Kind::Postgres).await else {
            return;
        };
        let (first, a) = replica(&db, 1).await;
        let (second, b) = replica(&db, 1).await;
        // A table big enough that Postgres reaches the rows by index, in
        // each statement's own order, rather than by one shared scan.
        let pool = db.postgres_pool().await.unwrap();
        sqlx::query(
            "INSERT INTO consumer_keys (table_name, branch, consumer_id, version, epoch) \
             SELECT 'db.filler', 'main', 'f' || i, 1, 0 FROM generate_series(1, 20000) AS i",
        )
        .execute(&pool)
        .await
        .unwrap();
        sqlx::query("ANALYZE consumer_keys").execute(&pool).await.unwrap();
        let keys: Vec<_> = (0..16).map(|i| key(&format!("order-{i}"))).collect();
        let mut leases = Vec::new();
        for k in &keys {
            leases.push(a.acquire_lease(&ctx("a"), k, "q", None).await.unwrap().lease);
        }
        // Each replica commits every key, round after round, on its own
        // schedule: one in key order, the other in reverse.
        let lease_ids: Vec<_> = leases.iter().map(|l| l.lease_id).collect();
        let replica_loop = |store: Store, lease_ids: Vec<uuid::Uuid>| {
            tokio::spawn(async move {
                for round in 0..ROUNDS {
                    let commits = lease_ids.iter().map(|&lease_id| {
                        let store = store.clone();
                        tokio::spawn(async move {
                            let end = off(round + 1, 0, false, Some(1));
                            store
                                .commit_batch(&ctx("o"), &commit_req(lease_id, 1, round, end))
                                .await
                        })
                    });
                    for r in join_all(commits).await {
                        let done = r.unwrap().unwrap();
                        assert!(
                            done.outcome.writes_consumer() || done.outcome == CommitOutcome::Duplicate,
                            "{done:?}"
                        );
                    }
                }
            })
        };
        let backward = lease_ids.iter().rev().copied().collect();
        let (x, y) = futures::join!(replica_loop(a.clone(), lease_ids), replica_loop(b.clone(), backward));
        x.unwrap();
        y.unwrap();
        for k in &keys {
            assert_eq!(a.key_state(k).await.unwrap().unwrap().next_snapshot(), Some(ROUNDS + 1));
        }
        for stats in [
            first.group_commit_stats().unwrap(),
            second.group_commit_stats().unwrap(),
        ] {
            assert!(stats.statements < stats.writes, "{stats:?}");
        }
    }

    /// A commit whose row another transaction holds locked waits on its
    /// own: the commits queued behind it, on other keys, go ahead.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_locked_row_holds_up_only_its_own_commit() {
        let Some(db) = TestDb::new(Kind::Postgres).await else {
            return;
        };
        let (backend, store) = replica(&db, 1).await;
        let keys: Vec<_> = (0..8).map(|i| key(&format!("hol-{i}"))).collect();
        let mut leases = Vec::new();
        for k in &keys {
            leases.push(store.acquire_lease(&ctx("a"), k, "q", None).await.unwrap().lease);
        }
        let pool = db.postgres_pool().await.unwrap();
        let mut holder = pool.begin().await.unwrap();
        sqlx::query("SELECT 1 FROM consumer_keys WHERE consumer_id = 'hol-0' FOR UPDATE")
            .execute(&mut *holder)
            .await
            .unwrap();
        let commit = |i: usize, batch: i64| {
            let store = store.clone();
            let lease_id = leases[i].lease_id;
            tokio::spawn(async move {
                store
                    .commit_batch(
                        &ctx("h"),
                        &commit_req(lease_id, 1, batch, off(5 + batch, 0, false, Some(1))),
                    )
                    .await
            })
        };
        let blocked = commit(0, 0);
        tokio::time::sleep(Duration::from_millis(100)).await;
        // Rounds of commits on the other keys finish while the lock holds.
        for batch in 0..5 {
            let others: Vec<_> = (1..keys.len()).map(|i| commit(i, batch)).collect();
            let done = tokio::time::timeout(Duration::from_secs(5), join_all(others))
                .await
                .expect("commits on other keys are not held up by a locked row");
            for r in done {
                assert!(r.unwrap().unwrap().outcome.writes_consumer());
            }
        }
        assert!(!blocked.is_finished(), "the locked row's commit waits for the lock");
        holder.rollback().await.unwrap();
        let unblocked = tokio::time::timeout(Duration::from_secs(5), blocked)
            .await
            .expect("the commit goes through once the lock is released")
            .unwrap()
            .unwrap();
        assert_eq!(unblocked.next_snapshot, Some(6));
        assert!(backend.group_commit_stats().unwrap().alone >= 1);
    }
}

mod group_read {
    use std::sync::Arc;

    use futures::future::join_all;
    use tidemark_store::{PostgresBackend, PostgresOptions, Store};
    use tidemark_testkit::{Kind, TestDb};

    use crate::conformance::{commit_req, ctx, key, off, policy};

    async fn replica(db: &TestDb, group_read: usize) -> (PostgresBackend, Store) {
        let options = PostgresOptions {
            group_read,
            ..db.direct_postgres_options()
        };
        let backend = PostgresBackend::connect(db.url(), &options).unwrap();
        tidemark_store::Backend::migrate(&backend).await.unwrap();
        let store = Store::new(Arc::new(backend.clone()), policy());
        (backend, store)
    }

    /// Reads arriving together share statements, and each caller gets its
    /// own key's state (a key with no row gets none), whatever its place in
    /// the batch.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn concurrent_reads_share_statements_and_each_gets_its_own_key() {
        let Some(db) = TestDb::new(Kind::Postgres).await else {
            return;
        };
        let (backend, store) = replica(&db, 1).await;
        let keys: Vec<_> = (0..24).map(|i| key(&format!("read-{i}"))).collect();
        for (i, k) in keys.iter().enumerate() {
            let lease = store.acquire_lease(&ctx("a"), k, "q", None).await.unwrap().lease;
            let end = off(100 + i as i64, 0, false, Some(1));
            store
                .commit_batch(&ctx("c"), &commit_req(lease.lease_id, 1, 0, end))
                .await
                .unwrap();
        }
        let before = backend.group_read_stats().unwrap();
        let reads = (0..8).flat_map(|round| {
            keys.iter().enumerate().map(move |(i, k)| (round, i, k.clone())).chain(
                // A key that was never used, among the others.
                std::iter::once((round, usize::MAX, key(&format!("read-missing-{round}")))),
            )
        });
        let answers = join_all(reads.map(|(round, i, k)| {
            let store = store.clone();
            tokio::spawn(async move { (round, i, k.clone(), store.key_state(&k).await) })
        }))
        .await;
        for answer in answers {
            let (round, i, k, state) = answer.unwrap();
            let state = state.unwrap();
            if i == usize::MAX {
                assert!(state.is_none(), "round {round}: {k} has no row, got {state:?}");
                continue;
            }
            let state = state.unwrap_or_else(|| panic!("round {round}: {k} has a row"));
            assert_eq!(state.key, k, "round {round}: the answer is for another key");
            assert_eq!(state.next_snapshot(), Some(101 + i as i64), "round {round}: {k}");
        }
        let after = backend.group_read_stats().unwrap();
        let (statements, reads) = (after.statements - before.statements, after.reads - before.reads);
        assert_eq!(reads, 8 * 25, "every read went through the queue");
        assert!(
            statements < reads,
            "reads were shared: {reads} reads in {statements} statements"
        );
    }

    /// A read is sent only after its call arrived: a replica reading with
    /// group reads sees every commit another replica acknowledged before
    /// the read was asked, never an older state.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_read_sees_every_commit_acknowledged_before_it() {
        let Some(db) = TestDb::new(Kind::Postgres).await else {
            return;
        };
        let (_, writer) = replica(&db, 0).await;
        let (backend, reader) = replica(&db, 1).await;
        let workers = (0..16).map(|w| {
            let writer = writer.clone();
            let reader = reader.clone();
            tokio::spawn(async move {
                let k = key(&format!("fresh-{w}"));
                let lease = writer.acquire_lease(&ctx("a"), &k, "q", None).await.unwrap().lease;
                for batch in 0..25i64 {
                    let end = off(10 + batch, 0, false, Some(1));
                    writer
                        .commit_batch(&ctx("c"), &commit_req(lease.lease_id, 1, batch, end))
                        .await
                        .unwrap();
                    let seen = reader.key_state(&k).await.unwrap().unwrap().next_snapshot();
                    assert_eq!(
                        seen,
                        Some(11 + batch),
                        "{k}: a read after commit {batch} was acknowledged"
                    );
                }
            })
        });
        for worker in join_all(workers).await {
            worker.unwrap();
        }
        let stats = backend.group_read_stats().unwrap();
        assert!(stats.reads >= 16 * 25, "the reads went through the queue: {stats:?}");
    }
}

/// SPEC §1: a deadline is judged when the write lands, by the database clock
/// read once the row is locked. A commit that waits on a row lock another
/// transaction holds past its lease's deadline is refused, although the
/// lease was live when the commit's statement started. Both with group
/// commit (a locked row goes alone) and without.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_a_commit_that_waited_on_a_row_lock_past_its_deadline_is_refused() {
    let Some(db) = TestDb::new(Kind::Postgres).await else {
        return;
    };
    for group_commit in [0, 1] {
        let options = PostgresOptions {
            group_commit,
            ..db.direct_postgres_options()
        };
        let backend = PostgresBackend::connect(db.url(), &options).unwrap();
        backend.migrate().await.unwrap();
        let store = Store::new(Arc::new(backend.clone()), conformance::policy());
        let ctx = CallContext::internal("t");
        let id = format!("waits-{group_commit}");
        let key = tidemark_core::ConsumerKey::parse("db.t", "main", &id, "").unwrap();
        let ttl = Duration::from_secs(1);
        let lease = store.acquire_lease(&ctx, &key, "q", Some(ttl)).await.unwrap().lease;
        let mut holder = backend.pool().begin().await.unwrap();
        sqlx::query("SELECT 1 FROM consumer_keys WHERE consumer_id = $1 FOR UPDATE")
            .bind(&id)
            .execute(&mut *holder)
            .await
            .unwrap();
        let commit = {
            let store = store.clone();
            let ctx = ctx.clone();
            tokio::spawn(async move {
                let req = conformance::commit_req(lease.lease_id, 1, 0, conformance::off(4, 0, false, Some(1)));
                store.commit_batch(&ctx, &req).await
            })
        };
        // Twice the ttl: the lease is over by any clock when the lock goes.
        tokio::time::sleep(2 * ttl).await;
        assert!(!commit.is_finished(), "the commit waits for the row lock");
        holder.rollback().await.unwrap();
        match commit.await.unwrap() {
            Err(StoreError::Rule(tidemark_core::CoreError::LeaseNotHeld { .. })) => {}
            other => panic!(
                "group commit {group_commit}: a commit landing after its lease's deadline must be refused, got \
                 {other:?}"
            ),
        }
        assert_eq!(store.key_state(&key).await.unwrap().unwrap().next_snapshot(), None);
        backend.close().await;
    }
}

/// A commit whose row another transaction updated while the commit waited
/// for its lock: the update reaches the row by the address its lock
/// returned, which then holds a version the statement's snapshot cannot
/// see. Nothing may be written over it blindly and nothing may be lost:
/// the commit finds the row moved on, reads it again and lands on top of
/// the other write (two version bumps, the position an uncontended commit
/// gets), instead of failing the worker.
/// Both with group commit (a locked row goes alone) and without.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_a_commit_whose_row_was_updated_while_it_waited_lands_on_top() {
    let Some(db) = TestDb::new(Kind::Postgres).await else {
        return;
    };
    for group_commit in [0, 1] {
        let options = PostgresOptions {
            group_commit,
            ..db.direct_postgres_options()
        };
        let backend = PostgresBackend::connect(db.url(), &options).unwrap();
        backend.migrate().await.unwrap();
        let store = Store::new(Arc::new(backend.clone()), conformance::policy());
        let ctx = CallContext::internal("t");
        let commit_on = |id: String| {
            let (store, ctx) = (store.clone(), ctx.clone());
            async move {
                let key = tidemark_core::ConsumerKey::parse("db.t", "main", &id, "").unwrap();
                let lease = store
                    .acquire_lease(&ctx, &key, "q", Some(Duration::from_secs(60)))
                    .await
                    .unwrap();
                (key, lease.lease)
            }
        };
        let request = |lease_id| conformance::commit_req(lease_id, 1, 0, conformance::off(4, 0, false, Some(1)));
        // The same commit on a key nobody else touches: what it should land as.
        let (reference, lease) = commit_on(format!("moved-ref-{group_commit}")).await;
        store.commit_batch(&ctx, &request(lease.lease_id)).await.unwrap();
        let expected = store.key_state(&reference).await.unwrap().unwrap().next_snapshot();
        assert!(expected.is_some());

        let id = format!("moved-{group_commit}");
        let (key, lease) = commit_on(id.clone()).await;
        let version_of = |id: String| {
            let pool = backend.pool().clone();
            async move {
                sqlx::query_scalar::<_, i64>("SELECT version FROM consumer_keys WHERE consumer_id = $1")
                    .bind(id)
                    .fetch_one(&pool)
                    .await
                    .unwrap()
            }
        };
        let before = version_of(id.clone()).await;
        let mut holder = backend.pool().begin().await.unwrap();
        sqlx::query("UPDATE consumer_keys SET version = version + 1, latest_snapshot = 99 WHERE consumer_id = $1")
            .bind(&id)
            .execute(&mut *holder)
            .await
            .unwrap();
        let commit = {
            let (store, ctx) = (store.clone(), ctx.clone());
            let req = request(lease.lease_id);
            tokio::spawn(async move { store.commit_batch(&ctx, &req).await })
        };
        tokio::time::sleep(Duration::from_millis(500)).await;
        assert!(!commit.is_finished(), "the commit waits for the row lock");
        holder.commit().await.unwrap();
        let answer = commit.await.unwrap();
        assert!(answer.is_ok(), "group commit {group_commit}: {answer:?}");
        let state = store.key_state(&key).await.unwrap().unwrap();
        assert_eq!(state.next_snapshot(), expected, "group commit {group_commit}");
        assert_eq!(
            version_of(id).await,
            before + 2,
            "group commit {group_commit}: both writes bumped it"
        );
        backend.close().await;
    }
}

/// Postgres class 58 (system error: `58030` io_error, a failing disk or
/// volume) is a condition of the deployment, not a bug: UNAVAILABLE
/// (retryable). A trigger raises it as the server would.
#[tokio::test]
async fn postgres_io_error_is_unavailable() {
    let Some(db) = TestDb::new(Kind::Postgres).await else {
        return;
    };
    let backend = PostgresBackend::connect(db.url(), &db.direct_postgres_options()).unwrap();
    backend.migrate().await.unwrap();
    sqlx::raw_sql(
        "CREATE FUNCTION fail_with_io_error() RETURNS trigger LANGUAGE plpgsql AS \
         $$ BEGIN RAISE EXCEPTION 'could not write block' USING ERRCODE = '58030'; END $$; \
         CREATE TRIGGER io_error BEFORE INSERT OR UPDATE ON consumer_keys \
         FOR EACH ROW EXECUTE FUNCTION fail_with_io_error();",
    )
    .execute(backend.pool())
    .await
    .unwrap();
    let store = Store::new(Arc::new(backend.clone()), LeasePolicy::default());
    let key = tidemark_core::ConsumerKey::parse("db.t", "main", "c", "").unwrap();
    let err = store
        .acquire_lease(&CallContext::internal("t"), &key, "q", Some(Duration::from_secs(60)))
        .await
        .unwrap_err();
    assert!(matches!(err, StoreError::Unavailable(_)), "{err:?}");
}
