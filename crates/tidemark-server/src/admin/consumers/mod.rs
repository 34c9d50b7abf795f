//! The operator calls on consumers, one file per call: the request as
//! parsed, the one application call, the reply.

pub(super) mod clear;
pub(super) mod delete;
pub(super) mod describe;
pub(super) mod expire;
pub(super) mod history;
pub(super) mod list;
pub(super) mod reset;
pub(super) mod reset_many;

use tidemark_core::ConsumerKey;
use tidemark_core::validate::Violations;
use tidemark_proto::v1 as pb;

use crate::convert;
use crate::request::{Scoped, Touches};

/// A change to one consumer (reset or delete).
pub(crate) struct ChangeConsumer {
    pub key: ConsumerKey,
    /// The new position (reset only).
    pub next_snapshot: i64,
    pub expected_next_snapshot: Option<i64>,
    /// The lease the plan saw (`Some(None)`: none live).
    pub expected_lease: Option<Option<uuid::Uuid>>,
    pub force: bool,
    pub execute: bool,
    /// Why, for history (empty: none given).
    pub reason: String,
}

impl ChangeConsumer {
    /// How `force` applies, with the lease the plan saw.
    pub(crate) fn force(&self) -> tidemark_core::admin::Force {
        tidemark_core::admin::Force::as_planned(self.force, self.expected_lease)
    }
}

pub(super) fn expected_snapshot(v: &mut Violations, expected: Option<i64>) {
    if let Some(expected) = expected
        && expected < 1
    {
        v.add(
            "expected_next_snapshot",
            format!("must be >= 1 when present (got {expected})"),
        );
    }
}

impl Scoped for ChangeConsumer {
    fn touches(&self) -> Touches<'_> {
        Touches::Table(&self.key.table)
    }
}

/// A bulk change's outcomes: the changes made (or planned), and the
/// consumers left alone with why.
pub(super) fn split_bulk(
    outcomes: &[tidemark_service::store::BulkChange],
) -> (Vec<pb::ConsumerChange>, Vec<pb::SkippedConsumer>) {
    let mut changes = Vec::new();
    let mut skipped = Vec::new();
    for outcome in outcomes {
        match &outcome.result {
            Ok(change) => changes.push(convert::consumer_change(&outcome.key, change)),
            Err(why) => {
                let mut left = skipped_consumer(&outcome.key, why);
                if let Some((old, new)) = outcome.target {
                    left.old_next_snapshot = Some(old);
                    left.new_next_snapshot = new;
                }
                skipped.push(left);
            }
        }
    }
    (changes, skipped)
}

/// A consumer a bulk operation left alone, and why.
pub(in crate::admin) fn skipped_consumer(key: &ConsumerKey, why: &tidemark_core::CoreError) -> pb::SkippedConsumer {
    pb::SkippedConsumer {
        consumer_id: key.consumer_id.as_str().to_owned(),
        reason: why.reason().to_owned(),
        message: why.to_string(),
        old_next_snapshot: None,
        new_next_snapshot: None,
    }
}
