//! What the rounds and the keeper share: turns on a file, bounded
//! concurrency, and deleting (or undoing) the file of a dropped consumer.

use std::hash::{Hash, Hasher};
use std::sync::Arc;

use tidemark_core::{ConsumerKey, EventKind, HistoryEvent, KeyState};
use tidemark_paimon::{FileState, ObjectVersion, PaimonTable, Written};
use tidemark_store::{CallContext, MirrorState, MirrorTask, Store};

use crate::metrics;

/// One replica's writers of a consumer file (the rounds and the keeper)
/// take turns: each reads the database inside its turn and writes what it
/// read, so the file follows the order of the database's positions. On a
/// local disk a write is a plain rename, so without turns a writer that read
/// an older position could land after one that read a newer position (a
/// file moving backwards); the keeper would also take the round's write,
/// made between its listing and its look, for an outside change.
#[derive(Clone)]
pub(super) struct FileTurns(Arc<[tokio::sync::Mutex<()>]>);

impl FileTurns {
    /// Turns are shared by files hashed to the same stripe: a few writers
    /// of different files may wait on each other, never two of one file at once.
    const STRIPES: usize = 64;

    pub(super) fn new() -> Self {
        Self((0..Self::STRIPES).map(|_| tokio::sync::Mutex::new(())).collect())
    }

    pub(super) async fn take(&self, location: &str, key: &ConsumerKey) -> tokio::sync::MutexGuard<'_, ()> {
        let mut hasher = std::collections::hash_map::DefaultHasher::new();
        (location, key.branch.as_str(), key.consumer_id.as_str()).hash(&mut hasher);
        self.0[(hasher.finish() % Self::STRIPES as u64) as usize].lock().await
    }
}

/// Files one keeper pass reads or writes at once.
const KEEPER_CONCURRENCY: usize = 32;

/// Runs `work` on every item, [`KEEPER_CONCURRENCY`] at a time; the
/// results in the items' order.
pub(super) async fn concurrently<T, F, Fut>(items: Vec<T>, work: F) -> Vec<Fut::Output>
where
    F: Fn(T) -> Fut,
    Fut: Future + Send + 'static,
    Fut::Output: Send + 'static,
{
    let mut results: Vec<Option<Fut::Output>> = Vec::with_capacity(items.len());
    results.resize_with(items.len(), || None);
    let mut items = items.into_iter().enumerate();
    let mut running = tokio::task::JoinSet::new();
    loop {
        while running.len() < KEEPER_CONCURRENCY {
            let Some((i, item)) = items.next() else { break };
            let future = work(item);
            running.spawn(async move { (i, future.await) });
        }
        let Some(done) = running.join_next().await else { break };
        if let Ok((i, output)) = done {
            results[i] = Some(output);
        }
    }
    results.into_iter().flatten().collect()
}

/// A put that creates an object may land late, after a replica that saw
/// the consumer dropped deleted the (then absent) object, or after the
/// branch's objects were all deleted: a missing object compares equal before
/// and after. So a creation is checked against the database and the branch
/// once it has landed, and undone if the consumer or the branch is gone.
/// Checked whatever the put answered: a creation that landed can still be
/// heard as a failed condition (its answer lost, the client's retry met the
/// object it had just written) or as an error, and no other writer would
/// ever look at it again.
pub(super) async fn undo_if_dropped(store: &Store, table: &PaimonTable, task: &MirrorTask) {
    let (branch, id) = (task.key.branch.as_str(), task.key.consumer_id.as_str());
    let branch_gone = matches!(table.branch_exists(branch).await, Ok(false));
    match store.key_state(&task.key).await {
        _ if branch_gone => {}
        Ok(state) if state.as_ref().and_then(KeyState::next_snapshot).is_none() => {}
        // Still there (or unknown: a later round's deletion task finds it).
        _ => return,
    }
    match table.delete_consumer(branch, id).await {
        Ok(()) => {
            let dropped = MirrorTask {
                next_snapshot: None,
                updated_at: None,
                ..task.clone()
            };
            let _ = store.paimon().mirror_done(&dropped, None).await;
            tracing::debug!(consumer = %task.key, "mirror: a file created for a consumer dropped meanwhile was deleted");
        }
        Err(e) => {
            tracing::warn!(consumer = %task.key, error = %e, "mirror: cannot delete a file created for a dropped consumer")
        }
    }
}

/// Whether [`delete_dropped`] found the consumer back and wrote it again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Rewritten {
    Yes,
    No,
}

/// Deletes a dropped consumer's file. Object stores have no conditional
/// delete: if the consumer came back between the read and the delete (so
/// the object deleted may have been its new one), it is written again, by
/// the same read-version-then-database rule.
pub(super) async fn delete_dropped(
    store: &Store,
    table: &PaimonTable,
    task: &MirrorTask,
) -> Result<Rewritten, tidemark_paimon::PaimonError> {
    let (branch, id) = (task.key.branch.as_str(), task.key.consumer_id.as_str());
    table.delete_consumer(branch, id).await?;
    if !table.is_object_store() {
        return Ok(Rewritten::No);
    }
    let seen = table.consumer_version(branch, id).await?;
    if let Ok(Some(state)) = store.key_state(&task.key).await
        && let Some(next) = state.next_snapshot()
    {
        let written = table.write_consumer_if(branch, id, next, seen.as_ref()).await;
        let task = MirrorTask {
            next_snapshot: Some(next),
            updated_at: state.consumer.map(|c| c.updated_at),
            ..task.clone()
        };
        if matches!(written, Ok(Written::Written)) {
            let _ = store.paimon().mirror_done(&task, None).await;
        }
        if seen == Some(ObjectVersion::Missing) {
            undo_if_dropped(store, table, &task).await; // whatever the answer: see there
        }
        return Ok(Rewritten::Yes);
    }
    Ok(Rewritten::No)
}

/// What a file found just before tidemark wrote `next` over it says of an
/// outside change: its cause and the position it held, or `None` when the
/// file is tidemark's own. A file tidemark never wrote at this location
/// (no record) is not its own yet, whatever it holds. A position between the
/// one recorded and `next` may be another replica's write landing before
/// its record: taken as tidemark's (an outside change to such a position
/// goes unrecorded; the file is written back all the same).
pub(super) fn outside_change(
    found: &FileState,
    recorded: Option<&MirrorState>,
    location: &str,
    next: i64,
) -> Option<(&'static str, Option<i64>)> {
    let last = recorded
        .filter(|r| r.location.as_deref().is_none_or(|l| l == location))
        .and_then(|r| r.mirrored_next)?;
    match *found {
        FileState::Position(n) if (last.min(next)..=last.max(next)).contains(&n) => None,
        FileState::Position(n) => Some(("changed", Some(n))),
        FileState::Missing => Some(("missing", None)),
        FileState::Unreadable(_) => Some(("unreadable", None)),
    }
}

/// Counts, logs and records in the consumer's history a file changed from
/// outside that `writer` (the rounds or the keeper) wrote tidemark's
/// position back over.
pub(super) async fn record_repair(
    store: &Store,
    key: &ConsumerKey,
    writer: &str,
    (cause, found): (&'static str, Option<i64>),
    wrote: i64,
    path: &str,
) {
    metrics::mirror_repair(cause);
    tracing::warn!(
        %path, cause, found, wrote,
        "{writer}: a consumer file was changed from outside; wrote tidemark's position back"
    );
    let mut event = HistoryEvent::new(EventKind::MirrorRepair, found, Some(wrote));
    event.detail = Some(format!("{cause}: {path}"));
    let ctx = CallContext::internal(format!("{}-{}", writer.replace(' ', "-"), uuid::Uuid::now_v7()));
    if let Err(e) = store.append_history(key, &[event], &ctx).await {
        tracing::warn!(error = %e, "{writer}: cannot record a repair in history");
    }
}
