//! Conversions between the domain and the protos: a few proto -> domain
//! helpers the request parsers share (offsets), then how answers are built
//! from the domain (requests themselves are parsed in the `request`
//! module).

use tidemark_core::{ConsumerKey, ConsumerRecord, Offset, RecoverySource, Timestamp};
use tidemark_proto::v1 as pb;

/// A proto offset as a domain offset (validated later, by the rule that
/// uses it).
pub(crate) fn offset(o: &pb::Offset) -> Offset {
    Offset {
        snapshot_id: o.snapshot_id,
        index: o.index,
        scan_snapshot: o.scan_snapshot,
        total_splits: o.total_splits,
    }
}

/// An import's proto settings as the application layer's.
pub(crate) fn import_settings(s: &pb::ImportSettings) -> tidemark_service::ImportSettings {
    tidemark_service::ImportSettings {
        replace_existing: s.replace_existing,
        force: s.force,
        skip_registrations: s.skip_registrations,
        restore_deleted: s.restore_deleted,
        execute: s.execute,
    }
}

/// A domain offset as a proto offset.
pub(crate) fn offset_to_pb(o: &Offset) -> pb::Offset {
    pb::Offset {
        snapshot_id: o.snapshot_id,
        index: o.index,
        scan_snapshot: o.scan_snapshot,
        total_splits: o.total_splits,
    }
}

/// A domain timestamp as a proto timestamp.
pub(crate) fn timestamp(t: Timestamp) -> prost_types::Timestamp {
    let micros = t.as_micros();
    prost_types::Timestamp {
        seconds: micros.div_euclid(1_000_000),
        nanos: i32::try_from(micros.rem_euclid(1_000_000) * 1_000).unwrap_or(0),
    }
}

pub(crate) use tidemark_proto::duration::to_pb as duration_to_pb;

/// A domain key as a proto key.
pub(crate) fn key_to_pb(key: &ConsumerKey) -> pb::ConsumerKey {
    pb::ConsumerKey {
        table: key.table.as_str().to_owned(),
        branch: key.branch.as_str().to_owned(),
        consumer_id: key.consumer_id.as_str().to_owned(),
    }
}

/// A consumer record as a proto consumer.
pub(crate) fn consumer_to_pb(key: &ConsumerKey, c: &ConsumerRecord, latest_snapshot: Option<i64>) -> pb::Consumer {
    pb::Consumer {
        key: Some(key_to_pb(key)),
        next_snapshot: c.next_snapshot,
        created_at: Some(timestamp(c.created_at)),
        updated_at: Some(timestamp(c.updated_at)),
        latest_snapshot,
        lag: latest_snapshot.and_then(|l| tidemark_core::state::lag(c.next_snapshot, l)),
    }
}

/// A recovery source as the proto enum.
pub(crate) fn source_to_pb(source: RecoverySource) -> pb::RecoverySource {
    match source {
        RecoverySource::Checkpoint => pb::RecoverySource::Checkpoint,
        RecoverySource::Consumer => pb::RecoverySource::Consumer,
        RecoverySource::StartupOptions => pb::RecoverySource::StartupOptions,
    }
}

/// A commit outcome as the proto enum.
pub(crate) fn outcome_to_pb(outcome: tidemark_core::CommitOutcome) -> pb::CommitOutcome {
    use tidemark_core::CommitOutcome as O;
    match outcome {
        O::Created => pb::CommitOutcome::Created,
        O::Advanced => pb::CommitOutcome::Advanced,
        O::Refreshed => pb::CommitOutcome::Refreshed,
        O::Rewound => pb::CommitOutcome::Rewound,
        O::UnchangedIncompleteFullScan => pb::CommitOutcome::UnchangedIncompleteFullScan,
        O::UnchangedLegacyOffset => pb::CommitOutcome::UnchangedLegacyOffset,
        O::Duplicate => pb::CommitOutcome::Duplicate,
    }
}

/// A lease as operators see it.
/// A revocation's lease as a plan words it: `would_revoke` until executed.
pub(crate) fn revoked_lease_info(lease: &tidemark_core::LeaseRecord, executed: bool) -> pb::LeaseInfo {
    let mut info = lease_info(lease, lease.deadline);
    if !executed {
        "would_revoke".clone_into(&mut info.state);
    }
    info
}

pub(crate) fn lease_info(lease: &tidemark_core::LeaseRecord, now: Timestamp) -> pb::LeaseInfo {
    use tidemark_core::LeaseStatus;
    let state = match lease.status {
        LeaseStatus::Active if lease.is_live(now) => "active",
        LeaseStatus::Active => "expired",
        LeaseStatus::Released => "released",
        LeaseStatus::Revoked => "revoked",
    };
    let live = lease.is_live(now);
    pb::LeaseInfo {
        lease_id: lease.lease_id.to_string(),
        epoch: lease.epoch,
        holder: lease.holder.clone(),
        state: state.to_owned(),
        remaining: live.then(|| duration_to_pb(lease.remaining(now))),
        acquired_at: Some(timestamp(lease.acquired_at)),
        deadline: Some(timestamp(lease.deadline)),
        full_scan_pin: lease.full_scan_pin.filter(|_| live),
        last_batch_id: lease.last_batch.map(|b| b.batch_id),
        peer: lease.caller.peer.clone().unwrap_or_default(),
        client: lease.caller.client.clone().unwrap_or_default(),
        last_renewed_at: (lease.status == LeaseStatus::Active).then(|| timestamp(lease.last_renewed())),
        last_commit_at: lease.committed_at.map(timestamp),
        activity: lease.activity(now).to_string(),
    }
}

/// A key as operators see it.
pub(crate) fn consumer_info(
    view: &tidemark_service::store::ConsumerView,
    lag: Option<&tidemark_service::Lag>,
) -> pb::ConsumerInfo {
    let state = &view.state;
    let mut consumer = state
        .consumer
        .as_ref()
        .map(|c| consumer_to_pb(&state.key, c, state.latest_snapshot));
    // A registered table's lag counts to its directory's latest snapshot.
    if let (Some(consumer), Some(lag)) = (consumer.as_mut(), lag) {
        consumer.latest_snapshot = Some(lag.latest);
        consumer.lag = lag.snapshots;
    }
    pb::ConsumerInfo {
        key: Some(key_to_pb(&state.key)),
        consumer,
        lease: state.lease.as_ref().map(|l| lease_info(l, view.now)),
        epoch: state.epoch,
        idle: view.liveness.map(|l| duration_to_pb(l.idle)),
        expired: view.liveness.is_some_and(|l| l.expired),
        expires_in: view.liveness.and_then(|l| l.expires_in).map(duration_to_pb),
        lag_time: lag.and_then(|l| l.waited).map(duration_to_pb),
    }
}

/// A consumer's Paimon file as DescribeConsumer shows it.
pub(crate) fn mirror_info(file: &tidemark_service::MirrorFile) -> pb::MirrorInfo {
    pb::MirrorInfo {
        path: file.path.clone(),
        mirrored_next_snapshot: file.mirrored_next_snapshot,
        mirrored_at: file.mirrored_at.map(timestamp),
        in_sync: file.in_sync,
        failures: file.failures,
        last_error: file.last_error.clone(),
        file_state: file.file_state.to_owned(),
        file_error: file.file_error.clone(),
        file_next_snapshot: file.file_next_snapshot,
        file_modified_at: file.file_modified_at.map(prost_types::Timestamp::from),
    }
}

/// A history row as a proto entry.
pub(crate) fn history_entry(h: &tidemark_service::store::HistoryRecord) -> pb::HistoryEntry {
    pb::HistoryEntry {
        id: h.id,
        at: Some(timestamp(h.at)),
        consumer: Some(key_to_pb(&h.key)),
        event: h.event.kind.as_str().to_owned(),
        old_next_snapshot: h.event.old_next,
        new_next_snapshot: h.event.new_next,
        epoch: h.event.epoch,
        lease_id: h.event.lease_id.map(|id| id.to_string()).unwrap_or_default(),
        batch_id: h.event.batch_id,
        holder: h.event.holder.clone().unwrap_or_default(),
        principal: h.principal.clone(),
        request_id: h.request_id.clone(),
        detail: h.event.detail.clone().unwrap_or_default(),
        latest_snapshot: h.event.latest_snapshot,
    }
}

/// An operator change to one key.
pub(crate) fn consumer_change(key: &ConsumerKey, change: &tidemark_core::admin::AdminChange) -> pb::ConsumerChange {
    pb::ConsumerChange {
        consumer: Some(key_to_pb(key)),
        old_next_snapshot: change.old_next,
        new_next_snapshot: change.new_next,
        revoked_lease: change.revoked.as_ref().map(|l| pb::RevokedLease {
            lease_id: l.lease_id.to_string(),
            epoch: l.epoch,
            holder: l.holder.clone(),
        }),
        epoch: change.epoch,
    }
}

/// Something holding retention back.
/// A retention holder; a consumer's lag counts to `latest`, the branch's
/// latest snapshot known now.
pub(crate) fn retention_holder(h: &tidemark_service::store::Holder, latest: Option<i64>) -> pb::RetentionHolder {
    let state = &h.view.state;
    let live = state.live_lease(h.view.now);
    pb::RetentionHolder {
        kind: match h.kind {
            tidemark_service::store::HolderKind::Consumer => pb::HolderKind::Consumer,
            tidemark_service::store::HolderKind::FullScanPin => pb::HolderKind::FullScanPin,
        }
        .into(),
        consumer_id: state.key.consumer_id.as_str().to_owned(),
        snapshot: h.snapshot,
        lease_holder: live.map(|l| l.holder.clone()).unwrap_or_default(),
        lease_epoch: live.map_or(0, |l| l.epoch),
        lease_peer: live.and_then(|l| l.caller.peer.clone()).unwrap_or_default(),
        lease_client: live.and_then(|l| l.caller.client.clone()).unwrap_or_default(),
        lease_activity: state
            .lease
            .as_ref()
            .map(|l| l.activity(h.view.now).to_string())
            .unwrap_or_default(),
        idle: match h.kind {
            tidemark_service::store::HolderKind::Consumer => h.view.liveness.map(|l| duration_to_pb(l.idle)),
            tidemark_service::store::HolderKind::FullScanPin => None,
        },
        expires_in: match h.kind {
            tidemark_service::store::HolderKind::Consumer => {
                h.view.liveness.and_then(|l| l.expires_in).map(duration_to_pb)
            }
            tidemark_service::store::HolderKind::FullScanPin => None,
        },
        lag: match h.kind {
            tidemark_service::store::HolderKind::Consumer => {
                latest.and_then(|latest| tidemark_core::state::lag(h.snapshot, latest))
            }
            tidemark_service::store::HolderKind::FullScanPin => None,
        },
    }
}

/// Separates the key's parts in a consumer page token.
pub(crate) const TOKEN_SEPARATOR: char = '\u{1f}';

/// An opaque page token for a consumer listing (hex of the last key).
pub(crate) fn consumer_page_token(key: &ConsumerKey) -> String {
    let raw = format!(
        "{}{TOKEN_SEPARATOR}{}{TOKEN_SEPARATOR}{}",
        key.table.as_str(),
        key.branch.as_str(),
        key.consumer_id.as_str()
    );
    raw.bytes().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timestamps_round_down_to_whole_seconds_with_nanos() {
        let t = timestamp(Timestamp::from_micros(1_500_000));
        assert_eq!((t.seconds, t.nanos), (1, 500_000_000));
        let t = timestamp(Timestamp::from_micros(-1));
        assert_eq!((t.seconds, t.nanos), (-1, 999_999_000));
    }

    #[test]
    fn every_outcome_maps() {
        for o in tidemark_core::CommitOutcome::ALL {
            assert_eq!(outcome_to_pb(o).as_str_name(), format!("COMMIT_OUTCOME_{}", o.as_str()));
        }
    }
}
