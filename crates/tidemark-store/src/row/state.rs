//! A key's state to and from its `consumer_keys` row.

use std::time::Duration;

use tidemark_core::time::duration_micros;
use tidemark_core::{Caller, CommittedBatch, ConsumerKey, ConsumerRecord, KeyState, LeaseRecord, LeaseStatus, Offset};

use super::KeyRow;
use crate::error::StoreError;

impl KeyRow {
    /// The row that stores `state`.
    pub(crate) fn from_state(state: &KeyState) -> Self {
        let consumer = state.consumer.as_ref();
        let lease = state.lease.as_ref();
        let last = lease.and_then(|l| l.last_batch);
        Self {
            epoch: state.epoch,
            next_snapshot: consumer.map(|c| c.next_snapshot),
            consumer_created_at: consumer.map(|c| c.created_at),
            consumer_updated_at: consumer.map(|c| c.updated_at),
            latest_snapshot: state.latest_snapshot,
            lease_id: lease.map(|l| l.lease_id),
            lease_holder: lease.map(|l| l.holder.clone()),
            lease_principal: lease.map(|l| l.principal.clone()),
            lease_epoch: lease.map(|l| l.epoch),
            lease_status: lease.map(|l| l.status.code()),
            lease_ttl_us: lease.map(|l| duration_micros(l.ttl)),
            lease_acquired_at: lease.map(|l| l.acquired_at),
            lease_deadline: lease.map(|l| l.deadline),
            last_batch_id: last.map(|b| b.batch_id),
            last_end_snapshot: last.map(|b| b.end.snapshot_id),
            last_end_index: last.map(|b| b.end.index),
            last_end_full: last.map(|b| b.end.scan_snapshot),
            last_end_total_splits: last.and_then(|b| b.end.total_splits),
            lease_wrote_consumer: lease.map(|l| l.wrote_consumer),
            legacy_warned_snapshot: lease.and_then(|l| l.legacy_warned_snapshot),
            full_scan_pin: lease.and_then(|l| l.full_scan_pin),
            lease_peer: lease.and_then(|l| l.caller.peer.clone()),
            lease_client: lease.and_then(|l| l.caller.client.clone()),
            lease_committed_at: lease.and_then(|l| l.committed_at),
            lease_caller_of: lease.map(|l| l.lease_id),
        }
    }

    /// The state this row stores for `key`.
    pub(crate) fn into_state(self, key: ConsumerKey) -> Result<KeyState, StoreError> {
        let corrupt = |what: &str| StoreError::Internal(format!("corrupt row for {key}: {what}"));
        let consumer = match (self.next_snapshot, self.consumer_created_at, self.consumer_updated_at) {
            (Some(next_snapshot), Some(created_at), Some(updated_at)) => Some(ConsumerRecord {
                next_snapshot,
                created_at,
                updated_at,
            }),
            (None, _, _) => None,
            _ => return Err(corrupt("consumer timestamps missing")),
        };
        let lease = match self.lease_id {
            None => None,
            Some(lease_id) => {
                let status = self
                    .lease_status
                    .and_then(LeaseStatus::from_code)
                    .ok_or_else(|| corrupt("lease status"))?;
                let last_batch = match (self.last_batch_id, self.last_end_snapshot, self.last_end_index) {
                    (Some(batch_id), Some(snapshot_id), Some(index)) => Some(CommittedBatch {
                        batch_id,
                        end: Offset {
                            snapshot_id,
                            index,
                            scan_snapshot: self.last_end_full.unwrap_or(false),
                            total_splits: self.last_end_total_splits,
                        },
                    }),
                    _ => None,
                };
                Some(LeaseRecord {
                    lease_id,
                    holder: self.lease_holder.ok_or_else(|| corrupt("lease holder"))?,
                    principal: self.lease_principal.unwrap_or_else(|| "anonymous".to_owned()),
                    epoch: self.lease_epoch.ok_or_else(|| corrupt("lease epoch"))?,
                    ttl: Duration::from_micros(
                        u64::try_from(self.lease_ttl_us.ok_or_else(|| corrupt("lease ttl"))?).unwrap_or(0),
                    ),
                    acquired_at: self.lease_acquired_at.ok_or_else(|| corrupt("lease acquired_at"))?,
                    deadline: self.lease_deadline.ok_or_else(|| corrupt("lease deadline"))?,
                    status,
                    last_batch,
                    wrote_consumer: self.lease_wrote_consumer.unwrap_or(false),
                    legacy_warned_snapshot: self.legacy_warned_snapshot,
                    full_scan_pin: self.full_scan_pin,
                    // Written with another grant's id (by a release that
                    // predates these columns, during a rollout): they
                    // describe an earlier lease, not this one.
                    caller: if self.lease_caller_of == Some(lease_id) {
                        Caller {
                            peer: self.lease_peer,
                            client: self.lease_client,
                        }
                    } else {
                        Caller::UNKNOWN
                    },
                    committed_at: self
                        .lease_committed_at
                        .filter(|_| self.lease_caller_of == Some(lease_id)),
                })
            }
        };
        Ok(KeyState {
            key,
            epoch: self.epoch,
            consumer,
            lease,
            latest_snapshot: self.latest_snapshot,
        })
    }
}
