//! Parsers of request fields. Each collects its violations, named by the
//! field's path in the request, so a request reports every bad field at
//! once.

use std::time::Duration;

use tidemark_core::validate::{Violations, path};
use tidemark_core::{ConsumerKey, LoggedBatch, OnExpired, SnapshotRange, StartupKind, StartupMode};
use tidemark_proto::v1 as pb;
use uuid::Uuid;

use crate::convert::{TOKEN_SEPARATOR, offset};

/// Longest duration accepted in a request (a year); longer values are
/// almost certainly unit mistakes.
const MAX_REQUEST_DURATION: Duration = Duration::from_secs(366 * 24 * 3600);

/// Parses a required consumer key at `field`.
pub(crate) fn consumer_key(v: &mut Violations, key: Option<&pb::ConsumerKey>, field: &str) -> Option<ConsumerKey> {
    let Some(key) = key else {
        v.add(field, "is required: {table, branch, consumer_id}");
        return None;
    };
    v.check(ConsumerKey::parse(&key.table, &key.branch, &key.consumer_id, field))
}

/// Parses a lease id (a UUID as returned by AcquireLease).
pub(crate) fn lease_id(v: &mut Violations, value: &str, field: &str) -> Option<Uuid> {
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
pub(crate) fn epoch(v: &mut Violations, value: i64, field: &str) -> Option<i64> {
    if value < 1 {
        v.add(
            field,
            format!("must be >= 1, the epoch returned with the lease (got {value})"),
        );
        return None;
    }
    Some(value)
}

/// Checks a position an operator sets: a snapshot id, 1 up to the id
/// ceiling.
pub(crate) fn position(v: &mut Violations, value: i64, field: &str) -> Option<i64> {
    let ceiling = tidemark_core::MAX_SNAPSHOT_ID;
    if !(1..=ceiling).contains(&value) {
        v.add(field, format!("must be between 1 and {ceiling} (got {value})"));
        return None;
    }
    Some(value)
}

/// Parses an optional, non-negative duration; zero counts as absent.
pub(crate) fn duration(v: &mut Violations, value: Option<&prost_types::Duration>, field: &str) -> Option<Duration> {
    let d = value?;
    if d.seconds < 0 || d.nanos < 0 || d.nanos >= 1_000_000_000 {
        v.add(
            field,
            format!("must be a non-negative duration (got {}s {}ns)", d.seconds, d.nanos),
        );
        return None;
    }
    let duration = tidemark_proto::duration::from_pb(d);
    if duration > MAX_REQUEST_DURATION {
        v.add(field, "must be at most a year");
        return None;
    }
    (!duration.is_zero()).then_some(duration)
}

/// Parses the startup options (absent = LATEST_FULL).
pub(crate) fn startup(v: &mut Violations, s: Option<&pb::StartupOptions>) -> Option<StartupMode> {
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
pub(crate) fn snapshot_range(v: &mut Violations, r: Option<&pb::SnapshotRange>) -> Option<SnapshotRange> {
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
pub(crate) fn logged_batch(v: &mut Violations, b: Option<&pb::LoggedBatch>) -> Option<Option<LoggedBatch>> {
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
pub(crate) fn on_expired(v: &mut Violations, value: i32) -> Option<OnExpired> {
    match pb::OnExpired::try_from(value) {
        Ok(pb::OnExpired::Fail) => Some(OnExpired::Fail),
        Ok(pb::OnExpired::ClampToEarliest) => Some(OnExpired::ClampToEarliest),
        Err(_) => {
            v.add("on_expired", format!("unknown value {value}"));
            None
        }
    }
}

/// Parses a required table identifier.
pub(crate) fn table_name(v: &mut Violations, value: &str, field: &str) -> Option<tidemark_core::TableName> {
    v.check(tidemark_core::TableName::parse(value, field).map_err(|e| vec![e]))
}

/// Parses a branch (empty: main).
pub(crate) fn branch_name(v: &mut Violations, value: &str, field: &str) -> Option<tidemark_core::BranchName> {
    v.check(tidemark_core::BranchName::parse(value, field).map_err(|e| vec![e]))
}

/// Parses an optional filter: empty means none.
pub(crate) fn optional<T>(
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
pub(crate) fn page_size(v: &mut Violations, value: i32, default: i64, max: i64, field: &str) -> Option<i64> {
    match i64::from(value) {
        0 => Some(default),
        n if (1..=max).contains(&n) => Some(n),
        n => {
            v.add(field, format!("must be between 1 and {max} (got {n})"));
            None
        }
    }
}

/// Parses a consumer listing's page token.
pub(crate) fn parse_consumer_page_token(v: &mut Violations, token: &str) -> Option<Option<ConsumerKey>> {
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
pub(crate) fn parse_history_page_token(v: &mut Violations, token: &str) -> Option<Option<i64>> {
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

/// Longest revoke reason kept in history.
const MAX_REASON: usize = 512;

/// An operator's reason is free text kept in history and printed in tables:
/// bounded, and without control characters (Postgres cannot store a NUL
/// in text at all; a line break or an escape would garble what prints it).
pub(crate) fn check_reason(v: &mut Violations, reason: &str) {
    let len = reason.chars().count();
    if len > MAX_REASON {
        v.add("reason", format!("must be at most {MAX_REASON} characters (got {len})"));
    }
    if reason.chars().any(char::is_control) {
        v.add("reason", "must not contain control characters");
    }
}

/// A planned lease id: a lease id, or "" for "no live lease"; anything
/// else is a violation of `field`.
pub(crate) fn expected_lease(v: &mut Violations, field: &str, given: Option<&str>) -> Option<Option<Uuid>> {
    match given.map(str::trim) {
        None => None,
        Some("") => Some(None),
        Some(text) => match Uuid::try_parse(text) {
            Ok(lease) => Some(Some(lease)),
            Err(_) => {
                v.add(field, "must be a lease id (a UUID), or empty for \"no live lease\"");
                None
            }
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::convert::consumer_page_token;

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
}
