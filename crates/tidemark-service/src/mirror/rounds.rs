//! The rounds: every interval, the files whose consumer moved, was
//! dropped or is due a refresh, brought up to date.

use std::collections::HashMap;
use std::time::Duration;

use tidemark_core::KeyState;
use tidemark_paimon::{ObjectVersion, PaimonTable, Written};
use tidemark_store::{MirrorBackoff, MirrorFailure, MirrorTask, Store};
use tracing::Instrument;

use super::files::{
    FileTurns, Rewritten, concurrently, delete_dropped, outside_change, record_repair, undo_if_dropped,
};
use crate::metrics;

/// Most files one round writes.
pub(super) const ROUND_LIMIT: i64 = 500;

/// What a round did.
#[derive(Debug, Clone, Copy)]
pub(super) struct RoundDone {
    /// Tasks handled.
    pub(super) tasks: usize,
    /// Of those, tasks whose file could not be written (each now waits out
    /// its backoff).
    pub(super) failed: usize,
}

/// One round: every stale file, up to the limit. Returns what it handled;
/// `Err` when the database could not be read or written.
pub(super) async fn round(
    store: &Store,
    refresh: Duration,
    backoff: MirrorBackoff,
    tables: &mut HashMap<String, PaimonTable>,
    turns: &FileTurns,
) -> Result<RoundDone, ()> {
    let tasks = match store.paimon().mirror_tasks(refresh, ROUND_LIMIT).await {
        Ok(tasks) => tasks,
        Err(e) => {
            tracing::warn!(error = %e, "mirror: cannot read what to mirror; retrying next interval");
            return Err(());
        }
    };
    metrics::mirror_backlog(tasks.len());
    let mut work = Vec::with_capacity(tasks.len());
    for task in &tasks {
        let table = match tables.get(&task.location) {
            Some(table) => Ok(table.clone()),
            None => PaimonTable::open(&task.location)
                .map(|table| tables.entry(task.location.clone()).or_insert(table).clone())
                .map_err(|e| e.to_string()),
        };
        work.push((task.clone(), table));
    }
    // Many files at once (object stores answer each put in tens of
    // milliseconds); a round holds each key once, so no two writes of one
    // file race inside a replica.
    let outcomes = concurrently(work, {
        let (store, turns) = (store.clone(), turns.clone());
        move |(task, table): (MirrorTask, Result<PaimonTable, String>)| {
            let (store, turns) = (store.clone(), turns.clone());
            async move {
                // Re-read, written and recorded in this file's turn.
                let _turn = turns.take(&task.location, &task.key).await;
                // A trace per file brought up to date: the re-read, the
                // write to the table's store, the record of it.
                let span = tracing::debug_span!("mirror consumer", otel.name = "tidemark.mirror_consumer", consumer = %task.key);
                mirror_one(&store, &task, table, backoff).instrument(span).await
            }
        }
    })
    .await;
    let mut failed = 0;
    for outcome in outcomes {
        match outcome {
            Ok(Mirrored::Done) => {}
            Ok(Mirrored::Failed) => failed += 1,
            Err(()) => return Err(()),
        }
    }
    Ok(RoundDone {
        tasks: tasks.len(),
        failed,
    })
}

/// What became of one task.
enum Mirrored {
    /// Written, deleted, left for a later round, or lost to another writer.
    Done,
    /// The file could not be written: recorded, and waiting out its backoff.
    Failed,
}

/// Brings one consumer's file up to date. `Err` when the database cannot
/// be read or written (the round stops; retried next interval).
async fn mirror_one(
    store: &Store,
    task: &MirrorTask,
    table: Result<PaimonTable, String>,
    backoff: MirrorBackoff,
) -> Result<Mirrored, ()> {
    let record = |outcome: Result<(), String>| record(store, task, outcome, backoff);
    let table = match table {
        Ok(table) => table,
        Err(e) => return record(Err(e)).await,
    };
    // The object (its content and version) before the database: a put over
    // it lands only if no one wrote since the position below was read. The
    // content, then what tidemark last wrote, tell an outside change (the
    // keeper's to find, but a commit or a refresh may bring a round here
    // first), which is written back and recorded, never overwritten silently.
    let (branch, id) = (task.key.branch.as_str(), task.key.consumer_id.as_str());
    let (found, seen) = match task.next_snapshot {
        Some(_) => match table.consumer_file_versioned(branch, id).await {
            Ok((found, seen)) => (Some(found), seen),
            Err(e) => return record(Err(e.to_string())).await,
        },
        None => (None, None),
    };
    let last_written = match found {
        Some(_) => store.paimon().mirror_state(&task.key).await.ok().flatten(),
        None => None,
    };
    // Re-read the consumer just before touching its file: a task read at
    // the start of a slow round may be stale by now (another replica, a
    // commit, an operator's rewind), and a stale write could show a
    // position the database no longer holds. Stale tasks come back next
    // round with the current position.
    if !still_current(store, task).await? {
        return Ok(Mirrored::Done);
    }
    let outcome = match task.next_snapshot {
        Some(next) => table.write_consumer_if(branch, id, next, seen.as_ref()).await,
        // Came back and written again: that write recorded itself, and
        // recording "no file" now would hide the file from every round.
        None => match delete_dropped(store, &table, task).await {
            Ok(Rewritten::Yes) => return Ok(Mirrored::Done),
            Ok(Rewritten::No) => Ok(Written::Written),
            Err(e) => Err(e),
        },
    };
    let recorded = match outcome {
        Ok(Written::Written) => {
            let done = record(Ok(())).await;
            if let (Some(found), Some(next)) = (&found, task.next_snapshot)
                && let Some(change) = outside_change(found, last_written.as_ref(), &task.location, next)
            {
                let path = table.consumer_location(branch, id);
                record_repair(store, &task.key, "mirror", change, next, &path).await;
            }
            done
        }
        // Another writer was first: the task, if still due, comes back.
        Ok(Written::Conflict) => {
            metrics::mirror_write_conflict();
            Ok(Mirrored::Done)
        }
        Err(e) => record(Err(e.to_string())).await,
    };
    if seen == Some(ObjectVersion::Missing) {
        undo_if_dropped(store, &table, task).await;
    }
    recorded
}

/// Whether the database still holds what `task` was read with.
async fn still_current(store: &Store, task: &MirrorTask) -> Result<bool, ()> {
    match store.key_state(&task.key).await {
        Ok(state) => Ok(state.as_ref().and_then(KeyState::next_snapshot) == task.next_snapshot),
        Err(e) => {
            tracing::warn!(error = %e, "mirror: cannot re-read a consumer; retrying next interval");
            Err(())
        }
    }
}

/// Records a task's outcome (written, or why not). A failing task is tried
/// once per backoff step, so its log line and metric come once per step.
async fn record(
    store: &Store,
    task: &MirrorTask,
    outcome: Result<(), String>,
    backoff: MirrorBackoff,
) -> Result<Mirrored, ()> {
    if let Err(e) = &outcome {
        tracing::warn!(
            consumer = %task.key, location = %task.location, error = %e,
            "mirror: write failed; retrying after a backoff"
        );
    }
    metrics::mirror_write(outcome.is_ok());
    let failure = outcome.as_ref().err().map(|error| MirrorFailure { error, backoff });
    if let Err(e) = store.paimon().mirror_done(task, failure).await {
        tracing::warn!(error = %e, "mirror: cannot record progress; retrying next interval");
        return Err(());
    }
    Ok(if outcome.is_ok() {
        Mirrored::Done
    } else {
        Mirrored::Failed
    })
}
