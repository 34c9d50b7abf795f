//! The keeper's repairs: a file changed from outside gets tidemark's
//! position back, and the file of a consumer tidemark dropped is deleted.

use std::collections::{HashMap, HashSet};

use tidemark_core::{ConsumerKey, TableName};
use tidemark_paimon::{FileState, ListedConsumer, ObjectVersion, PaimonTable, Written};
use tidemark_store::{MirrorEntry, MirrorFailure, MirrorTask, Store};

use super::Keeper;
use crate::metrics;
use crate::mirror::files::{Rewritten, concurrently, delete_dropped, record_repair, undo_if_dropped};

impl Keeper {
    /// Deletes the files of consumers tidemark dropped that are still there
    /// (the database knows the key, without a consumer, and the mirror has
    /// a record of it). A bookkeeping
    /// record from a slow round, another replica's or a late one, can say
    /// "no file" while a put that landed after the deletion left one, and no
    /// round would ever look at it again. Other files are another engine's
    /// consumers (or not imported yet) and are left alone.
    pub(super) async fn delete_orphans(
        &self,
        store: &Store,
        name: &TableName,
        table: &PaimonTable,
        branch: &str,
        entries: &[&MirrorEntry],
        files: &HashMap<String, ListedConsumer>,
    ) {
        let known: HashSet<&str> = entries.iter().map(|e| e.key.consumer_id.as_str()).collect();
        let candidates: Vec<ConsumerKey> = files
            .keys()
            .filter(|id| !known.contains(id.as_str()) && tidemark_paimon::pinned_lease(id).is_none())
            .filter_map(|id| ConsumerKey::parse(name.as_str(), branch, id, "").ok())
            .collect();
        // Read now, after the listing: a consumer created since the pass
        // read its inventory has one.
        let states = concurrently(candidates.clone(), {
            let store = store.clone();
            move |key| {
                let store = store.clone();
                async move {
                    let state = store.key_state(&key).await?;
                    let mirrored = store.paimon().mirror_state(&key).await?;
                    Ok::<_, tidemark_store::StoreError>((state, mirrored.is_some()))
                }
            }
        })
        .await;
        for (key, state) in candidates.into_iter().zip(states) {
            // Only a file tidemark wrote (the mirror has a record of the
            // key): a key with a lease and no position yet may share its id
            // with a Paimon consumer not imported yet, whose file is not
            // tidemark's to delete.
            let Ok((Some(state), true)) = state else {
                continue; // never tidemark's file, or unknown this pass
            };
            if state.next_snapshot().is_some() {
                continue;
            }
            let task = MirrorTask {
                key,
                location: table.location().to_owned(),
                next_snapshot: None,
                updated_at: None,
            };
            match delete_dropped(store, table, &task).await {
                Ok(Rewritten::No) => {
                    let _ = store.paimon().mirror_done(&task, None).await;
                    metrics::mirror_repair("orphan");
                    tracing::warn!(
                        consumer = %task.key, location = %table.location(),
                        "mirror keeper: deleted the file of a consumer tidemark dropped"
                    );
                }
                Ok(Rewritten::Yes) => {}
                Err(e) => {
                    tracing::warn!(consumer = %task.key, error = %e, "mirror keeper: cannot delete a dropped consumer's file")
                }
            }
        }
    }

    /// Writes tidemark's position back over a file changed from outside,
    /// and records it. The pass only suspects the file: it is read again in
    /// this file's turn (a round may have written and recorded it since the
    /// pass listed and read it), then the database; the write back lands
    /// only over the version read here, so only if nothing wrote since.
    pub(super) async fn repair(&self, store: &Store, table: &PaimonTable, entry: &MirrorEntry) {
        let (branch, id) = (entry.key.branch.as_str(), entry.key.consumer_id.as_str());
        let _turn = self.turns.take(&entry.location, &entry.key).await;
        let (cause, found, version) = match table.consumer_file_versioned(branch, id).await {
            Ok((FileState::Position(n), version)) => ("changed", Some(n), version),
            Ok((FileState::Missing, version)) => ("missing", None, version),
            Ok((FileState::Unreadable(_), version)) => ("unreadable", None, version),
            Err(e) => {
                tracing::warn!(error = %e, "mirror keeper: cannot read a consumer file again; looking next pass");
                return;
            }
        };
        let (Ok(Some(state)), Ok(recorded)) = (
            store.key_state(&entry.key).await,
            store.paimon().mirror_state(&entry.key).await,
        ) else {
            return;
        };
        let Some(consumer) = state.consumer else {
            return; // deleted meanwhile: the rounds delete its file
        };
        if found == Some(consumer.next_snapshot) {
            return; // the database moved to what the file shows: no outside change
        }
        if found.is_some() && found == recorded.and_then(|r| r.mirrored_next) {
            return; // a round wrote it since the pass looked; it follows the database
        }
        let task = MirrorTask {
            key: entry.key.clone(),
            location: entry.location.clone(),
            next_snapshot: Some(consumer.next_snapshot),
            updated_at: Some(consumer.updated_at),
        };
        let path = table.consumer_location(branch, id);
        let written = table
            .write_consumer_if(branch, id, consumer.next_snapshot, version.as_ref())
            .await;
        if version == Some(ObjectVersion::Missing) {
            undo_if_dropped(store, table, &task).await; // whatever the answer: see there
        }
        match written {
            Ok(Written::Written) => {}
            Ok(Written::Conflict) => {
                metrics::mirror_write_conflict();
                return; // written since it was read: read again next pass
            }
            Err(e) => {
                metrics::mirror_write(false);
                tracing::warn!(%path, error = %e, "mirror keeper: cannot write back a consumer file");
                let error = e.to_string();
                let failure = MirrorFailure {
                    error: &error,
                    backoff: self.backoff,
                };
                let _ = store.paimon().mirror_done(&task, Some(failure)).await;
                return;
            }
        }
        metrics::mirror_write(true);
        let _ = store.paimon().mirror_done(&task, None).await;
        record_repair(
            store,
            &entry.key,
            "mirror keeper",
            (cause, found),
            consumer.next_snapshot,
            &path,
        )
        .await;
    }
}
