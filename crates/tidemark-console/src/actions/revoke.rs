//! Revoking a consumer's lease from its page: the runbook's fix for a dead
//! or a hung query.

use axum::extract::{Form, State};
use axum::http::HeaderMap;
use axum::response::{IntoResponse, Redirect, Response};
use serde::Deserialize;
use tidemark_service::store::StoreError;

use super::{Plan, changed_since_plan, consumer_link, reason_of};
use crate::Console;

/// The revoke form, as planned and as confirmed.
#[derive(Debug, Deserialize)]
pub(crate) struct RevokeForm {
    table: String,
    #[serde(default)]
    branch: String,
    id: String,
    #[serde(default)]
    reason: String,
    #[serde(default)]
    csrf: String,
    /// The lease the plan showed (confirm only).
    #[serde(default)]
    expected_lease_id: Option<String>,
}

impl RevokeForm {
    fn key(&self) -> (&str, &str, &str) {
        (&self.table, &self.branch, &self.id)
    }

    fn reason(&self) -> String {
        reason_of(&self.reason, "revoked from the console")
    }
}

/// POST /consumer/revoke: the plan of revoking the consumer's live lease.
pub(crate) async fn plan_revoke(
    State(console): State<Console>,
    headers: HeaderMap,
    Form(form): Form<RevokeForm>,
) -> Response {
    let (viewer, key) = match console.acting_on(&headers, &form.csrf, form.key()).await {
        Ok(acting) => acting,
        Err(refused) => return *refused,
    };
    let ctx = viewer.call_context();
    let planned = match console.app.revoke_lease(&ctx, &key, &form.reason(), None, false).await {
        Ok(planned) => planned,
        Err(e) => return console.store_error(&viewer, e),
    };
    let (plan, confirm) = match &planned.change.lease {
        Some(l) => (
            format!(
                "Revoking would end the lease of {} (epoch {}, lease {}): its query is fenced — its next call fails \
                 with LEASE_NOT_HELD — and the key's epoch would become {}. Reason kept in history: \"{}\".",
                l.holder,
                l.epoch,
                l.lease_id,
                planned.change.epoch,
                form.reason()
            ),
            Some((
                "/consumer/revoke/confirm",
                "Confirm: revoke exactly this lease".to_owned(),
                vec![
                    ("table".to_owned(), form.table.clone()),
                    ("branch".to_owned(), key.branch.as_str().to_owned()),
                    ("id".to_owned(), form.id.clone()),
                    ("reason".to_owned(), form.reason.clone()),
                    ("expected_lease_id".to_owned(), l.lease_id.to_string()),
                ],
            )),
        ),
        None => ("No live lease to revoke: nothing would change.".to_owned(), None),
    };
    let plan = Plan {
        heading: format!("Revoke the lease of {}", key.consumer_id.as_str()),
        executed: false,
        plan,
        notes: Vec::new(),
        rows: Vec::new(),
        confirm,
        back: (consumer_link(&key), key.consumer_id.as_str().to_owned()),
    };
    console.plan_page(&viewer, (&key.table, &key.branch), plan)
}

/// POST /consumer/revoke/confirm: executes exactly the plan — the lease it
/// showed, or nothing.
pub(crate) async fn confirm_revoke(
    State(console): State<Console>,
    headers: HeaderMap,
    Form(form): Form<RevokeForm>,
) -> Response {
    let (viewer, key) = match console.acting_on(&headers, &form.csrf, form.key()).await {
        Ok(acting) => acting,
        Err(refused) => return *refused,
    };
    let expected = match form.expected_lease_id.as_deref().map(uuid::Uuid::try_parse) {
        Some(Ok(lease)) => lease,
        _ => {
            return console.bad_request(
                &viewer,
                "expected_lease_id",
                "the plan's lease id is missing: plan again",
            );
        }
    };
    let ctx = viewer.call_context();
    match console
        .app
        .revoke_lease(&ctx, &key, &form.reason(), Some(Some(expected)), true)
        .await
    {
        Ok(_) => Redirect::to(&consumer_link(&key)).into_response(),
        Err(StoreError::Rule(why)) if changed_since_plan(&why) => {
            console.conflict(&viewer, "Nothing was revoked", &why)
        }
        Err(e) => console.store_error(&viewer, e),
    }
}
