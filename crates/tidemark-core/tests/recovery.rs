//! SPEC §4 (R1–R4) and E2 on the pure rules.

use std::time::Duration;

use tidemark_core::expiry::consumer_expired;
use tidemark_core::lease::{self, LeasePolicy, LeaseRequest};
use tidemark_core::recovery::{self, plan};
use tidemark_core::{
    ConsumerKey, ConsumerRecord, CoreError, KeyState, LoggedBatch, Offset, OnExpired, RecoveryRequest, RecoverySource,
    SnapshotRange, StartupKind, StartupMode, Timestamp,
};
use uuid::Uuid;

fn range(earliest: i64, latest: i64) -> SnapshotRange {
    SnapshotRange {
        earliest_snapshot: earliest,
        latest_snapshot: latest,
        earliest_changelog: None,
        changelog_decoupled: false,
    }
}

fn request(startup: StartupMode, range: SnapshotRange) -> RecoveryRequest {
    RecoveryRequest {
        startup,
        ignore_progress: false,
        range,
        checkpoint: None,
        on_expired: OnExpired::Fail,
    }
}

fn consumer(next: i64) -> ConsumerRecord {
    ConsumerRecord {
        next_snapshot: next,
        created_at: Timestamp::from_micros(0),
        updated_at: Timestamp::from_micros(0),
    }
}

fn off(snapshot_id: i64, index: i64, full: bool, total: Option<i64>) -> Offset {
    Offset {
        snapshot_id,
        index,
        scan_snapshot: full,
        total_splits: total,
    }
}

fn start(snapshot_id: i64, full: bool) -> Offset {
    Offset::start_of(snapshot_id, full)
}

// ---------------------------------------------------------------- R1

#[test]
fn r1_consumer_wins_over_startup_options_and_is_read_incrementally() {
    for mode in [
        StartupMode::LatestFull,
        StartupMode::Latest,
        StartupMode::FromSnapshot(2),
        StartupMode::FromSnapshotFull(2),
    ] {
        let p = plan(&request(mode, range(1, 10)), Some(&consumer(6))).unwrap();
        assert_eq!(p.source, RecoverySource::Consumer, "{mode:?}");
        assert_eq!(p.start, start(6, false), "{mode:?}");
    }
}

#[test]
fn r1_ignore_progress_uses_the_startup_options() {
    let mut r = request(StartupMode::LatestFull, range(1, 10));
    r.ignore_progress = true;
    let p = plan(&r, Some(&consumer(6))).unwrap();
    assert_eq!((p.source, p.start), (RecoverySource::StartupOptions, start(10, true)));
}

#[test]
fn r1_checkpoint_wins_over_the_consumer() {
    let mut r = request(StartupMode::LatestFull, range(1, 10));
    r.checkpoint = Some(LoggedBatch {
        start: off(7, 1, false, Some(4)),
        end: off(8, 0, false, Some(2)),
    });
    let p = plan(&r, Some(&consumer(3))).unwrap();
    assert_eq!(p.source, RecoverySource::Checkpoint);
    assert_eq!(p.start, off(7, 1, false, Some(4)), "the logged start, unchanged");
}

// ---------------------------------------------------------------- R2

#[test]
fn r2_consumer_start_is_next_snapshot_as_a_delta() {
    let p = plan(&request(StartupMode::LatestFull, range(3, 10)), Some(&consumer(3))).unwrap();
    assert_eq!(p.start, start(3, false));
    // Caught up: latest + 1 is valid and common.
    let p = plan(&request(StartupMode::LatestFull, range(3, 10)), Some(&consumer(11))).unwrap();
    assert_eq!(p.start, start(11, false));
}

#[test]
fn r2_expired_position_is_data_loss_unless_clamping_is_requested() {
    let r = request(StartupMode::LatestFull, range(5, 10));
    let err = plan(&r, Some(&consumer(3))).unwrap_err();
    assert_eq!(err, CoreError::PositionExpired { next: 3, earliest: 5 });
    assert_eq!(err.reason(), "POSITION_EXPIRED");
    let mut r = r;
    r.on_expired = OnExpired::ClampToEarliest;
    let p = plan(&r, Some(&consumer(3))).unwrap();
    assert_eq!((p.source, p.start), (RecoverySource::Consumer, start(5, false)));
    assert_eq!(p.skipped, Some((3, 4)));
    assert!(p.warnings[0].starts_with("POSITION_CLAMPED:"));
    // Ranges read as prose, not Rust (issue 34: `3..=4`).
    assert!(p.warnings[0].ends_with("skipping snapshots 3–4"), "{}", p.warnings[0]);
}

#[test]
fn r2_decoupled_changelog_extends_what_is_readable_incrementally() {
    let mut rng = range(5, 10);
    rng.earliest_changelog = Some(2);
    // Not decoupled: the changelog does not count.
    assert!(plan(&request(StartupMode::LatestFull, rng), Some(&consumer(3))).is_err());
    rng.changelog_decoupled = true;
    let p = plan(&request(StartupMode::LatestFull, rng), Some(&consumer(3))).unwrap();
    assert_eq!(p.start, start(3, false));
    assert_eq!(rng.earliest_readable(false), 2);
    assert_eq!(rng.earliest_readable(true), 5, "a full scan needs a snapshot");
}

#[test]
fn r2_position_ahead_of_the_table_fails() {
    let err = plan(&request(StartupMode::LatestFull, range(1, 10)), Some(&consumer(12))).unwrap_err();
    assert_eq!(err, CoreError::PositionAheadOfTable { next: 12, latest: 10 });
    assert_eq!(err.reason(), "POSITION_AHEAD_OF_TABLE");
    // An empty table: only 1 is valid.
    assert!(plan(&request(StartupMode::LatestFull, range(0, 0)), Some(&consumer(1))).is_ok());
    assert!(plan(&request(StartupMode::LatestFull, range(0, 0)), Some(&consumer(2))).is_err());
}

// ---------------------------------------------------------------- R3

#[test]
fn r3_latest_full() {
    let p = plan(&request(StartupMode::LatestFull, range(1, 10)), None).unwrap();
    assert_eq!((p.source, p.start), (RecoverySource::StartupOptions, start(10, true)));
    let p = plan(&request(StartupMode::LatestFull, range(0, 0)), None).unwrap();
    assert_eq!(p.start, start(1, false), "an empty table starts at (1, -1, delta)");
}

#[test]
fn r3_latest() {
    let p = plan(&request(StartupMode::Latest, range(1, 10)), None).unwrap();
    assert_eq!(p.start, start(11, false));
    let p = plan(&request(StartupMode::Latest, range(0, 0)), None).unwrap();
    assert_eq!(p.start, start(1, false));
}

#[test]
fn r3_from_snapshot() {
    let p = plan(&request(StartupMode::FromSnapshot(4), range(2, 10)), None).unwrap();
    assert_eq!(p.start, start(4, false));
    let err = plan(&request(StartupMode::FromSnapshot(1), range(2, 10)), None).unwrap_err();
    assert_eq!(err.reason(), "POSITION_EXPIRED");
    let mut r = request(StartupMode::FromSnapshot(1), range(2, 10));
    r.on_expired = OnExpired::ClampToEarliest;
    assert_eq!(plan(&r, None).unwrap().start, start(2, false));
}

#[test]
fn r3_from_snapshot_full() {
    let p = plan(&request(StartupMode::FromSnapshotFull(4), range(2, 10)), None).unwrap();
    assert_eq!(p.start, start(4, true));
    let p = plan(&request(StartupMode::FromSnapshotFull(1), range(2, 10)), None).unwrap();
    assert_eq!(p.start, start(2, true), "max(id, earliest)");
    let err = plan(&request(StartupMode::FromSnapshotFull(11), range(2, 10)), None).unwrap_err();
    assert_eq!(err.reason(), "POSITION_AHEAD_OF_TABLE");
    // The latest snapshot itself is still there to scan.
    let p = plan(&request(StartupMode::FromSnapshotFull(10), range(2, 10)), None).unwrap();
    assert_eq!(p.start, start(10, true));
    // An empty table: snapshot 1, when it comes, is the same data read as a
    // delta; any later id is ahead of the table.
    let p = plan(&request(StartupMode::FromSnapshotFull(1), range(0, 0)), None).unwrap();
    assert_eq!(p.start, start(1, false));
    let err = plan(&request(StartupMode::FromSnapshotFull(2), range(0, 0)), None).unwrap_err();
    assert_eq!(err.reason(), "POSITION_AHEAD_OF_TABLE");
}

#[test]
fn r3_startup_mode_parts_are_validated() {
    assert_eq!(
        StartupMode::from_parts(StartupKind::FromSnapshot, 3, "startup.snapshot_id").unwrap(),
        StartupMode::FromSnapshot(3)
    );
    assert!(StartupMode::from_parts(StartupKind::FromSnapshot, 0, "startup.snapshot_id").is_err());
    assert!(StartupMode::from_parts(StartupKind::FromSnapshotFull, -1, "startup.snapshot_id").is_err());
    assert!(StartupMode::from_parts(StartupKind::Latest, 3, "startup.snapshot_id").is_err());
    assert_eq!(
        StartupMode::from_parts(StartupKind::LatestFull, 0, "x").unwrap(),
        StartupMode::LatestFull
    );
}

// ---------------------------------------------------------------- R4

fn with_checkpoint(range: SnapshotRange, start: Offset, end: Offset) -> RecoveryRequest {
    let mut r = request(StartupMode::LatestFull, range);
    r.checkpoint = Some(LoggedBatch { start, end });
    r
}

#[test]
fn r4_readable_logged_start_is_replayed_unchanged() {
    let logged_start = off(5, 3, false, Some(4));
    let r = with_checkpoint(range(6, 9), logged_start, off(6, 1, false, Some(3)));
    let p = plan(&r, None).unwrap();
    assert_eq!((p.source, p.start), (RecoverySource::Checkpoint, logged_start));
    assert!(p.warnings.is_empty());
}

#[test]
fn r4_expired_logged_start_falls_back_with_a_warning() {
    // Resume at snapshot 5 (start incomplete), earliest is 6: fall back to the
    // consumer at 6, which is still before the logged end.
    let r = with_checkpoint(range(6, 9), off(5, 1, false, Some(4)), off(6, 1, false, Some(3)));
    let p = plan(&r, Some(&consumer(6))).unwrap();
    assert_eq!((p.source, p.start), (RecoverySource::Consumer, start(6, false)));
    assert!(p.warnings[0].starts_with("CHECKPOINT_EXPIRED:"));
}

#[test]
fn r4_logged_batch_mixing_full_and_delta_in_one_snapshot_is_replay_scan_mismatch() {
    let r = with_checkpoint(range(1, 9), off(5, 1, true, Some(4)), off(5, 3, false, Some(4)));
    let err = plan(&r, None).unwrap_err();
    assert_eq!(err.reason(), "REPLAY_SCAN_MISMATCH");
}

#[test]
fn r4_fallback_to_a_full_scan_of_the_end_snapshot_is_replay_scan_mismatch() {
    // No consumer, latest-full: the fallback is a full scan of the latest
    // snapshot, which is the logged end's snapshot read as a delta.
    let r = with_checkpoint(range(5, 6), off(3, 0, false, Some(2)), off(6, 0, false, Some(2)));
    let err = plan(&r, None).unwrap_err();
    assert!(matches!(err, CoreError::ReplayScanMismatch { snapshot_id: 6, .. }));
}

#[test]
fn r4_fallback_after_the_logged_end_is_replay_range_expired() {
    let r = with_checkpoint(range(5, 9), off(3, 0, false, Some(2)), off(4, 0, false, Some(2)));
    let err = plan(&r, None).unwrap_err();
    assert_eq!(err.reason(), "REPLAY_RANGE_EXPIRED");
}

#[test]
fn r4_complete_start_resumes_at_the_next_snapshot() {
    // Start complete in 4: resume at 5 (delta), which is readable.
    let r = with_checkpoint(range(5, 9), off(4, 1, false, Some(2)), off(5, 0, false, Some(2)));
    let p = plan(&r, None).unwrap();
    assert_eq!(p.source, RecoverySource::Checkpoint);
}

#[test]
fn r4_validation_names_checkpoint_fields() {
    let r = with_checkpoint(range(1, 9), off(0, 0, false, Some(2)), off(5, 2, false, Some(2)));
    let fields: Vec<String> = r.validate().unwrap_err().into_iter().map(|v| v.field).collect();
    assert_eq!(fields, ["checkpoint.start.snapshot_id", "checkpoint.end.index"]);
}

#[test]
fn snapshot_range_validation() {
    assert!(range(1, 10).validate("table").is_ok());
    assert!(range(0, 0).validate("table").is_ok());
    assert!(range(0, 10).validate("table").is_ok(), "earliest unknown");
    let fields =
        |r: SnapshotRange| -> Vec<String> { r.validate("table").unwrap_err().into_iter().map(|v| v.field).collect() };
    assert_eq!(fields(range(11, 10)), ["table.earliest_snapshot"]);
    assert_eq!(
        fields(range(-1, -1)),
        ["table.latest_snapshot", "table.earliest_snapshot"]
    );
    let mut r = range(1, 10);
    r.earliest_changelog = Some(0);
    assert_eq!(fields(r), ["table.earliest_changelog"]);
    assert_eq!(range(0, 10).earliest(), 1);
}

// ---------------------------------------------------------------- E2

#[test]
fn e2_consumer_expires_after_idle_time_unless_a_live_lease_holds_it() {
    let key = ConsumerKey::parse("db.t", "main", "c", "").unwrap();
    let t0 = Timestamp::from_micros(0);
    let mut state = KeyState::new(key.clone());
    state.consumer = Some(consumer(3));
    let day = Duration::from_secs(86_400);
    assert!(
        !consumer_expired(&state, None, t0.plus(day * 100)),
        "no expiration time: never"
    );
    assert!(!consumer_expired(&state, Some(day), t0.plus(day)), "equal is kept");
    assert!(consumer_expired(
        &state,
        Some(day),
        t0.plus(day + Duration::from_micros(1))
    ));
    let policy = LeasePolicy {
        max_ttl: day * 2,
        ..LeasePolicy::default()
    };
    let leased = lease::acquire(
        Some(&state),
        &key,
        LeaseRequest {
            holder: "h",
            principal: "anonymous",
            ttl: Some(day * 2),
            lease_id: Uuid::from_u128(1),
            caller: &tidemark_core::Caller::UNKNOWN,
        },
        &policy,
        None,
        t0,
    )
    .unwrap()
    .write
    .unwrap();
    assert!(!consumer_expired(
        &leased,
        Some(day),
        t0.plus(day + Duration::from_secs(1))
    ));
}

// ---------------------------------------------------------------- E5 pin

fn leased_key() -> KeyState {
    let key = ConsumerKey::parse("db.t", "main", "c", "").unwrap();
    lease::acquire(
        None,
        &key,
        LeaseRequest {
            holder: "h",
            principal: "anonymous",
            ttl: None,
            lease_id: Uuid::from_u128(1),
            caller: &tidemark_core::Caller::UNKNOWN,
        },
        &LeasePolicy::default(),
        None,
        Timestamp::from_micros(0),
    )
    .unwrap()
    .write
    .unwrap()
}

#[test]
fn e5_a_full_scan_plan_made_with_the_lease_pins_its_snapshot() {
    let state = leased_key();
    let now = Timestamp::from_micros(1);
    let r = request(StartupMode::LatestFull, range(1, 10));
    let t = recovery::recover(Some(&state), &r, Some(Uuid::from_u128(1)), None, now).unwrap();
    assert!(t.output.pinned);
    assert_eq!(t.write.unwrap().lease.unwrap().full_scan_pin, Some(10));
    // Without the lease: a plan, no pin, nothing written.
    let t = recovery::recover(Some(&state), &r, None, None, now).unwrap();
    assert!(!t.output.pinned && t.write.is_none());
    // A delta plan pins nothing.
    let t = recovery::recover(
        Some(&state),
        &request(StartupMode::Latest, range(1, 10)),
        Some(Uuid::from_u128(1)),
        None,
        now,
    )
    .unwrap();
    assert!(!t.output.pinned && t.write.is_none());
}

#[test]
fn e5_recovery_with_a_lease_that_is_not_held_is_lease_not_held() {
    let state = leased_key();
    let r = request(StartupMode::LatestFull, range(1, 10));
    let err = recovery::recover(
        Some(&state),
        &r,
        Some(Uuid::from_u128(2)),
        None,
        Timestamp::from_micros(1),
    )
    .unwrap_err();
    assert_eq!(err.reason(), "LEASE_NOT_HELD");
    let late = Timestamp::from_micros(31_000_000);
    let err = recovery::recover(Some(&state), &r, Some(Uuid::from_u128(1)), None, late).unwrap_err();
    assert_eq!(err.reason(), "LEASE_NOT_HELD");
}

#[test]
fn e2_an_expired_consumer_is_ignored_by_recovery() {
    let mut state = leased_key();
    state.consumer = Some(consumer(4));
    state.lease = None;
    let r = request(StartupMode::LatestFull, range(1, 10));
    let day = Duration::from_secs(86_400);
    let later = Timestamp::from_micros(0).plus(day * 2);
    let t = recovery::recover(Some(&state), &r, None, Some(day), later).unwrap();
    assert_eq!(t.output.plan.source, RecoverySource::StartupOptions);
    assert_eq!(t.output.consumer, None);
    assert!(t.output.plan.warnings[0].starts_with("CONSUMER_EXPIRED:"));
    let t = recovery::recover(Some(&state), &r, None, None, later).unwrap();
    assert_eq!(t.output.plan.source, RecoverySource::Consumer);
}
