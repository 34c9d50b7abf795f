//! The one-round-trip path for a lease's own writes.
//!
//! A worker commits through the same replica batch after batch, and between
//! two of its commits nothing else usually touches its key. So after every
//! write the replica remembers the key's state, its row version and the
//! database time of the write, by lease id. The next call on that lease
//! decides on the remembered state and writes with the usual
//! compare-and-set, skipping the read: one database round trip instead of
//! two. Correctness never rests on the cache:
//!
//! - the write still requires the row version it decided on, so if anyone
//!   changed the key (another replica, an operator, the sweeper) nothing is
//!   written and the call is decided again on a fresh read;
//! - the write still requires the lease to be live by the database clock;
//! - only successful writes use the remembered state: a decision that writes
//!   nothing or refuses (DUPLICATE, LEASE_NOT_HELD, ...) is made again on a
//!   fresh read, so every answer that is not a write reflects the database.
//!
//! Times: the remembered database time is advanced by the monotonic time
//! elapsed since, minus a margin, so it never runs ahead of the database
//! clock (a write whose reading is behind the estimate is refused); entries
//! older than [`FRESHNESS`] are not used. The estimate only decides: what
//! the decision stamps (a deadline, a refresh) is moved to the database's
//! reading at the write (stamp.rs), so a renewed lease lasts its whole ttl
//! from when it landed, as its answer said.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use tidemark_core::{KeyState, LeaseStatus, TableOptions, Timestamp};
use uuid::Uuid;

use crate::backend::Loaded;

/// How long a remembered state may be used. Short, so the extrapolated
/// time stays within a millisecond of the database's.
pub(crate) const FRESHNESS: Duration = Duration::from_secs(5);

/// Most leases remembered at once (a few hundred bytes each).
const CAPACITY: usize = 16_384;

#[derive(Debug)]
struct Entry {
    state: KeyState,
    version: i64,
    options: TableOptions,
    db_now: Timestamp,
    seen: Instant,
}

/// Remembered states of live leases, by lease id.
#[derive(Debug, Default)]
pub(crate) struct LeaseCache {
    entries: Mutex<HashMap<Uuid, Entry>>,
}

impl LeaseCache {
    /// The remembered state of `lease_id` as a [`Loaded`] at an estimate of
    /// the database's current time, if fresh.
    pub(crate) fn get(&self, lease_id: Uuid) -> Option<Loaded> {
        let entries = self.entries.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let entry = entries.get(&lease_id)?;
        let elapsed = entry.seen.elapsed();
        if elapsed > FRESHNESS {
            return None;
        }
        Some(Loaded {
            state: Some(entry.state.clone()),
            version: Some(entry.version),
            // At least a microsecond on: a time this decision stamps then
            // differs from the one the last write stamped, so the write can
            // tell it stamped it (stamp.rs); a database whose clock has not
            // moved on since refuses the estimate and the call reads afresh.
            now: entry.db_now.plus(conservative(elapsed).max(Duration::from_micros(1))),
            options: entry.options,
        })
    }

    /// Remembers the state just written (at database time `db_now`, as row
    /// version `version`), or forgets it when its lease is no longer active.
    pub(crate) fn remember(&self, state: KeyState, version: i64, options: &TableOptions, db_now: Timestamp) {
        let Some((lease_id, status)) = state.lease.as_ref().map(|l| (l.lease_id, l.status)) else {
            return;
        };
        let mut entries = self.entries.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if status != LeaseStatus::Active {
            entries.remove(&lease_id);
            return;
        }
        if entries.len() >= CAPACITY && !entries.contains_key(&lease_id) {
            entries.retain(|_, e| e.seen.elapsed() <= FRESHNESS);
            if entries.len() >= CAPACITY {
                // Still full of fresh entries: drop an arbitrary half; they
                // only cost their next call a read.
                let mut keep = false;
                entries.retain(|_, _| {
                    keep = !keep;
                    keep
                });
            }
        }
        entries.insert(
            lease_id,
            Entry {
                state,
                version,
                options: *options,
                db_now,
                seen: Instant::now(),
            },
        );
    }

    /// Forgets a lease (its remembered state proved stale).
    pub(crate) fn forget(&self, lease_id: Uuid) {
        self.entries
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .remove(&lease_id);
    }
}

/// `elapsed` less a margin for clock-rate differences (1 ms + 200 ppm),
/// never negative.
fn conservative(elapsed: Duration) -> Duration {
    let margin = Duration::from_millis(1) + elapsed / 5_000;
    elapsed.saturating_sub(margin)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_estimate_never_runs_ahead() {
        assert_eq!(conservative(Duration::ZERO), Duration::ZERO);
        assert_eq!(conservative(Duration::from_micros(900)), Duration::ZERO);
        let five = Duration::from_secs(5);
        assert!(conservative(five) < five - Duration::from_millis(1));
        assert!(conservative(five) > five - Duration::from_millis(3));
    }
}
