//! A bulk reset from a table's page: the selected consumers of a branch to
//! a snapshot, the earliest or latest snapshot, a time, or each shifted by
//! n. The plan lists every selected consumer's old → new position, a
//! skipped one's included; the confirmation resets exactly the planned
//! consumers to exactly their planned positions, each compare-and-set on
//! the position and the lease its plan saw (as the CLI's
//! `reset --from-file` does), so a target that resolves differently by then
//! (the table grew) changes nothing unplanned.

use std::time::{Duration, Instant};

use axum::extract::{Form, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;
use serde::{Deserialize, Serialize};
use tidemark_core::admin::{ConsumerSelector, Force};
use tidemark_core::reset::ResetTarget;
use tidemark_core::{BranchName, ConsumerKey, CoreError, TableName};
use tidemark_service::store::{BulkExpected, StoreError};

use super::{Plan, PlanRow, changed_since_plan, planned_lease, reason_of, table_link};
use crate::Console;
use crate::pages::or_dash;
use crate::session::Viewer;

/// The most consumers one console plan changes; more is the CLI's job
/// (`reset --export plan.csv`, then `--from-file`).
const MAX_PLANNED: usize = 500;

/// How long a plan may take to look at the selection.
const PLAN_BUDGET: Duration = Duration::from_secs(10);

/// The bulk reset form, as planned and as confirmed.
#[derive(Debug, Deserialize)]
pub(crate) struct BulkForm {
    table: String,
    #[serde(default)]
    branch: String,
    #[serde(default)]
    csrf: String,
    #[serde(default)]
    reason: String,
    /// Consumer ids to select (a full-match pattern; empty: all).
    #[serde(default)]
    including: String,
    /// Consumer ids to leave out (a full-match pattern; empty: none).
    #[serde(default)]
    excluding: String,
    /// `snapshot`, `earliest`, `latest`, `datetime` or `shift`.
    #[serde(default)]
    target: String,
    /// The snapshot id, the time (RFC 3339) or the shift.
    #[serde(default)]
    value: String,
    #[serde(default)]
    force: Option<String>,
    /// The plan, as the confirmation executes it (JSON; confirm only).
    #[serde(default)]
    plan: String,
}

/// One consumer the confirmation changes: where the plan saw it and the
/// lease it saw, and where it goes.
#[derive(Debug, Serialize, Deserialize)]
struct Move {
    id: String,
    old: i64,
    new: i64,
    /// The live lease the plan would revoke (`force`), empty for none.
    lease: String,
}

impl BulkForm {
    fn forced(&self) -> bool {
        self.force.as_deref().is_some_and(|f| !f.is_empty())
    }

    fn target(&self) -> Result<ResetTarget, (&'static str, String)> {
        let value = self.value.trim();
        let number = |what: &str| {
            value
                .parse::<i64>()
                .map_err(|_| ("value", format!("{what} must be a whole number (got {value:?})")))
        };
        match self.target.as_str() {
            "snapshot" => match number("a snapshot id")? {
                n if n >= 1 => Ok(ResetTarget::Snapshot(n)),
                n => Err(("value", format!("a snapshot id must be >= 1 (got {n})"))),
            },
            "earliest" => Ok(ResetTarget::Earliest),
            "latest" => Ok(ResetTarget::Latest),
            "shift" => number("a shift").map(ResetTarget::ShiftBy),
            "datetime" => humantime::parse_rfc3339_weak(value)
                .ok()
                .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
                .and_then(|d| i64::try_from(d.as_millis()).ok())
                .map(ResetTarget::Time)
                .ok_or((
                    "value",
                    format!("a time must look like 2026-12-07T08:00:00Z (got {value:?})"),
                )),
            other => Err((
                "target",
                format!("must be snapshot, earliest, latest, datetime or shift (got {other:?})"),
            )),
        }
    }
}

impl Console {
    async fn bulk_acting(
        &self,
        headers: &HeaderMap,
        form: &BulkForm,
    ) -> Result<(Viewer, TableName, BranchName), Box<Response>> {
        let viewer = self.acting(headers, &form.csrf).await?;
        let parsed = TableName::parse(&form.table, "table")
            .and_then(|t| BranchName::parse(&form.branch, "branch").map(|b| (t, b)));
        let (table, branch) = parsed.map_err(|e| Box::new(self.bad_request(&viewer, &e.field, &e.description)))?;
        if !viewer.sees(&table) {
            return Err(Box::new(self.not_in_scope(&viewer, table.as_str())));
        }
        Ok((viewer, table, branch))
    }
}

/// POST /table/reset: the plan of a bulk reset.
pub(crate) async fn plan_bulk_reset(
    State(console): State<Console>,
    headers: HeaderMap,
    Form(form): Form<BulkForm>,
) -> Response {
    let (viewer, table, branch) = match console.bulk_acting(&headers, &form).await {
        Ok(acting) => acting,
        Err(refused) => return *refused,
    };
    let target = match form.target() {
        Ok(target) => target,
        Err((field, why)) => return console.bad_request(&viewer, field, &why),
    };
    let selector = match ConsumerSelector::parse(&form.including, &form.excluding) {
        Ok(selector) => selector,
        Err(v) => {
            let e = v.into_iter().next().expect("a refused pattern names its field");
            return console.bad_request(&viewer, &e.field, &e.description);
        }
    };
    let ctx = viewer.call_context();
    let until = Some(Instant::now() + PLAN_BUDGET);
    let planned = console
        .app
        .reset_consumers(
            &ctx,
            &table,
            &branch,
            &selector,
            target,
            &BulkExpected::default(),
            form.forced(),
            false,
            until,
        )
        .await;
    let changes = match planned {
        Ok((changes, _)) => changes,
        Err(e) => return console.store_error(&viewer, e),
    };
    let mut rows = Vec::with_capacity(changes.len());
    let mut moves = Vec::new();
    let mut skipped = 0;
    for c in &changes {
        let id = c.key.consumer_id.as_str().to_owned();
        match &c.result {
            Ok(change) => {
                let lease = change.revoked.as_ref();
                rows.push(PlanRow {
                    id: id.clone(),
                    lease: lease.map_or_else(
                        || "-".to_owned(),
                        |l| format!("would revoke {} (epoch {})", l.holder, l.epoch),
                    ),
                    from: or_dash(change.old_next),
                    to: or_dash(change.new_next),
                    outcome: if change.changes_anything() {
                        "would reset"
                    } else {
                        "unchanged"
                    }
                    .to_owned(),
                });
                if let (true, Some(old), Some(new)) = (change.changes_anything(), change.old_next, change.new_next) {
                    let lease = lease.map(|l| l.lease_id.to_string()).unwrap_or_default();
                    moves.push(Move { id, old, new, lease });
                }
            }
            Err(why) => {
                skipped += 1;
                let (from, to) = c.target.unwrap_or((0, None));
                let lease = match why {
                    CoreError::LeaseHeld { holder, epoch, .. } => format!("held by {holder} (epoch {epoch})"),
                    _ => "-".to_owned(),
                };
                rows.push(PlanRow {
                    id,
                    lease,
                    from: if c.target.is_some() {
                        from.to_string()
                    } else {
                        "-".to_owned()
                    },
                    to: or_dash(to),
                    outcome: format!("WOULD BE SKIPPED: {} ({why})", why.reason()),
                });
            }
        }
    }
    let mut notes = Vec::new();
    if skipped > 0 {
        notes.push(format!(
            "{skipped} selected consumer(s) would be skipped; their row shows where the target would have put them. \
             A live lease skips a consumer unless \"revoke live leases\" is ticked."
        ));
    }
    let reason = reason_of(&form.reason, "reset from the console");
    let confirm = if moves.is_empty() {
        None
    } else if moves.len() > MAX_PLANNED {
        notes.push(format!(
            "{} consumers would move; the console confirms at most {MAX_PLANNED} at once. Narrow the selection, or \
             use the CLI: tidemark consumers reset {} --branch {} … --export plan.csv, then --from-file plan.csv.",
            moves.len(),
            table.as_str(),
            branch.as_str()
        ));
        None
    } else {
        let plan = serde_json::to_string(&moves).expect("moves serialize");
        let mut fields = vec![
            ("table".to_owned(), table.as_str().to_owned()),
            ("branch".to_owned(), branch.as_str().to_owned()),
            ("reason".to_owned(), form.reason.clone()),
            ("plan".to_owned(), plan),
        ];
        if form.forced() {
            fields.push(("force".to_owned(), "on".to_owned()));
        }
        Some((
            "/table/reset/confirm",
            format!("Confirm: reset these {} consumer(s) exactly as planned", moves.len()),
            fields,
        ))
    };
    let summary = format!(
        "{} consumer(s) selected: {} would move, {} unchanged, {skipped} would be skipped. Reason kept in history: \
         \"{reason}\".",
        changes.len(),
        moves.len(),
        changes.len() - moves.len() - skipped
    );
    let back = (table_link(&table, &branch), table.as_str().to_owned());
    let plan = Plan {
        heading: format!("Reset consumers of {}", table.as_str()),
        executed: false,
        plan: summary,
        notes,
        rows,
        confirm,
        back,
    };
    console.plan_page(&viewer, (&table, &branch), plan)
}

/// POST /table/reset/confirm: resets exactly the planned consumers to their
/// planned positions; one that changed since its plan is refused and left
/// as it is.
pub(crate) async fn confirm_bulk_reset(
    State(console): State<Console>,
    headers: HeaderMap,
    Form(form): Form<BulkForm>,
) -> Response {
    let (viewer, table, branch) = match console.bulk_acting(&headers, &form).await {
        Ok(acting) => acting,
        Err(refused) => return *refused,
    };
    let moves: Vec<Move> = match serde_json::from_str(&form.plan) {
        Ok(moves) if !Vec::is_empty(&moves) && moves.len() <= MAX_PLANNED => moves,
        _ => return console.bad_request(&viewer, "plan", "the plan is missing or not the console's: plan again"),
    };
    let mut ctx = viewer.call_context();
    ctx.reason = Some(reason_of(&form.reason, "reset from the console"));
    let mut rows = Vec::with_capacity(moves.len());
    let (mut done, mut refused) = (0, 0);
    for m in &moves {
        let key = match ConsumerKey::parse(table.as_str(), branch.as_str(), &m.id, "") {
            Ok(key) => key,
            Err(_) => return console.bad_request(&viewer, "plan", "names a consumer id that is not valid"),
        };
        let Ok(lease) = planned_lease(&m.lease) else {
            return console.bad_request(&viewer, "plan", "names a lease id that is not valid");
        };
        let force = Force::as_planned(form.forced(), Some(lease));
        let outcome = match console
            .app
            .reset_consumer(&ctx, &key, m.new, Some(m.old), force, true)
            .await
        {
            Ok(_) => {
                done += 1;
                "reset".to_owned()
            }
            Err(StoreError::Rule(why)) if changed_since_plan(&why) => {
                refused += 1;
                format!(
                    "REFUSED: {} — changed since the plan, left as it is ({why})",
                    why.reason()
                )
            }
            Err(StoreError::Rule(why)) => {
                refused += 1;
                format!("REFUSED: {} ({why})", why.reason())
            }
            Err(e) => return console.store_error(&viewer, e),
        };
        rows.push(PlanRow {
            id: m.id.clone(),
            lease: if m.lease.is_empty() {
                "-".to_owned()
            } else {
                format!("revoked {}", m.lease)
            },
            from: m.old.to_string(),
            to: m.new.to_string(),
            outcome,
        });
    }
    let plan = Plan {
        heading: format!("Reset consumers of {}", table.as_str()),
        executed: true,
        plan: format!(
            "{done} of {} planned consumer(s) reset; {refused} refused.",
            moves.len()
        ),
        notes: Vec::new(),
        rows,
        confirm: None,
        back: (table_link(&table, &branch), table.as_str().to_owned()),
    };
    let mut page = console.plan_page(&viewer, (&table, &branch), plan);
    if refused > 0 {
        *page.status_mut() = StatusCode::CONFLICT;
    }
    page
}
