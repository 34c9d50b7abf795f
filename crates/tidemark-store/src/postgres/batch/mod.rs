//! The one batcher under group commit and group reads.
//!
//! Jobs queue for a few in-flight slots; whatever queued while the slots
//! were busy goes to the database as one statement. The queue is bounded (a
//! full queue refuses at once, `OVERLOADED`, rather than growing until
//! every caller has timed out), a job whose caller went away is dropped
//! before its statement is sent (after a stall, the retries of timed-out
//! callers are not replayed ahead of fresh work), and everything a batch
//! sends — its fallbacks included — runs inside its slot, so at most
//! `in_flight` statements are ever in flight. A batch takes at most one job
//! per key and continues past a duplicate, which waits for a later batch,
//! and a key already in flight in another batch waits for that batch to end:
//! one client firing many calls on one key cannot shrink everyone's batches,
//! nor make concurrent batches collide on its row (the later one's write
//! would come back locked and go to the database again on its own).
//!
//! A batcher may also *gather* (group commit does): when a statement ends
//! while fewer jobs wait than were active in its cycle (the jobs it carried
//! plus those that queued meanwhile), the next statement waits a short,
//! bounded time for the callers just answered to come back. Without it,
//! closed-loop callers split into two cohorts that alternate, each paying a
//! statement's fixed cost for half the writes; with it they ride one
//! statement, and where the database is what everybody shares, its CPU per
//! write is what decides how much it carries (docs/bench/HISTORY.md, step 7).

use std::collections::VecDeque;
use std::future::Future;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use tokio::sync::{Notify, Semaphore};
use tokio::time::Instant;

use super::db::Distrust;
use crate::error::StoreError;

/// A queued unit of work.
pub(crate) trait Job: Send + 'static {
    /// What two jobs of one statement must not share (the row a write
    /// updates); `None` when any number may share a statement.
    type Key: PartialEq + Clone + Send;

    /// This job's key.
    fn key(&self) -> Option<&Self::Key>;

    /// Whether nobody waits for this job's answer any more.
    fn abandoned(&self) -> bool;
}

/// Takes the next batch from `pending`: in queue order, at most `max` jobs,
/// at most one per key and none of a key in `busy` (in flight elsewhere);
/// the others stay queued in their order, and jobs nobody waits for are
/// dropped. Returns the batch and how many were dropped.
pub(crate) fn take_batch<J: Job>(pending: &mut VecDeque<J>, max: usize, busy: &[J::Key]) -> (Vec<J>, usize) {
    let mut batch: Vec<J> = Vec::new();
    let mut kept = VecDeque::new();
    let mut dropped = 0;
    while let Some(job) = pending.pop_front() {
        if batch.len() >= max {
            kept.push_back(job);
            break;
        }
        if job.abandoned() {
            dropped += 1;
            continue;
        }
        let duplicate = job
            .key()
            .is_some_and(|key| busy.contains(key) || batch.iter().any(|b| b.key() == Some(key)));
        if duplicate {
            kept.push_back(job);
        } else {
            batch.push(job);
        }
    }
    // Duplicates held back go first, ahead of what was not looked at.
    kept.append(pending);
    *pending = kept;
    (batch, dropped)
}

/// Jobs of one key that may always wait at once (a worker has one call in
/// flight, a few with retries); a key may take a quarter of a larger queue.
pub(crate) const MIN_WAITING_PER_KEY: usize = 32;

/// Most jobs of one key waiting at once in a queue of `capacity`: beyond
/// it a client is bursting on one lease, and only it is refused.
pub(crate) fn waiting_per_key(capacity: usize) -> usize {
    (capacity / 4).max(MIN_WAITING_PER_KEY)
}

/// A bounded queue in front of the database, with its sending task.
pub(crate) struct Batcher<J: Job> {
    shared: Arc<Shared<J>>,
    /// The task sending batches; started on first use, and again when the
    /// runtime it ran on has gone (a store shared between runtimes).
    runner: Mutex<Option<tokio::task::JoinHandle<()>>>,
    send: SendBatch<J>,
}

impl<J: Job> std::fmt::Debug for Batcher<J> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Batcher")
            .field("in_flight", &self.shared.in_flight)
            .field("max_batch", &self.shared.max_batch)
            .field("capacity", &self.shared.capacity)
            .finish_non_exhaustive()
    }
}

struct Shared<J: Job> {
    queue: Mutex<VecDeque<J>>,
    /// Keys of the batches in flight.
    busy: Mutex<Vec<J::Key>>,
    arrived: Notify,
    in_flight: usize,
    max_batch: usize,
    capacity: usize,
    what: &'static str,
    /// Longest a statement waits for more jobs (zero: never waits).
    gather: Duration,
    /// Longest a batch may take before its callers are answered
    /// `UNAVAILABLE` and its slot freed (none: unbounded), and what gives
    /// it up sooner: the database found silent since it was sent.
    limit: Option<(Duration, Distrust)>,
    /// Jobs active in the last statement's cycle: the jobs it carried plus
    /// those waiting when it ended.
    active: AtomicUsize,
}

impl<J: Job> Shared<J> {
    /// Whether a statement should wait for more than the `waiting` jobs:
    /// fewer wait than were active in the last cycle.
    fn short_of_active(&self, waiting: usize) -> bool {
        waiting < self.active.load(Ordering::Relaxed).min(self.max_batch)
    }
}

impl<J: Job> Batcher<J> {
    /// Batches of at most `max_batch` jobs, at most `in_flight` at a time,
    /// at most `capacity` jobs waiting; `send` runs one batch to its end
    /// (fallbacks included) and answers its callers. `what` names the jobs
    /// in the overload message.
    pub(crate) fn new<F, Fut>(what: &'static str, in_flight: usize, max_batch: usize, capacity: usize, send: F) -> Self
    where
        F: Fn(Vec<J>) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = ()> + Send + 'static,
    {
        Self {
            shared: Arc::new(Shared {
                queue: Mutex::new(VecDeque::new()),
                busy: Mutex::new(Vec::new()),
                arrived: Notify::new(),
                in_flight: in_flight.max(1),
                max_batch: max_batch.max(1),
                capacity: capacity.max(1),
                what,
                gather: Duration::ZERO,
                limit: None,
                active: AtomicUsize::new(0),
            }),
            runner: Mutex::new(None),
            send: Arc::new(move |batch| Box::pin(send(batch))),
        }
    }

    /// Lets each statement wait up to `wait` for the callers of the last
    /// one to come back (see the module's docs); zero never waits.
    pub(crate) fn gathering(mut self, wait: Duration) -> Self {
        Arc::get_mut(&mut self.shared)
            .expect("gathering is set before the first job starts the runner")
            .gather = wait;
        self
    }

    /// Bounds each batch by `limit`, by this process's clock: a statement on
    /// a half-open connection (a failover's leftover) never answers, and
    /// would hold its slot, and every job queued behind it, for good.
    /// A batch is also given up as soon as `distrust` says the database
    /// went silent after it was sent.
    pub(crate) fn bounded_by(mut self, limit: Duration, distrust: Distrust) -> Self {
        Arc::get_mut(&mut self.shared)
            .expect("the bound is set before the first job starts the runner")
            .limit = Some((limit, distrust));
        self
    }

    /// Queues `job`, or refuses it (`OVERLOADED`) when the queue is full.
    pub(crate) fn submit(&self, job: J) -> Result<(), StoreError> {
        self.ensure_runner();
        {
            let mut queue = self.shared.queue.lock().unwrap_or_else(PoisonError::into_inner);
            if queue.len() >= self.shared.capacity {
                // Make room from callers that already went away before
                // refusing a live one.
                queue.retain(|j| !j.abandoned());
                if queue.len() >= self.shared.capacity {
                    return Err(StoreError::Overloaded(format!(
                        "{} {}s are already waiting for the database",
                        queue.len(),
                        self.shared.what
                    )));
                }
            }
            // One key's jobs take at most a share of the queue: a client
            // firing hundreds of calls on one lease is refused its excess,
            // rather than filling the queue and refusing everyone else.
            if let Some(key) = job.key() {
                let waiting = queue.iter().filter(|j| j.key() == Some(key) && !j.abandoned()).count();
                if waiting >= waiting_per_key(self.shared.capacity) {
                    return Err(StoreError::Overloaded(format!(
                        "{waiting} {}s for this consumer are already waiting for the database",
                        self.shared.what
                    )));
                }
            }
            queue.push_back(job);
        }
        self.shared.arrived.notify_one();
        Ok(())
    }

    fn ensure_runner(&self) {
        let mut runner = self.runner.lock().unwrap_or_else(PoisonError::into_inner);
        if runner.as_ref().is_some_and(|r| !r.is_finished()) {
            return;
        }
        let shared = Arc::clone(&self.shared);
        let send = Arc::clone(&self.send);
        *runner = Some(tokio::spawn(run(shared, send)));
    }
}

impl<J: Job> Drop for Batcher<J> {
    fn drop(&mut self) {
        if let Some(runner) = self.runner.lock().unwrap_or_else(PoisonError::into_inner).take() {
            runner.abort();
        }
    }
}

type SendBatch<J> = Arc<dyn Fn(Vec<J>) -> futures::future::BoxFuture<'static, ()> + Send + Sync>;

/// Takes whatever queued while every slot was busy and sends it as one
/// batch, holding a slot until the batch and its fallbacks are done.
async fn run<J: Job>(shared: Arc<Shared<J>>, send: SendBatch<J>) {
    let slots = Arc::new(Semaphore::new(shared.in_flight));
    loop {
        let Ok(slot) = Arc::clone(&slots).acquire_owned().await else {
            return;
        };
        let mut gather_until: Option<Instant> = None;
        let batch = loop {
            let notified = shared.arrived.notified();
            // Without gathering, the queue is not looked at twice.
            let short = !shared.gather.is_zero() && {
                let queue = shared.queue.lock().unwrap_or_else(PoisonError::into_inner);
                !queue.is_empty() && shared.short_of_active(queue.len())
            };
            if short {
                let until = *gather_until.get_or_insert_with(|| Instant::now() + shared.gather);
                if Instant::now() < until {
                    tokio::select! {
                        () = notified => {}
                        () = tokio::time::sleep_until(until) => {}
                    }
                    continue;
                }
            }
            let (batch, _dropped) = {
                let mut queue = shared.queue.lock().unwrap_or_else(PoisonError::into_inner);
                let mut busy = shared.busy.lock().unwrap_or_else(PoisonError::into_inner);
                let taken = take_batch(&mut queue, shared.max_batch, &busy);
                busy.extend(taken.0.iter().filter_map(|j| j.key().cloned()));
                taken
            };
            if !batch.is_empty() {
                break batch;
            }
            notified.await;
        };
        let keys: Vec<J::Key> = batch.iter().filter_map(|j| j.key().cloned()).collect();
        let carried = batch.len();
        // More may be waiting: let the next free slot look.
        if !shared.queue.lock().unwrap_or_else(PoisonError::into_inner).is_empty() {
            shared.arrived.notify_one();
        }
        let sending = send(batch);
        let shared = Arc::clone(&shared);
        tokio::spawn(async move {
            match &shared.limit {
                // Dropped past its limit: its callers' replies go with it
                // (they answer UNAVAILABLE), and so does its connection.
                Some((limit, distrust)) => {
                    let sent = std::time::Instant::now();
                    tokio::select! {
                        () = sending => {}
                        () = tokio::time::sleep(*limit) => {
                            tracing::warn!(
                                ?limit,
                                "a {} statement got no answer in time; its callers were answered UNAVAILABLE",
                                shared.what
                            );
                        }
                        () = distrust.raised_since(sent) => {}
                    }
                }
                None => sending.await,
            }
            {
                let mut busy = shared.busy.lock().unwrap_or_else(PoisonError::into_inner);
                for key in &keys {
                    if let Some(at) = busy.iter().position(|k| k == key) {
                        busy.swap_remove(at);
                    }
                }
            }
            if !shared.gather.is_zero() {
                let waiting = shared.queue.lock().unwrap_or_else(PoisonError::into_inner).len();
                shared.active.store(carried + waiting, Ordering::Relaxed);
            }
            drop(slot);
            // Jobs held back behind these keys may go now.
            shared.arrived.notify_one();
        });
    }
}

#[cfg(test)]
mod tests;
