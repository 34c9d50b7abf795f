//! The fence statements on Postgres (SPEC §8): a branch's options, its
//! lowest consumers and its lowest live full-scan pins in one statement,
//! prepared once per limit step.

use std::sync::LazyLock;

use super::{LIVE_LEASE, OPTION_COLUMNS, UNEXPIRED};
use crate::backend::MAX_PAGE;
use crate::row::KeyRow;

/// A branch's options, lowest consumers and lowest live full-scan pins in
/// one statement (`sql/branch_view.sql`, with `sql/consumer_ties.sql` and
/// `sql/pin_ties.sql`), so one snapshot (SPEC §8): read apart, a scan completing
/// in between (its pin gone, its consumer not yet seen) showed no fence.
/// One row per consumer (`kind` 0) and pin (`kind` 1), each carrying the
/// clock and the options; one row with a NULL `kind` when there are none;
/// rows in fence order (by `kind`, position, consumer id).
///
/// The pins' liveness is wrapped in a `CASE`, which the planner cannot
/// estimate and so gives the default one-half: estimated from the whole
/// table, a live lease is rare (most rows have none), so it expected one
/// live pin and read every pin of the branch through a bitmap scan and a
/// sort, where the pin index read in order stops after `limit` live ones
/// (on 990 live pins: 1,000 buffers and a sort against 102 buffers). A pin
/// is set only under a live lease, so most pins are live.
///
/// The limit is written into the text, one statement per
/// [`BRANCH_VIEW_LIMITS`] step, not bound: Postgres costs a bound `LIMIT $n`
/// at a tenth of the branch, so its cached generic plan never won and every
/// fence was planned afresh (~0.4 ms of planning for ~0.07 ms of work).
///
/// With `ties`, each half keeps only the rows at its lowest position (what
/// a fence reports): the lowest is found by a walk that stops at the first
/// row, and its ties are read through the same index by equality, instead
/// of reading and decoding up to `limit` rows of each kind only for the
/// caller to keep those at the fence.
fn branch_view_sql(limit: i64, ties: bool) -> String {
    let common = [("unexpired", UNEXPIRED), ("live_lease", LIVE_LEASE)];
    let (consumer_ties, pin_ties) = if ties {
        (
            crate::sql_template::render(include_str!("sql/consumer_ties.sql"), &common[..1]),
            crate::sql_template::render(include_str!("sql/pin_ties.sql"), &common[1..]),
        )
    } else {
        (String::new(), String::new())
    };
    let (row, limit) = (KeyRow::select_list("k"), limit.to_string());
    crate::sql_template::render(
        include_str!("sql/branch_view.sql"),
        &[
            ("option_columns", OPTION_COLUMNS),
            ("row", &row),
            ("consumer_ties", &consumer_ties),
            ("pin_ties", &pin_ties),
            ("limit", &limit),
            common[0],
            common[1],
        ],
    )
}

/// The limits the branch view is prepared with: a call reads the smallest
/// that covers its own and keeps its own number of rows of each kind.
pub(super) const BRANCH_VIEW_LIMITS: [i64; 4] = [1, 10, 100, MAX_PAGE];

pub(super) static BRANCH_VIEWS: LazyLock<Vec<String>> = LazyLock::new(|| {
    BRANCH_VIEW_LIMITS
        .iter()
        .map(|&limit| branch_view_sql(limit, false))
        .collect()
});

pub(super) static FENCE_VIEWS: LazyLock<Vec<String>> = LazyLock::new(|| {
    BRANCH_VIEW_LIMITS
        .iter()
        .map(|&limit| branch_view_sql(limit, true))
        .collect()
});

/// The smallest prepared limit that covers `limit`.
pub(super) fn limit_read(limit: i64) -> (usize, i64) {
    let step = BRANCH_VIEW_LIMITS
        .iter()
        .position(|&covers| covers >= limit)
        .unwrap_or(BRANCH_VIEW_LIMITS.len() - 1);
    (step, BRANCH_VIEW_LIMITS[step])
}

/// The branch view statement (`$1` table, `$2` branch) that reads at least
/// `limit` holders of each kind (ExplainRetention): public so tests and
/// benchmarks can check its plan.
pub fn branch_view_statement(limit: i64) -> &'static str {
    BRANCH_VIEWS[limit_read(limit).0].as_str()
}

/// The fence statement (GetRetentionFence): as the branch view, but only the
/// holders at each fence.
pub fn fence_view_statement(limit: i64) -> &'static str {
    FENCE_VIEWS[limit_read(limit).0].as_str()
}
