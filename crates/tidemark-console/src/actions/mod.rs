//! Acting from the console (issue 55), for the `operator` role only: a
//! change is planned first — the page shows exactly what it would do, each
//! consumer's old → new position and the lease it would revoke — then
//! confirmed, and the confirmation executes that plan and nothing else
//! (compare-and-set on the planned positions and the planned lease: a
//! consumer that moved or was taken over since is refused, not
//! overwritten). Every form carries a CSRF token and must come from the
//! console's own origin; the principal and the operator's reason go to
//! history.

mod bulk;
mod change;
mod revoke;

pub(super) use bulk::{confirm_bulk_reset, plan_bulk_reset};
pub(super) use change::{confirm_delete, confirm_reset, plan_delete, plan_reset};
pub(super) use revoke::{confirm_revoke, plan_revoke};

use askama::Template;
use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;
use tidemark_core::{BranchName, ConsumerKey, CoreError, TableName};

use crate::format::link;
use crate::session::Viewer;
use crate::{Console, same_origin};

/// The page of a plan (or of a bulk change just executed).
#[derive(Template)]
#[template(path = "console/plan.html")]
struct PlanPage {
    principal: String,
    signed_in: bool,
    refresh_seconds: u64,
    heading: String,
    table: String,
    branch: String,
    /// Whether the change was made (a bulk change's results).
    executed: bool,
    /// What the plan would do, or why there is nothing to do.
    plan: String,
    notes: Vec<String>,
    rows: Vec<PlanRow>,
    /// Whether there is something to confirm.
    confirmable: bool,
    confirm_action: &'static str,
    confirm_label: String,
    csrf: String,
    /// The confirmation's fields: the plan, as the confirm executes it.
    fields: Vec<(String, String)>,
    back_link: String,
    back_label: String,
}

/// One consumer of a plan.
struct PlanRow {
    id: String,
    lease: String,
    from: String,
    to: String,
    outcome: String,
}

/// A plan's confirmation: the form's action, its button, its fields.
type Confirm = (&'static str, String, Vec<(String, String)>);

/// What a plan page shows, beside the chrome.
struct Plan {
    heading: String,
    executed: bool,
    plan: String,
    notes: Vec<String>,
    rows: Vec<PlanRow>,
    /// The confirmation (its action, its button, its fields), when there
    /// is something to confirm.
    confirm: Option<Confirm>,
    back: (String, String),
}

/// Constant-time equality of two tokens.
fn same_token(a: &str, b: &str) -> bool {
    a.len() == b.len() && a.bytes().zip(b.bytes()).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// The reason history keeps: the operator's words (printable, at most 512
/// characters), or `default` naming the console.
fn reason_of(reason: &str, default: &str) -> String {
    match reason.trim() {
        "" => default.to_owned(),
        text => text.chars().filter(|c| !c.is_control()).take(512).collect(),
    }
}

fn consumer_link(key: &ConsumerKey) -> String {
    link(
        "/consumer",
        &[
            ("table", key.table.as_str()),
            ("branch", key.branch.as_str()),
            ("id", key.consumer_id.as_str()),
        ],
    )
}

fn table_link(table: &TableName, branch: &BranchName) -> String {
    link("/table", &[("name", table.as_str()), ("branch", branch.as_str())])
}

/// A refusal that means the consumer is no longer as the plan saw it.
fn changed_since_plan(why: &CoreError) -> bool {
    matches!(
        why,
        CoreError::LeaseMismatch { .. } | CoreError::LeaseHeld { .. } | CoreError::NextSnapshotMismatch { .. }
    )
}

impl Console {
    /// The caller of a form post, when it may act: signed in (or a token)
    /// with the operator role, the post from the console's own origin with
    /// this caller's CSRF token. Otherwise the answer that refuses it
    /// (nothing changes).
    async fn acting(&self, headers: &HeaderMap, csrf: &str) -> Result<Viewer, Box<Response>> {
        let viewer = self.viewer(headers).await?;
        let forbidden =
            |why: &str| Box::new(self.error_page(&viewer, StatusCode::FORBIDDEN, "Refused", why.to_owned()));
        if !same_origin(headers) {
            return Err(forbidden(
                "the form was not posted from this console (its Origin is another site's)",
            ));
        }
        if !same_token(csrf, &viewer.csrf_token(&self.csrf_key)) {
            return Err(forbidden(
                "the form's CSRF token is missing or not this session's: reload the page",
            ));
        }
        if !viewer.operator {
            return Err(forbidden("only the operator role may change consumers"));
        }
        Ok(viewer)
    }

    /// [`Console::acting`] on one consumer, its table in the caller's scope.
    async fn acting_on(
        &self,
        headers: &HeaderMap,
        csrf: &str,
        (table, branch, id): (&str, &str, &str),
    ) -> Result<(Viewer, ConsumerKey), Box<Response>> {
        let viewer = self.acting(headers, csrf).await?;
        let key = ConsumerKey::parse(table, branch, id, "")
            .map_err(|v| v.into_iter().next().expect("a refused key names a field"))
            .map_err(|e| Box::new(self.bad_request(&viewer, &e.field, &e.description)))?;
        if !viewer.sees(&key.table) {
            return Err(Box::new(self.not_in_scope(&viewer, key.table.as_str())));
        }
        Ok((viewer, key))
    }

    fn plan_page(&self, viewer: &Viewer, key: (&TableName, &BranchName), plan: Plan) -> Response {
        let chrome = self.chrome(viewer);
        let confirmable = plan.confirm.is_some();
        let (confirm_action, confirm_label, fields) = plan.confirm.unwrap_or(("", String::new(), Vec::new()));
        self.render(PlanPage {
            principal: chrome.principal,
            signed_in: chrome.signed_in,
            refresh_seconds: 0,
            heading: plan.heading,
            table: key.0.as_str().to_owned(),
            branch: key.1.as_str().to_owned(),
            executed: plan.executed,
            plan: plan.plan,
            notes: plan.notes,
            rows: plan.rows,
            confirmable,
            confirm_action,
            confirm_label,
            csrf: viewer.csrf_token(&self.csrf_key),
            fields,
            back_link: plan.back.0,
            back_label: plan.back.1,
        })
    }

    /// The confirmation of a plan the consumer no longer matches: 409,
    /// nothing changed.
    fn conflict(&self, viewer: &Viewer, nothing: &str, why: &CoreError) -> Response {
        self.error_page(
            viewer,
            StatusCode::CONFLICT,
            "The consumer changed since the plan",
            format!("{nothing}: {why}. Plan again to see where it is now."),
        )
    }
}

/// A planned lease as a confirm form carries it: its id, or empty when
/// none was live.
fn planned_lease(text: &str) -> Result<Option<uuid::Uuid>, ()> {
    match text.trim() {
        "" => Ok(None),
        id => uuid::Uuid::try_parse(id).map(Some).map_err(|_| ()),
    }
}
