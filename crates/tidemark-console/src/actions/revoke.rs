//! Acting from the console (issue 55), for the `operator` role only: a
//! change is planned first — the page shows exactly what it would do —
//! then confirmed, and the confirmation executes that plan and nothing
//! else (compare-and-set on the lease the plan saw: a query that took the
//! consumer over since is refused, not fenced). Every form carries a CSRF
//! token and must come from the console's own origin; the principal and
//! the operator's reason go to history. Revoking a lease comes first: it is
//! the runbook's fix for a dead or a hung query.

use askama::Template;
use axum::extract::{Form, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Redirect, Response};
use serde::Deserialize;
use tidemark_core::{ConsumerKey, CoreError};
use tidemark_service::store::StoreError;

use crate::format::link;
use crate::session::Viewer;
use crate::{Console, same_origin};

/// The revoke form, as planned and as confirmed.
#[derive(Debug, Deserialize)]
pub(super) struct RevokeForm {
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

#[derive(Template)]
#[template(path = "console/revoke.html")]
struct RevokePlan {
    principal: String,
    signed_in: bool,
    refresh_seconds: u64,
    table: String,
    branch: String,
    id: String,
    consumer_link: String,
    /// What the plan would do, or why there is nothing to do.
    plan: String,
    /// Whether there is something to confirm.
    confirmable: bool,
    reason: String,
    csrf: String,
    expected_lease_id: String,
}

/// Constant-time equality of two tokens.
fn same_token(a: &str, b: &str) -> bool {
    a.len() == b.len() && a.bytes().zip(b.bytes()).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

impl Console {
    /// The caller of a form post and its key, when it may act: signed in
    /// (or a token) with the operator role, the post from the console's
    /// own origin with this caller's CSRF token, and the table in its
    /// scope. Otherwise the answer that refuses it (nothing changes).
    async fn acting(&self, headers: &HeaderMap, form: &RevokeForm) -> Result<(Viewer, ConsumerKey), Box<Response>> {
        let viewer = self.viewer(headers).await?;
        let forbidden =
            |why: &str| Box::new(self.error_page(&viewer, StatusCode::FORBIDDEN, "Refused", why.to_owned()));
        if !same_origin(headers) {
            return Err(forbidden(
                "the form was not posted from this console (its Origin is another site's)",
            ));
        }
        if !same_token(&form.csrf, &viewer.csrf_token(&self.csrf_key)) {
            return Err(forbidden(
                "the form's CSRF token is missing or not this session's: reload the page",
            ));
        }
        if !viewer.operator {
            return Err(forbidden("only the operator role may change consumers"));
        }
        let key = ConsumerKey::parse(&form.table, &form.branch, &form.id, "")
            .map_err(|v| v.into_iter().next().expect("a refused key names a field"))
            .map_err(|e| Box::new(self.bad_request(&viewer, &e.field, &e.description)))?;
        if !viewer.sees(&key.table) {
            return Err(Box::new(self.not_in_scope(&viewer, key.table.as_str())));
        }
        Ok((viewer, key))
    }

    fn revoke_page(
        &self,
        viewer: &Viewer,
        key: &ConsumerKey,
        form: &RevokeForm,
        plan: String,
        lease: Option<String>,
    ) -> Response {
        let chrome = self.chrome(viewer);
        self.render(RevokePlan {
            principal: chrome.principal,
            signed_in: chrome.signed_in,
            refresh_seconds: 0,
            table: key.table.as_str().to_owned(),
            branch: key.branch.as_str().to_owned(),
            id: key.consumer_id.as_str().to_owned(),
            consumer_link: consumer_link(key),
            plan,
            confirmable: lease.is_some(),
            reason: form.reason.clone(),
            csrf: viewer.csrf_token(&self.csrf_key),
            expected_lease_id: lease.unwrap_or_default(),
        })
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

/// The reason history keeps: the operator's words, or a default naming
/// the console.
fn reason_of(form: &RevokeForm) -> String {
    match form.reason.trim() {
        "" => "revoked from the console".to_owned(),
        text => text.chars().take(512).filter(|c| !c.is_control()).collect(),
    }
}

/// POST /consumer/revoke: the plan of revoking the consumer's live lease.
pub(super) async fn plan_revoke(
    State(console): State<Console>,
    headers: HeaderMap,
    Form(form): Form<RevokeForm>,
) -> Response {
    let (viewer, key) = match console.acting(&headers, &form).await {
        Ok(acting) => acting,
        Err(refused) => return *refused,
    };
    let ctx = viewer.call_context();
    let planned = match console
        .app
        .revoke_lease(&ctx, &key, &reason_of(&form), None, false)
        .await
    {
        Ok(planned) => planned,
        Err(e) => return console.store_error(&viewer, e),
    };
    let (plan, lease) = match &planned.change.lease {
        Some(l) => (
            format!(
                "Revoking would end the lease of {} (epoch {}, lease {}): its query is fenced — its next call fails \
                 with LEASE_NOT_HELD — and the key's epoch would become {}. Reason kept in history: \"{}\".",
                l.holder,
                l.epoch,
                l.lease_id,
                planned.change.epoch,
                reason_of(&form)
            ),
            Some(l.lease_id.to_string()),
        ),
        None => ("No live lease to revoke: nothing would change.".to_owned(), None),
    };
    console.revoke_page(&viewer, &key, &form, plan, lease)
}

/// POST /consumer/revoke/confirm: executes exactly the plan — the lease it
/// showed, or nothing.
pub(super) async fn confirm_revoke(
    State(console): State<Console>,
    headers: HeaderMap,
    Form(form): Form<RevokeForm>,
) -> Response {
    let (viewer, key) = match console.acting(&headers, &form).await {
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
        .revoke_lease(&ctx, &key, &reason_of(&form), Some(Some(expected)), true)
        .await
    {
        Ok(_) => Redirect::to(&consumer_link(&key)).into_response(),
        Err(StoreError::Rule(why @ CoreError::LeaseMismatch { .. })) => console.error_page(
            &viewer,
            StatusCode::CONFLICT,
            "The consumer changed since the plan",
            format!("Nothing was revoked: {why}."),
        ),
        Err(e) => console.store_error(&viewer, e),
    }
}
