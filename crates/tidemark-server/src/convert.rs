//! Proto <-> domain conversions. Parsing collects every invalid field, named
//! by its path in the request, before anything reaches the database.

use std::time::Duration;

use tidemark_core::validate::{Violations, path};
use tidemark_core::{
    ConsumerKey, ConsumerRecord, LoggedBatch, Offset, OnExpired, RecoverySource, SnapshotRange, StartupKind,
    StartupMode, Timestamp,
};
use tidemark_proto::v1 as pb;
use uuid::Uuid;

/// Longest duration accepted in a request (a year); longer values are
/// almost certainly unit mistakes.
const MAX_REQUEST_DURATION: Duration = Duration::from_secs(366 * 24 * 3600);

/// Parses a required consumer key at `field`.
pub fn consumer_key(v: &mut Violations, key: Option<&pb::ConsumerKey>, field: &str) -> Option<ConsumerKey> {
    let Some(key) = key else {
        v.add(field, "is required: {table, branch, consumer_id}");
        return None;
    };
    v.check(ConsumerKey::parse(&key.table, &key.branch, &key.consumer_id, field))
}

/// Parses a lease id (a UUID as returned by AcquireLease).
pub fn lease_id(v: &mut Violations, value: &str, field: &str) -> Option<Uuid> {
    if value.is_empty() {
        v.add(field, "is required: the lease_id returned by AcquireLease");
        return None;
    }
    match Uuid::try_parse(value) {
        Ok(id) => Some(id),
        Err(_) => {
            v.add(
                field,
                format!(
                    "{} is not a lease id (a UUID as returned by AcquireLease)",
                    tidemark_core::validate::quoted(value)
                ),
            );
            None
        }
    }
}

/// Checks an epoch (>= 1).
pub fn epoch(v: &mut Violations, value: i64, field: &str) -> Option<i64> {
    if value < 1 {
        v.add(
            field,
            format!("must be >= 1, the epoch returned with the lease (got {value})"),
        );
        return None;
    }
    Some(value)
}

/// Parses an optional, non-negative duration; zero counts as absent.
pub fn duration(v: &mut Violations, value: Option<&prost_types::Duration>, field: &str) -> Option<Duration> {
    let d = value?;
    if d.seconds < 0 || d.nanos < 0 || d.nanos >= 1_000_000_000 {
        v.add(
            field,
            format!("must be a non-negative duration (got {}s {}ns)", d.seconds, d.nanos),
        );
        return None;
    }
    let duration = Duration::new(
        u64::try_from(d.seconds).unwrap_or(0),
        u32::try_from(d.nanos).unwrap_or(0),
    );
    if duration > MAX_REQUEST_DURATION {
        v.add(field, "must be at most a year");
        return None;
    }
    (!duration.is_zero()).then_some(duration)
}

/// A proto offset as a domain offset (validated later, by the rule that
/// uses it).
pub fn offset(o: &pb::Offset) -> Offset {
    Offset {
        snapshot_id: o.snapshot_id,
        index: o.index,
        scan_snapshot: o.scan_snapshot,
        total_splits: o.total_splits,
    }
}

/// A domain offset as a proto offset.
pub fn offset_to_pb(o: &Offset) -> pb::Offset {
    pb::Offset {
        snapshot_id: o.snapshot_id,
        index: o.index,
        scan_snapshot: o.scan_snapshot,
        total_splits: o.total_splits,
    }
}

/// Parses the startup options (absent = LATEST_FULL).
pub fn startup(v: &mut Violations, s: Option<&pb::StartupOptions>) -> Option<StartupMode> {
    let Some(s) = s else {
        return Some(StartupMode::LatestFull);
    };
    let kind = match pb::StartupMode::try_from(s.mode) {
        Ok(pb::StartupMode::LatestFull) => StartupKind::LatestFull,
        Ok(pb::StartupMode::Latest) => StartupKind::Latest,
        Ok(pb::StartupMode::FromSnapshot) => StartupKind::FromSnapshot,
        Ok(pb::StartupMode::FromSnapshotFull) => StartupKind::FromSnapshotFull,
        Err(_) => {
            v.add("startup.mode", format!("unknown startup mode {}", s.mode));
            return None;
        }
    };
    v.check(StartupMode::from_parts(kind, s.snapshot_id, "startup.snapshot_id").map_err(|e| vec![e]))
}

/// Parses the worker's snapshot range (required).
pub fn snapshot_range(v: &mut Violations, r: Option<&pb::SnapshotRange>) -> Option<SnapshotRange> {
    let Some(r) = r else {
        v.add(
            "table",
            "is required: the worker's view of the table's snapshots {earliest_snapshot, latest_snapshot}",
        );
        return None;
    };
    Some(SnapshotRange {
        earliest_snapshot: r.earliest_snapshot,
        latest_snapshot: r.latest_snapshot,
        earliest_changelog: r.earliest_changelog,
        changelog_decoupled: r.changelog_decoupled,
    })
}

/// Parses an optional logged batch; when present, both offsets are required.
pub fn logged_batch(v: &mut Violations, b: Option<&pb::LoggedBatch>) -> Option<Option<LoggedBatch>> {
    let Some(b) = b else {
        return Some(None);
    };
    let start = b.start.as_ref().map(offset);
    let end = b.end.as_ref().map(offset);
    for (value, name) in [(&start, "start"), (&end, "end")] {
        if value.is_none() {
            v.add(path("checkpoint", name), "is required when checkpoint is given");
        }
    }
    Some(Some(LoggedBatch {
        start: start?,
        end: end?,
    }))
}

/// Parses `on_expired`.
pub fn on_expired(v: &mut Violations, value: i32) -> Option<OnExpired> {
    match pb::OnExpired::try_from(value) {
        Ok(pb::OnExpired::Fail) => Some(OnExpired::Fail),
        Ok(pb::OnExpired::ClampToEarliest) => Some(OnExpired::ClampToEarliest),
        Err(_) => {
            v.add("on_expired", format!("unknown value {value}"));
            None
        }
    }
}

/// A domain timestamp as a proto timestamp.
pub fn timestamp(t: Timestamp) -> prost_types::Timestamp {
    let micros = t.as_micros();
    prost_types::Timestamp {
        seconds: micros.div_euclid(1_000_000),
        nanos: i32::try_from(micros.rem_euclid(1_000_000) * 1_000).unwrap_or(0),
    }
}

/// A domain duration as a proto duration.
pub fn duration_to_pb(d: Duration) -> prost_types::Duration {
    prost_types::Duration {
        seconds: i64::try_from(d.as_secs()).unwrap_or(i64::MAX),
        nanos: i32::try_from(d.subsec_nanos()).unwrap_or(0),
    }
}

/// A domain key as a proto key.
pub fn key_to_pb(key: &ConsumerKey) -> pb::ConsumerKey {
    pb::ConsumerKey {
        table: key.table.as_str().to_owned(),
        branch: key.branch.as_str().to_owned(),
        consumer_id: key.consumer_id.as_str().to_owned(),
    }
}

/// A consumer record as a proto consumer.
pub fn consumer_to_pb(key: &ConsumerKey, c: &ConsumerRecord, latest_snapshot: Option<i64>) -> pb::Consumer {
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
pub fn source_to_pb(source: RecoverySource) -> pb::RecoverySource {
    match source {
        RecoverySource::Checkpoint => pb::RecoverySource::Checkpoint,
        RecoverySource::Consumer => pb::RecoverySource::Consumer,
        RecoverySource::StartupOptions => pb::RecoverySource::StartupOptions,
    }
}

/// A commit outcome as the proto enum.
pub fn outcome_to_pb(outcome: tidemark_core::CommitOutcome) -> pb::CommitOutcome {
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
pub fn lease_info(lease: &tidemark_core::LeaseRecord, now: Timestamp) -> pb::LeaseInfo {
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
    }
}

/// A key as operators see it.
pub fn consumer_info(view: &tidemark_store::ConsumerView) -> pb::ConsumerInfo {
    let state = &view.state;
    pb::ConsumerInfo {
        key: Some(key_to_pb(&state.key)),
        consumer: state
            .consumer
            .as_ref()
            .map(|c| consumer_to_pb(&state.key, c, state.latest_snapshot)),
        lease: state.lease.as_ref().map(|l| lease_info(l, view.now)),
        epoch: state.epoch,
        idle: view.liveness.map(|l| duration_to_pb(l.idle)),
        expired: view.liveness.is_some_and(|l| l.expired),
        expires_in: view.liveness.and_then(|l| l.expires_in).map(duration_to_pb),
    }
}

/// A history row as a proto entry.
pub fn history_entry(h: &tidemark_store::HistoryRecord) -> pb::HistoryEntry {
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
    }
}

/// An operator change to one key.
pub fn consumer_change(key: &ConsumerKey, change: &tidemark_core::admin::AdminChange) -> pb::ConsumerChange {
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
pub fn retention_holder(h: &tidemark_store::Holder) -> pb::RetentionHolder {
    let state = &h.view.state;
    let live = state.live_lease(h.view.now);
    pb::RetentionHolder {
        kind: match h.kind {
            tidemark_store::HolderKind::Consumer => pb::HolderKind::Consumer,
            tidemark_store::HolderKind::FullScanPin => pb::HolderKind::FullScanPin,
        }
        .into(),
        consumer_id: state.key.consumer_id.as_str().to_owned(),
        snapshot: h.snapshot,
        lease_holder: live.map(|l| l.holder.clone()).unwrap_or_default(),
        lease_epoch: live.map_or(0, |l| l.epoch),
        idle: match h.kind {
            tidemark_store::HolderKind::Consumer => h.view.liveness.map(|l| duration_to_pb(l.idle)),
            tidemark_store::HolderKind::FullScanPin => None,
        },
        expires_in: match h.kind {
            tidemark_store::HolderKind::Consumer => h.view.liveness.and_then(|l| l.expires_in).map(duration_to_pb),
            tidemark_store::HolderKind::FullScanPin => None,
        },
        lag: match h.kind {
            tidemark_store::HolderKind::Consumer => state.lag(),
            tidemark_store::HolderKind::FullScanPin => None,
        },
    }
}

/// Parses a required table identifier.
pub fn table_name(v: &mut Violations, value: &str, field: &str) -> Option<tidemark_core::TableName> {
    v.check(tidemark_core::TableName::parse(value, field).map_err(|e| vec![e]))
}

/// Parses a branch (empty: main).
pub fn branch_name(v: &mut Violations, value: &str, field: &str) -> Option<tidemark_core::BranchName> {
    v.check(tidemark_core::BranchName::parse(value, field).map_err(|e| vec![e]))
}

/// Parses an optional filter: empty means none.
pub fn optional<T>(
    v: &mut Violations,
    value: &str,
    field: &str,
    parse: impl Fn(&mut Violations, &str, &str) -> Option<T>,
) -> Option<Option<T>> {
    if value.is_empty() {
        Some(None)
    } else {
        parse(v, value, field).map(Some)
    }
}

/// A page size: 0 means `default`; otherwise 1..=`max`.
pub fn page_size(v: &mut Violations, value: i32, default: i64, max: i64, field: &str) -> Option<i64> {
    match i64::from(value) {
        0 => Some(default),
        n if (1..=max).contains(&n) => Some(n),
        n => {
            v.add(field, format!("must be between 1 and {max} (got {n})"));
            None
        }
    }
}

const TOKEN_SEPARATOR: char = '\u{1f}';

/// An opaque page token for a consumer listing (hex of the last key).
pub fn consumer_page_token(key: &ConsumerKey) -> String {
    let raw = format!(
        "{}{TOKEN_SEPARATOR}{}{TOKEN_SEPARATOR}{}",
        key.table.as_str(),
        key.branch.as_str(),
        key.consumer_id.as_str()
    );
    raw.bytes().map(|b| format!("{b:02x}")).collect()
}

/// Parses a consumer listing's page token.
pub fn parse_consumer_page_token(v: &mut Violations, token: &str) -> Option<Option<ConsumerKey>> {
    if token.is_empty() {
        return Some(None);
    }
    let bad = |v: &mut Violations| {
        v.add(
            "page_token",
            "is not a page token from a previous ListConsumers response",
        );
        None
    };
    if !token.len().is_multiple_of(2) || token.len() > 4096 {
        return bad(v);
    }
    let bytes: Option<Vec<u8>> = (0..token.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(token.get(i..i + 2)?, 16).ok())
        .collect();
    let Some(text) = bytes.and_then(|b| String::from_utf8(b).ok()) else {
        return bad(v);
    };
    let parts: Vec<&str> = text.split(TOKEN_SEPARATOR).collect();
    match parts.as_slice() {
        [table, branch, id] => match ConsumerKey::parse(table, branch, id, "") {
            Ok(key) => Some(Some(key)),
            Err(_) => bad(v),
        },
        _ => bad(v),
    }
}

/// Parses a history page token (the id to continue below).
pub fn parse_history_page_token(v: &mut Violations, token: &str) -> Option<Option<i64>> {
    if token.is_empty() {
        return Some(None);
    }
    match token.parse::<i64>() {
        Ok(id) if id > 0 => Some(Some(id)),
        _ => {
            v.add("page_token", "is not a page token from a previous ListHistory response");
            None
        }
    }
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
    fn durations_reject_negative_and_absurd_values() {
        let mut v = Violations::new();
        assert_eq!(
            duration(&mut v, Some(&prost_types::Duration { seconds: 10, nanos: 0 }), "ttl"),
            Some(Duration::from_secs(10))
        );
        assert_eq!(
            duration(&mut v, Some(&prost_types::Duration { seconds: 0, nanos: 0 }), "ttl"),
            None
        );
        assert!(v.is_empty());
        duration(&mut v, Some(&prost_types::Duration { seconds: -1, nanos: 0 }), "ttl");
        duration(
            &mut v,
            Some(&prost_types::Duration {
                seconds: i64::MAX,
                nanos: 0,
            }),
            "ttl",
        );
        assert_eq!(v.into_vec().len(), 2);
    }

    #[test]
    fn consumer_page_tokens_round_trip_and_reject_garbage() {
        let key = ConsumerKey::parse("db.t", "dev", "c-1", "").unwrap();
        let mut v = Violations::new();
        let token = consumer_page_token(&key);
        assert_eq!(parse_consumer_page_token(&mut v, &token), Some(Some(key)));
        for bad in ["zz", "abc", "00", &"41".repeat(3000)] {
            assert_eq!(parse_consumer_page_token(&mut v, bad), None, "{bad}");
        }
        assert_eq!(v.into_vec().len(), 4);
    }

    #[test]
    fn every_outcome_maps() {
        for o in tidemark_core::CommitOutcome::ALL {
            assert_eq!(outcome_to_pb(o).as_str_name(), format!("COMMIT_OUTCOME_{}", o.as_str()));
        }
    }
}
