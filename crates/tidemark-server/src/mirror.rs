//! The consumer mirror (SPEC §9): for registered Paimon tables, writes each
//! consumer's position into the table's own consumer file, deletes the
//! files of deleted consumers, and rewrites files whose consumer was
//! refreshed, so the file's modification time tracks `updated_at` (Paimon
//! expires consumer files by modification time).
//!
//! The database stays the source of truth. The mirror only ever writes what
//! it read from committed rows, so a file never shows a position before it
//! is durable in the database, and a mirror failure never fails a worker's
//! commit: it is retried every round and reported per consumer
//! (DescribeConsumer) and in the metrics. Every replica runs the mirror;
//! each re-reads a consumer right before writing its file, so a stale write
//! needs a change to land within those few milliseconds, and whatever a
//! stale round leaves behind is corrected by the next one.

use std::collections::HashMap;

use tidemark_core::KeyState;
use tidemark_paimon::PaimonTable;
use tidemark_store::{MirrorTask, Store};
use tokio_util::sync::CancellationToken;

use crate::metrics;
use crate::server::ServerConfig;

/// Most files one round writes.
const ROUND_LIMIT: i64 = 500;

/// Mirrors every `config.mirror_interval` until `stop`.
pub(crate) async fn run(store: Store, config: ServerConfig, stop: CancellationToken) {
    if config.mirror_interval.is_zero() {
        tracing::info!("consumer mirror disabled");
        return;
    }
    let mut tables: HashMap<String, PaimonTable> = HashMap::new();
    loop {
        tokio::select! {
            () = stop.cancelled() => return,
            () = tokio::time::sleep(config.mirror_interval) => {}
        }
        // A full round goes again at once: a backlog drains quickly.
        while let Ok(done) = round(&store, &config, &mut tables).await {
            if done < ROUND_LIMIT as usize || stop.is_cancelled() {
                break;
            }
        }
    }
}

/// One round: every stale file, up to the limit. Returns how many tasks it
/// handled.
pub(crate) async fn round(
    store: &Store,
    config: &ServerConfig,
    tables: &mut HashMap<String, PaimonTable>,
) -> Result<usize, ()> {
    let tasks = match store.backend().mirror_tasks(config.mirror_refresh, ROUND_LIMIT).await {
        Ok(tasks) => tasks,
        Err(e) => {
            tracing::warn!(error = %e, "mirror: cannot read what to mirror; retrying next interval");
            return Err(());
        }
    };
    metrics::mirror_backlog(tasks.len());
    for task in &tasks {
        // Re-read the consumer just before touching its file: a task read at
        // the start of a slow round may be stale by now (another replica, a
        // commit, an operator's rewind), and a stale write could show a
        // position the database no longer holds. Stale tasks come back next
        // round with the current position.
        match store.key_state(&task.key).await {
            Ok(state) if state.as_ref().and_then(KeyState::next_snapshot) == task.next_snapshot => {}
            Ok(_) => continue,
            Err(e) => {
                tracing::warn!(error = %e, "mirror: cannot re-read a consumer; retrying next interval");
                return Err(());
            }
        }
        let outcome = apply(task, tables).await;
        if let Err(e) = &outcome {
            tracing::warn!(consumer = %task.key, location = %task.location, error = %e, "mirror: write failed; retrying");
        }
        metrics::mirror_write(outcome.is_ok());
        if let Err(e) = store.backend().mirror_done(task, outcome.err().as_deref()).await {
            tracing::warn!(error = %e, "mirror: cannot record progress; retrying next interval");
            return Err(());
        }
    }
    Ok(tasks.len())
}

async fn apply(task: &MirrorTask, tables: &mut HashMap<String, PaimonTable>) -> Result<(), String> {
    if !tables.contains_key(&task.location) {
        let table = PaimonTable::open(&task.location).map_err(|e| e.to_string())?;
        tables.insert(task.location.clone(), table);
    }
    let table = &tables[&task.location];
    let (branch, id) = (task.key.branch.as_str(), task.key.consumer_id.as_str());
    match task.next_snapshot {
        Some(next) => table.write_consumer(branch, id, next).await,
        None => table.delete_consumer(branch, id).await,
    }
    .map_err(|e| e.to_string())
}
