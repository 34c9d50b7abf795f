//! **history**: whether pruning keeps the history table bounded under a
//! sustained commit load (SPEC A5). A tidemark server with a short
//! `--history-retention` and `--sweep-interval` serves 16 committing
//! workers on a database of its own, which starts with a backlog of old
//! history rows (a retention just shortened, or a replica that was down).
//! Sampled every second: the rows older than the retention (the backlog
//! and what ages into it) and all rows. Figures: the commit rate, how fast
//! the sweeper pruned the backlog while the commits went on (and that as a
//! multiple of the commit rate), and the history's size once caught up
//! against what the retention allows.

use std::path::Path;
use std::time::{Duration, Instant};

use serde::Serialize;
use sqlx::PgPool;

use crate::procs::Tidemark;
use crate::work::{self, Batches};

/// The scenario's figures.
#[derive(Debug, Serialize)]
pub(crate) struct HistoryFigures {
    pub workers: usize,
    pub retention_seconds: f64,
    pub sweep_interval_seconds: f64,
    pub backlog_rows: i64,
    pub seconds: f64,
    pub commits_per_second: f64,
    /// Backlog rows pruned per second while the commits went on.
    pub prune_rows_per_second: f64,
    pub prune_to_commit_ratio: f64,
    pub backlog_cleared_after_seconds: Option<f64>,
    /// Rows in the table once the backlog was gone: the largest sample,
    /// and what the retention allows (commits over retention + two sweep
    /// intervals).
    pub steady_rows_max: i64,
    pub steady_rows_allowed: i64,
    pub bounded: bool,
}

/// Runs the scenario on a database of its own on the bench's Postgres.
pub(crate) async fn run(binary: &Path, database_url: &str, quick: bool) -> anyhow::Result<HistoryFigures> {
    let (retention, interval, backlog, seconds) = if quick {
        (Duration::from_secs(2), Duration::from_secs(1), 20_000_i64, 8)
    } else {
        (Duration::from_secs(10), Duration::from_secs(2), 2_000_000, 60)
    };
    let workers = 16;
    let url = work::fresh_database(database_url, "bench_history").await?;

    let dir = tempfile::tempdir()?;
    let retention_flag = humantime::format_duration(retention).to_string();
    let interval_flag = humantime::format_duration(interval).to_string();
    let tidemark = Tidemark::start_with(
        binary,
        &url,
        16,
        dir.path(),
        "warn,tidemark=info",
        &[
            "--history-retention",
            &retention_flag,
            "--sweep-interval",
            &interval_flag,
        ],
    )?;
    let pool = PgPool::connect(&url).await?;
    // The backlog: a day old, shaped like commit rows.
    sqlx::query(
        "INSERT INTO history (at, table_name, branch, consumer_id, event, old_next, new_next, epoch, batch_id, \
         holder, principal, request_id)
         SELECT now() - interval '1 day', 'bench.history', 'main', 'old-' || (g % 1000), 'ADVANCE', g, g + 1, 1, g,
                'bench', 'bench', 'backlog'
         FROM generate_series(1, $1) AS g",
    )
    .bind(backlog)
    .execute(&pool)
    .await?;

    let mut ready = Vec::new();
    for i in 0..workers {
        let mut client = work::coordinator(work::channel(&tidemark.url()).await?, work::Bearer::default());
        let lease = work::tidemark_lease(&mut client, work::key("bench.history", &format!("w{i}")), "bench").await?;
        ready.push((client, lease));
    }
    let started = Instant::now();
    let until = started + Duration::from_secs(seconds);
    let commits = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
    let mut tasks = Vec::new();
    for (mut client, lease) in ready {
        let commits = std::sync::Arc::clone(&commits);
        tasks.push(tokio::spawn(async move {
            let mut batches = Batches::new();
            while Instant::now() < until {
                work::tidemark_commit(&mut client, &lease, &mut batches).await?;
                commits.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            }
            anyhow::Ok(())
        }));
    }
    let retention_us = i64::try_from(retention.as_micros())?;
    let mut cleared_after = None;
    let mut steady_max = 0_i64;
    while Instant::now() < until {
        tokio::time::sleep(Duration::from_secs(1)).await;
        let (old, all): (i64, i64) = sqlx::query_as(
            "SELECT count(*) FILTER (WHERE at < now() - $1 * interval '1 microsecond'), count(*) FROM history",
        )
        .bind(retention_us)
        .fetch_one(&pool)
        .await?;
        // Cleared: less than two sweeps' worth of commits left old.
        if cleared_after.is_none() && old < backlog / 100 {
            cleared_after = Some(started.elapsed());
        } else if cleared_after.is_some() {
            steady_max = steady_max.max(all);
        }
    }
    for task in tasks {
        task.await??;
    }
    let elapsed = started.elapsed().as_secs_f64();
    let commits_per_second = commits.load(std::sync::atomic::Ordering::Relaxed) as f64 / elapsed;
    let prune_rows_per_second = cleared_after.map_or(0.0, |t| backlog as f64 / t.as_secs_f64());
    let allowed = (commits_per_second * (retention + interval * 2).as_secs_f64()).ceil() as i64;
    pool.close().await;
    drop(tidemark);
    Ok(HistoryFigures {
        workers,
        retention_seconds: retention.as_secs_f64(),
        sweep_interval_seconds: interval.as_secs_f64(),
        backlog_rows: backlog,
        seconds: elapsed,
        commits_per_second,
        prune_rows_per_second,
        prune_to_commit_ratio: prune_rows_per_second / commits_per_second.max(1.0),
        backlog_cleared_after_seconds: cleared_after.map(|t| t.as_secs_f64()),
        steady_rows_max: steady_max,
        steady_rows_allowed: allowed,
        bounded: cleared_after.is_some() && steady_max <= allowed,
    })
}

pub(crate) fn print(f: &HistoryFigures) {
    println!(
        "  {} workers committed {:.0}/s for {:.0} s; a backlog of {} old rows was pruned in {} while they did: {:.0} \
         rows/s, {:.1}x the commit rate",
        f.workers,
        f.commits_per_second,
        f.seconds,
        f.backlog_rows,
        f.backlog_cleared_after_seconds
            .map_or("(not cleared)".to_owned(), |s| format!("{s:.1} s")),
        f.prune_rows_per_second,
        f.prune_to_commit_ratio
    );
    println!(
        "  history afterwards (retention {:.0} s, sweeps every {:.0} s): at most {} rows, {} allowed: {}",
        f.retention_seconds,
        f.sweep_interval_seconds,
        f.steady_rows_max,
        f.steady_rows_allowed,
        if f.bounded { "bounded" } else { "NOT BOUNDED" }
    );
}
