//! The keeper's pins: a file per live full-scan pin, kept fresh; a pin
//! file without a pin deleted once Paimon sees the consumer instead; and
//! the objects of a branch a pass could not read or write.

use std::collections::HashMap;

use tidemark_paimon::{FileState, ListedConsumer, PaimonTable};
use tidemark_store::{MirrorEntry, Store};

use super::Keeper;
use crate::metrics;

impl Keeper {
    /// Writes or keeps alive a file for each live pin of `branch`, and
    /// deletes pin files whose pin is gone.
    pub(super) async fn keep_pins(
        &mut self,
        store: &Store,
        table: &PaimonTable,
        branch: &str,
        entries: &[&MirrorEntry],
        files: &HashMap<String, ListedConsumer>,
        keep_alive: bool,
    ) {
        let rewrite_age = self.rewrite_age;
        let old = |f: &ListedConsumer| f.modified.elapsed().unwrap_or_default() >= rewrite_age;
        // Full-scan pins: a file per live pin, kept fresh; none without one.
        let live: HashMap<String, i64> = entries
            .iter()
            .filter_map(|e| {
                e.pin
                    .map(|(lease, snapshot)| (tidemark_paimon::pin_consumer_id(&lease), snapshot))
            })
            .collect();
        for (id, snapshot) in &live {
            let (shows, version) = match files.get(id) {
                None => (false, None),
                Some(_) => match table.consumer_file_versioned(branch, id).await {
                    Ok((state, version)) => (state == FileState::Position(*snapshot), version),
                    Err(e) => {
                        self.failures.add(id, e);
                        continue;
                    }
                },
            };
            if !shows {
                let written = table.write_consumer(branch, id, *snapshot).await;
                metrics::mirror_write(written.is_ok());
                match written {
                    Ok(_) => self.tally.pins_written += 1,
                    Err(e) => self.failures.add(id, e),
                }
            } else if let Some(seen) = files.get(id).filter(|f| keep_alive && old(f)) {
                match table
                    .touch_consumer(branch, id, *snapshot, seen, version.as_ref())
                    .await
                {
                    Ok(Some(_)) => self.tally.kept_alive += 1,
                    Ok(None) => {}
                    Err(e) => self.failures.add(id, e),
                }
            }
        }
        // A pin file outlives its pin (completed, released, lease lapsed,
        // a server killed mid-scan). Deleted once its lease's consumer file
        // (if the key has a consumer) is up to date, so a completed scan's
        // consumer protects its snapshots in Paimon's eyes before the pin
        // stops doing so. The pin's key is known only while the key's
        // latest lease is the pin's: once another lease took the key (a
        // takeover, a release and a new acquire, a revoke), any consumer of
        // the branch may be the pin's, so every one must be in sync.
        let synced = |e: &MirrorEntry| e.next_snapshot.is_none() || e.mirrored_next == e.next_snapshot;
        let branch_in_sync = entries.iter().all(|e| synced(e));
        for id in files.keys() {
            let Some(lease) = tidemark_paimon::pinned_lease(id) else {
                continue;
            };
            if live.contains_key(id) {
                continue;
            }
            let in_sync = match entries.iter().find(|e| e.lease == Some(lease)) {
                Some(owner) => synced(owner),
                None => branch_in_sync,
            };
            if !in_sync {
                continue;
            }
            // The pass read its pins before it listed the files: a pin taken
            // in between (its file written before its answer) is not in
            // `live`. Only a pin the database says is gone now is stale.
            match store.live_pin(lease).await {
                Ok(None) => {}
                Ok(Some(_)) => continue,
                Err(e) => {
                    tracing::warn!(file = %id, error = %e, "mirror keeper: cannot check a pin; keeping its file");
                    continue;
                }
            }
            if let Err(e) = table.delete_consumer(branch, id).await {
                self.failures.add(id, e);
                continue;
            }
            metrics::mirror_repair("stale_pin");
            tracing::info!(
                location = %table.location(), %branch, file = %id,
                "mirror keeper: deleted a pin file without a live pin"
            );
        }
    }
}

/// The objects of one branch a pass could not read or write (an object
/// store answering 403 for one of them, a file someone else made
/// immutable): each is skipped, and the pass goes on with the others.
#[derive(Default)]
pub(super) struct Failures {
    count: usize,
    first: Option<(String, tidemark_paimon::PaimonError)>,
}

impl Failures {
    pub(super) fn add(&mut self, id: &str, error: tidemark_paimon::PaimonError) {
        self.count += 1;
        self.first.get_or_insert_with(|| (id.to_owned(), error));
    }

    /// One line per branch and pass, however many objects failed.
    pub(super) fn log(self, location: &str, branch: &str) {
        if let Some((id, error)) = self.first {
            tracing::warn!(
                %location, %branch, failed = self.count, first = %id, %error,
                "mirror keeper: some of the branch's files could not be read or written; the others were kept, \
                 and these are retried next pass"
            );
        }
    }
}
