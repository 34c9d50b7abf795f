//! The core's stable names and storage codes, the exact bounds of its
//! validations, its messages, and the small pure helpers the rules use
//! (glob scopes, fence attribution, lag, human durations). Each of these is
//! seen by a client, an operator or the database; cargo-mutants over this
//! crate showed them checked only from other crates' tests.

use std::collections::BTreeMap;
use std::time::Duration;

use tidemark_core::ids::{MAX_HOLDER, check_consumer_id_prefix, parse_holder};
use tidemark_core::offset::MAX_SNAPSHOT_ID;
use tidemark_core::options::{CHANGELOG_ONLY, Human, MODE};
use tidemark_core::recovery::{SnapshotRange, StartupKind, StartupMode};
use tidemark_core::retention::{FenceInputs, Fences};
use tidemark_core::state::LeaseStatus;
use tidemark_core::validate::{Violations, quoted};
use tidemark_core::{
    ConsumerId, ConsumerKey, ConsumerMode, ConsumerRecord, CoreError, EventKind, FieldViolation, KeyState, LeasePolicy,
    Offset, TableOptions, TablePattern, Timestamp,
};

fn key() -> ConsumerKey {
    ConsumerKey::parse("db.orders", "dev", "etl", "consumer").unwrap()
}

#[test]
fn event_kinds_have_stable_names_that_parse_back() {
    for kind in EventKind::ALL {
        assert!(!kind.as_str().is_empty());
        assert_eq!(EventKind::parse(kind.as_str()), Some(kind));
        assert_eq!(kind.to_string(), kind.as_str());
    }
    assert_eq!(EventKind::Advance.as_str(), "ADVANCE");
    assert_eq!(EventKind::LeaseRevoke.as_str(), "LEASE_REVOKE");
    assert_eq!(EventKind::parse("advance"), None);
    assert_eq!(EventKind::parse("NOPE"), None);
}

#[test]
fn lease_statuses_have_stable_storage_codes() {
    let all = [
        (LeaseStatus::Active, 1),
        (LeaseStatus::Released, 2),
        (LeaseStatus::Revoked, 3),
    ];
    for (status, code) in all {
        assert_eq!(status.code(), code);
        assert_eq!(LeaseStatus::from_code(code), Some(status));
    }
    for unknown in [0, 4, -1] {
        assert_eq!(LeaseStatus::from_code(unknown), None);
    }
}

#[test]
fn lag_counts_the_snapshots_not_yet_consumed() {
    let mut state = KeyState::new(key());
    assert_eq!(state.lag(), None, "no position");
    state.consumer = Some(ConsumerRecord {
        next_snapshot: 8,
        created_at: Timestamp::from_micros(0),
        updated_at: Timestamp::from_micros(0),
    });
    assert_eq!(state.lag(), None, "no latest snapshot known");
    state.latest_snapshot = Some(10);
    assert_eq!(state.lag(), Some(3), "snapshots 8, 9 and 10");
    state.latest_snapshot = Some(7);
    assert_eq!(state.lag(), Some(0), "never negative");
}

#[test]
fn messages_name_fields_and_quote_values_safely() {
    assert_eq!(Timestamp::from_micros(42).to_string(), "42us");
    assert_eq!(
        FieldViolation::new("end.index", "too big").to_string(),
        "end.index: too big"
    );
    assert_eq!(quoted("a\"b"), "\"a\\\"b\"");
    assert_eq!(quoted(&"x".repeat(64)), format!("\"{}\"", "x".repeat(64)));
    assert_eq!(quoted(&"x".repeat(65)), format!("\"{}...\"", "x".repeat(64)));
    let mut v = Violations::new();
    assert!(v.is_empty());
    v.add("a", "bad");
    assert!(!v.is_empty());
    let err = CoreError::InvalidArgument(vec![FieldViolation::new("a", "bad"), FieldViolation::new("b", "worse")]);
    assert_eq!(err.to_string(), "invalid argument: a: bad; b: worse");
    let missing = CoreError::ConsumerNotFound {
        key: key(),
        suggestion: None,
    };
    assert_eq!(
        missing.metadata(),
        [
            ("table", "db.orders".to_owned()),
            ("branch", "dev".to_owned()),
            ("consumer_id", "etl".to_owned())
        ]
    );
    // With a did-you-mean: the message and the metadata name it.
    let typo = CoreError::ConsumerNotFound {
        key: key(),
        suggestion: Some(tidemark_core::suggest::Suggestion::Consumer("etl-1".into())),
    };
    assert_eq!(
        typo.to_string(),
        "consumer db.orders@dev/etl not found; did you mean etl-1?"
    );
    assert_eq!(typo.metadata().last(), Some(&("did_you_mean", "etl-1".to_owned())));
    assert_eq!(key().to_string(), "db.orders@dev/etl");
    assert_eq!(ConsumerId::parse("etl-1", "c").unwrap().as_str(), "etl-1");
}

#[test]
fn holders_and_prefixes_have_exact_bounds() {
    assert!(parse_holder(&"h".repeat(MAX_HOLDER), "holder").is_ok());
    assert!(parse_holder(&"h".repeat(MAX_HOLDER + 1), "holder").is_err());
    assert!(parse_holder("", "holder").is_err());
    assert!(check_consumer_id_prefix("", "p").is_ok());
    assert!(check_consumer_id_prefix("etl-", "p").is_ok());
    assert!(check_consumer_id_prefix(&"c".repeat(128), "p").is_ok());
    for bad in ["a\0b", "a b", "a/b", &"c".repeat(129)] {
        let violation = check_consumer_id_prefix(bad, "p").unwrap_err();
        assert_eq!(violation.field, "p", "{bad:?}");
    }
}

#[test]
fn offsets_have_exact_bounds_and_say_their_kind() {
    let offset = |snapshot_id, index, total| Offset {
        snapshot_id,
        index,
        scan_snapshot: false,
        total_splits: total,
    };
    assert!(offset(MAX_SNAPSHOT_ID, 0, Some(1)).validate("end").is_ok());
    assert!(offset(MAX_SNAPSHOT_ID + 1, 0, Some(1)).validate("end").is_err());
    assert_eq!(MAX_SNAPSHOT_ID, i64::MAX - 1);
    assert!(offset(5, 1, Some(2)).validate("end").is_ok());
    for (index, total) in [(2, 2), (3, 2)] {
        let err = offset(5, index, Some(total)).validate("end").unwrap_err();
        assert!(err.iter().any(|v| v.field == "end.index"), "{index}/{total}: {err:?}");
    }
    let full = Offset {
        scan_snapshot: true,
        ..offset(5, 1, Some(3))
    };
    assert!(full.to_string().contains("full"), "{full}");
    assert!(offset(5, 1, Some(3)).to_string().contains("delta"));
    assert!(full.to_string().starts_with("(snapshot 5, index 1, full"), "{full}");
}

#[test]
fn startup_modes_and_snapshot_ranges_have_exact_bounds() {
    for kind in [StartupKind::FromSnapshot, StartupKind::FromSnapshotFull] {
        assert!(StartupMode::from_parts(kind, 1, "s").is_ok());
        assert!(StartupMode::from_parts(kind, MAX_SNAPSHOT_ID, "s").is_ok());
        assert!(StartupMode::from_parts(kind, 0, "s").is_err());
        assert!(StartupMode::from_parts(kind, MAX_SNAPSHOT_ID + 1, "s").is_err());
    }
    assert_eq!(
        StartupMode::from_parts(StartupKind::Latest, 0, "s"),
        Ok(StartupMode::Latest)
    );
    assert!(StartupMode::from_parts(StartupKind::Latest, 3, "s").is_err());
    let range = |latest| SnapshotRange {
        earliest_snapshot: 1,
        latest_snapshot: latest,
        earliest_changelog: None,
        changelog_decoupled: false,
    };
    assert!(range(MAX_SNAPSHOT_ID).validate("table").is_ok());
    assert!(range(MAX_SNAPSHOT_ID + 1).validate("table").is_err());
}

#[test]
fn lease_policies_need_min_default_max_in_order() {
    let policy = |min, default, max| LeasePolicy {
        min_ttl: Duration::from_secs(min),
        default_ttl: Duration::from_secs(default),
        max_ttl: Duration::from_secs(max),
    };
    assert!(policy(5, 30, 600).validate().is_ok());
    assert!(policy(5, 5, 5).validate().is_ok());
    assert!(policy(40, 30, 600).validate().is_err(), "min above default");
    assert!(policy(5, 700, 600).validate().is_err(), "default above max");
    assert!(policy(0, 30, 600).validate().is_err(), "zero min");
}

#[test]
fn options_parse_every_value_they_document() {
    assert_eq!(ConsumerMode::parse(" Exactly-Once "), Some(ConsumerMode::ExactlyOnce));
    assert_eq!(ConsumerMode::parse("at-least-once"), Some(ConsumerMode::AtLeastOnce));
    assert_eq!(ConsumerMode::parse("once"), None);
    for mode in [ConsumerMode::ExactlyOnce, ConsumerMode::AtLeastOnce] {
        assert_eq!(ConsumerMode::parse(mode.as_str()), Some(mode));
    }
    let set = |k: &str, v: &str| BTreeMap::from([(k.to_owned(), v.to_owned())]);
    let on = TableOptions::default()
        .apply(&set(CHANGELOG_ONLY, "true"), &[])
        .unwrap();
    assert!(on.changelog_only);
    let off = on.apply(&set(CHANGELOG_ONLY, "FALSE"), &[]).unwrap();
    assert!(!off.changelog_only);
    assert!(on.apply(&set(CHANGELOG_ONLY, "maybe"), &[]).is_err());
    let moded = TableOptions::default().apply(&set(MODE, "exactly-once"), &[]).unwrap();
    assert_eq!(moded.mode, Some(ConsumerMode::ExactlyOnce));
}

#[test]
fn durations_read_as_humans_write_them() {
    let cases = [
        (Duration::from_millis(850), "850ms"),
        (Duration::ZERO, "0ms"),
        (Duration::from_secs(42), "42s"),
        (Duration::from_secs(4 * 60 + 12), "4m 12s"),
        (Duration::from_secs(3 * 3600 + 5 * 60 + 9), "3h 5m"),
        (Duration::from_secs(86_400 + 3 * 3600 + 7), "1d 3h"),
        (Duration::from_secs(25 * 3600), "1d 1h"),
    ];
    for (duration, shown) in cases {
        assert_eq!(Human(duration).to_string(), shown, "{duration:?}");
    }
}

#[test]
fn table_patterns_glob_with_backtracking_and_bounded_length() {
    let pattern = |p: &str| TablePattern::parse(p).unwrap();
    assert!(pattern("db.*").matches("db.orders"));
    assert!(!pattern("db.*").matches("other.orders"));
    assert!(
        pattern("db.*_x").matches("db.a_b_x"),
        "the star backtracks past an early _x"
    );
    assert!(!pattern("db.*_x").matches("db.a_b_y"));
    assert!(pattern("db.?").matches("db.a"));
    assert!(!pattern("db.?").matches("db.ab"));
    assert!(pattern("*.*s").matches("shop.orders"));
    assert!(pattern(&"a".repeat(512)).matches(&"a".repeat(512)));
    assert!(TablePattern::parse(&"a".repeat(513)).is_err());
    assert!(TablePattern::parse("").is_err());
    assert!(TablePattern::parse("db.\n").is_err());
}

#[test]
fn fences_say_what_set_them() {
    let inputs = FenceInputs {
        consumer_min: Some(5),
        pin_min: Some(7),
    };
    let fences = |snapshot, changelog, changelog_only| Fences {
        snapshot,
        changelog,
        changelog_only,
    };
    let by_consumers = fences(Some(5), Some(5), false);
    assert!(by_consumers.snapshot_set_by_consumers(&inputs));
    assert!(by_consumers.changelog_set_by_consumers(&inputs));
    assert!(!by_consumers.snapshot_set_by_pins(&inputs));
    assert!(!by_consumers.changelog_set_by_pins(&inputs));
    let by_pins = fences(Some(7), Some(7), false);
    assert!(by_pins.snapshot_set_by_pins(&inputs));
    assert!(by_pins.changelog_set_by_pins(&inputs));
    assert!(!by_pins.snapshot_set_by_consumers(&inputs));
    assert!(!by_pins.changelog_set_by_consumers(&inputs));
    // Changelog-only consumers never set the snapshot fence.
    assert!(!fences(Some(5), Some(5), true).snapshot_set_by_consumers(&inputs));
    // No fence: nothing set it, even with no inputs either.
    let none = fences(None, None, false);
    let empty = FenceInputs::default();
    assert!(!none.snapshot_set_by_consumers(&empty));
    assert!(!none.changelog_set_by_consumers(&empty));
    assert!(!none.changelog_set_by_pins(&empty));
}
