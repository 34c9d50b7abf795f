//! Resetting and deleting one consumer from its page. The plan is the
//! store's own (the same the CLI prints); the confirmation executes it
//! with the planned position and the planned lease as preconditions.

use axum::extract::{Form, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Redirect, Response};
use serde::Deserialize;
use tidemark_core::admin::{AdminChange, Force};
use tidemark_core::{ConsumerKey, CoreError};
use tidemark_service::store::{Planned, StoreError};

use super::{Plan, changed_since_plan, consumer_link, planned_lease, reason_of, table_link};
use crate::Console;
use crate::session::Viewer;

/// Which change a form asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Reset,
    Delete,
}

impl Kind {
    fn verb(self) -> &'static str {
        match self {
            Kind::Reset => "reset",
            Kind::Delete => "delete",
        }
    }
}

/// The reset and delete forms, as planned and as confirmed.
#[derive(Debug, Deserialize)]
pub(crate) struct ChangeForm {
    table: String,
    #[serde(default)]
    branch: String,
    id: String,
    #[serde(default)]
    reason: String,
    #[serde(default)]
    csrf: String,
    /// The new position (reset only).
    #[serde(default)]
    next_snapshot: String,
    /// "on": revoke a live lease to make the change (its query is fenced).
    #[serde(default)]
    force: Option<String>,
    /// The position the plan saw (confirm only).
    #[serde(default)]
    expected_next_snapshot: String,
    /// The lease the plan saw live, empty for none (confirm only).
    #[serde(default)]
    expected_lease_id: String,
}

impl ChangeForm {
    fn key(&self) -> (&str, &str, &str) {
        (&self.table, &self.branch, &self.id)
    }

    fn forced(&self) -> bool {
        self.force.as_deref().is_some_and(|f| !f.is_empty())
    }
}

/// What the change does to the lease, in words.
fn lease_words(change: &AdminChange) -> String {
    match &change.revoked {
        Some(l) => format!(
            ", revoking the live lease of {} (epoch {}, lease {}): its query is fenced — its next call fails with \
             LEASE_NOT_HELD — and the key's epoch would become {}",
            l.holder, l.epoch, l.lease_id, change.epoch
        ),
        None => String::new(),
    }
}

impl Console {
    /// The form's key, its caller allowed to act, and the call context
    /// that carries the reason to history.
    async fn changing(
        &self,
        headers: &HeaderMap,
        form: &ChangeForm,
        kind: Kind,
    ) -> Result<(Viewer, ConsumerKey, tidemark_service::store::CallContext), Box<Response>> {
        let (viewer, key) = self.acting_on(headers, &form.csrf, form.key()).await?;
        let mut ctx = viewer.call_context();
        ctx.reason = Some(reason_of(&form.reason, &format!("{}d from the console", kind.verb())));
        Ok((viewer, key, ctx))
    }

    async fn plan_change(&self, headers: HeaderMap, form: ChangeForm, kind: Kind) -> Response {
        let (viewer, key, ctx) = match self.changing(&headers, &form, kind).await {
            Ok(acting) => acting,
            Err(refused) => return *refused,
        };
        let next = match kind {
            Kind::Reset => match form.next_snapshot.trim().parse::<i64>() {
                Ok(n) if n >= 1 => Some(n),
                _ => {
                    return self.bad_request(
                        &viewer,
                        "next_snapshot",
                        &format!("must be a snapshot id >= 1 (got {:?})", form.next_snapshot),
                    );
                }
            },
            Kind::Delete => None,
        };
        let force = Force::from(form.forced());
        let planned = match next {
            Some(n) => self.app.reset_consumer(&ctx, &key, n, None, force, false).await,
            None => self.app.delete_consumer(&ctx, &key, None, force, false).await,
        };
        let change = match planned {
            Ok(Planned { change, .. }) => change,
            Err(StoreError::Rule(why @ CoreError::LeaseHeld { .. })) => {
                return self.error_page(
                    &viewer,
                    StatusCode::CONFLICT,
                    "A query holds this consumer",
                    format!(
                        "Nothing would change: {why}. Tick \"revoke a live lease\" to plan the {} with the lease \
                         revoked (its query is fenced), or revoke it first.",
                        kind.verb()
                    ),
                );
            }
            Err(e) => return self.store_error(&viewer, e),
        };
        let id = key.consumer_id.as_str();
        let reason = ctx.reason.clone().unwrap_or_default();
        let (plan, confirm) = match (change.old_next, kind) {
            (None, _) => (
                format!(
                    "tidemark has no consumer {id} any more (deleted since the page was shown); the console does not \
                     create consumers (the CLI does: tidemark consumers reset … --create)."
                ),
                None,
            ),
            (Some(_), Kind::Reset) if !change.changes_anything() => (
                format!(
                    "{id} is already at next snapshot {}: nothing would change.",
                    next.unwrap_or_default()
                ),
                None,
            ),
            (Some(old), _) => {
                let what = match kind {
                    Kind::Reset => format!(
                        "Resetting would move {id} from next snapshot {old} to {}",
                        next.unwrap_or_default()
                    ),
                    Kind::Delete => format!(
                        "Deleting would remove {id} (at next snapshot {old}); it would stop holding snapshots, and a \
                         query that starts on it again starts from scratch"
                    ),
                };
                let mut fields = vec![
                    ("table".to_owned(), form.table.clone()),
                    ("branch".to_owned(), key.branch.as_str().to_owned()),
                    ("id".to_owned(), form.id.clone()),
                    ("reason".to_owned(), form.reason.clone()),
                    ("expected_next_snapshot".to_owned(), old.to_string()),
                    (
                        "expected_lease_id".to_owned(),
                        change
                            .revoked
                            .as_ref()
                            .map(|l| l.lease_id.to_string())
                            .unwrap_or_default(),
                    ),
                ];
                if let Some(n) = next {
                    fields.push(("next_snapshot".to_owned(), n.to_string()));
                }
                if form.forced() {
                    fields.push(("force".to_owned(), "on".to_owned()));
                }
                let action = match kind {
                    Kind::Reset => "/consumer/reset/confirm",
                    Kind::Delete => "/consumer/delete/confirm",
                };
                (
                    format!("{what}{}. Reason kept in history: \"{reason}\".", lease_words(&change)),
                    Some((action, format!("Confirm: {} exactly as planned", kind.verb()), fields)),
                )
            }
        };
        let heading = match kind {
            Kind::Reset => format!("Reset {id}"),
            Kind::Delete => format!("Delete {id}"),
        };
        let plan = Plan {
            heading,
            executed: false,
            plan,
            notes: Vec::new(),
            rows: Vec::new(),
            confirm,
            back: (consumer_link(&key), id.to_owned()),
        };
        self.plan_page(&viewer, (&key.table, &key.branch), plan)
    }

    async fn confirm_change(&self, headers: HeaderMap, form: ChangeForm, kind: Kind) -> Response {
        let (viewer, key, ctx) = match self.changing(&headers, &form, kind).await {
            Ok(acting) => acting,
            Err(refused) => return *refused,
        };
        let Ok(expected) = form.expected_next_snapshot.trim().parse::<i64>() else {
            return self.bad_request(
                &viewer,
                "expected_next_snapshot",
                "the plan's position is missing: plan again",
            );
        };
        let Ok(lease) = planned_lease(&form.expected_lease_id) else {
            return self.bad_request(&viewer, "expected_lease_id", "not a lease id: plan again");
        };
        let force = Force::as_planned(form.forced(), Some(lease));
        let done = match kind {
            Kind::Reset => {
                let Ok(next) = form.next_snapshot.trim().parse::<i64>() else {
                    return self.bad_request(&viewer, "next_snapshot", "the plan's target is missing: plan again");
                };
                self.app
                    .reset_consumer(&ctx, &key, next, Some(expected), force, true)
                    .await
            }
            Kind::Delete => self.app.delete_consumer(&ctx, &key, Some(expected), force, true).await,
        };
        match done {
            Ok(_) if kind == Kind::Delete => Redirect::to(&table_link(&key.table, &key.branch)).into_response(),
            Ok(_) => Redirect::to(&consumer_link(&key)).into_response(),
            Err(StoreError::Rule(why))
                if changed_since_plan(&why) || matches!(why, CoreError::ConsumerNotFound { .. }) =>
            {
                let nothing = match kind {
                    Kind::Reset => "Nothing was reset",
                    Kind::Delete => "Nothing was deleted",
                };
                self.conflict(&viewer, nothing, &why)
            }
            Err(e) => self.store_error(&viewer, e),
        }
    }
}

/// POST /consumer/reset: the plan of moving the consumer.
pub(crate) async fn plan_reset(
    State(console): State<Console>,
    headers: HeaderMap,
    Form(form): Form<ChangeForm>,
) -> Response {
    console.plan_change(headers, form, Kind::Reset).await
}

/// POST /consumer/reset/confirm: the planned reset, refused if the
/// consumer moved or its lease changed since.
pub(crate) async fn confirm_reset(
    State(console): State<Console>,
    headers: HeaderMap,
    Form(form): Form<ChangeForm>,
) -> Response {
    console.confirm_change(headers, form, Kind::Reset).await
}

/// POST /consumer/delete: the plan of deleting the consumer.
pub(crate) async fn plan_delete(
    State(console): State<Console>,
    headers: HeaderMap,
    Form(form): Form<ChangeForm>,
) -> Response {
    console.plan_change(headers, form, Kind::Delete).await
}

/// POST /consumer/delete/confirm: the planned delete, refused if the
/// consumer moved or its lease changed since.
pub(crate) async fn confirm_delete(
    State(console): State<Console>,
    headers: HeaderMap,
    Form(form): Form<ChangeForm>,
) -> Response {
    console.confirm_change(headers, form, Kind::Delete).await
}
