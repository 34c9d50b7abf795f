//! One consumer's page: its state, lease, lag and mirror file, its history
//! page by page, and the commands that would change it.

use askama::Template;
use axum::extract::{Query, State};
use axum::response::Response;
use http::HeaderMap;
use serde::Deserialize;
use tidemark_core::ConsumerKey;
use tidemark_service::store::HistoryFilter;

use super::Console;
use super::chart::{LagChart, lag_chart};
use super::format::{self, Commands, link, span};
use super::pages::{DASH, or_dash};

/// History rows per page.
const HISTORY_PAGE: i64 = 50;
/// History rows the lag chart is drawn from (read with the first page, in
/// the same call).
const CHART_ROWS: i64 = 500;

#[derive(Debug, Deserialize)]
pub(super) struct ConsumerQuery {
    table: String,
    #[serde(default)]
    branch: String,
    id: String,
    before: Option<i64>,
}

#[derive(Template)]
#[template(path = "console/consumer.html")]
struct ConsumerPage {
    principal: String,
    signed_in: bool,
    refresh_seconds: u64,
    table: String,
    branch: String,
    id: String,
    table_link: String,
    facts: Vec<(String, String)>,
    commands: Commands,
    history: Vec<HistoryLine>,
    newer_link: String,
    older_link: String,
    /// Operators only: the revoke form (when a lease is live) and its
    /// CSRF token. Viewers see no action.
    can_revoke: bool,
    /// Operators only: the reset and delete forms.
    can_act: bool,
    csrf: String,
    chart: LagChart,
}

struct HistoryLine {
    id: i64,
    at: String,
    event: &'static str,
    old: String,
    new: String,
    epoch: String,
    holder: String,
    principal: String,
    detail: String,
}

pub(super) async fn consumer(
    State(console): State<Console>,
    headers: HeaderMap,
    Query(query): Query<ConsumerQuery>,
) -> Response {
    // The first thing wrong with the key is named.
    let asked = ConsumerKey::parse(&query.table, &query.branch, &query.id, "")
        .map_err(|violations| violations.into_iter().next().expect("a refused key names a field"));
    let (viewer, key) = match console.viewing(&headers, asked, |key| &key.table).await {
        Ok(viewing) => viewing,
        Err(refused) => return *refused,
    };
    let described = match console.app.describe(&viewer.call_context(), &key, 1).await {
        Ok(d) => d,
        Err(e) => return console.store_error(&viewer, e),
    };
    // The newest page also draws the chart: one read of its rows.
    let rows = if query.before.is_none() {
        CHART_ROWS
    } else {
        HISTORY_PAGE + 1
    };
    let mut history = match console
        .app
        .list_history(&HistoryFilter::key(&key), query.before, rows)
        .await
    {
        Ok(h) => h,
        Err(e) => return console.store_error(&viewer, e),
    };
    let view = &described.consumer.view;
    let state = &view.state;
    let mut facts: Vec<(String, String)> = Vec::new();
    let mut fact = |name: &str, value: String| facts.push((name.to_owned(), value));
    fact("Next snapshot", or_dash(state.next_snapshot()));
    if let Some(c) = &state.consumer {
        fact("Created", format::instant(c.created_at));
        fact("Updated", format::instant(c.updated_at));
    }
    if let Some(l) = &view.liveness {
        fact("Idle", span(l.idle));
        fact(
            "Expires",
            match (l.expired, l.expires_in) {
                (true, _) => "expired: it no longer holds snapshots".to_owned(),
                (false, Some(left)) => format!("in {}", span(left)),
                (false, None) => "never (no expiration time, or a live lease holds it)".to_owned(),
            },
        );
    }
    if let Some(l) = &state.lease {
        fact("Lease state", l.activity(view.now).to_string());
    }
    match state.live_lease(view.now) {
        Some(l) => {
            fact("Lease holder", l.holder.clone());
            // As the server saw the call: behind a proxy, the proxy's.
            fact("Lease caller", l.caller.peer.clone().unwrap_or_else(|| DASH.to_owned()));
            fact(
                "Lease client",
                l.caller.client.clone().unwrap_or_else(|| DASH.to_owned()),
            );
            fact("Last renewed", format::instant(l.last_renewed()));
            fact(
                "Last commit",
                l.committed_at.map_or_else(|| DASH.to_owned(), format::instant),
            );
            fact("Lease epoch", l.epoch.to_string());
            fact("Lease principal", l.principal.clone());
            fact("Lease acquired", format::instant(l.acquired_at));
            fact("Lease left", span(view.now.until(l.deadline)));
            fact("Full-scan pin", or_dash(l.full_scan_pin));
        }
        None => fact("Lease", "none live".to_owned()),
    }
    fact("Highest epoch", state.epoch.to_string());
    if let Some(lag) = &described.consumer.lag {
        fact("Latest snapshot", lag.latest.to_string());
        fact("Lag (snapshots)", or_dash(lag.snapshots));
        fact("Oldest wait", lag.waited.map_or_else(|| DASH.to_owned(), span));
    } else {
        fact("Lag (snapshots)", or_dash(state.lag()));
    }
    if let Some(m) = &described.mirror {
        fact("Mirror file", m.path.clone());
        let mut file = m.file_state.to_owned();
        if let Some(n) = m.file_next_snapshot {
            file.push_str(&format!(", shows {n}"));
        }
        if !m.file_error.is_empty() {
            file.push_str(&format!(": {}", m.file_error));
        }
        fact("Mirror file state", file);
        fact("Mirror in sync", if m.in_sync { "yes" } else { "no" }.to_owned());
        if m.failures > 0 {
            fact("Mirror failures", format!("{} in a row: {}", m.failures, m.last_error));
        }
    }
    let (table, branch, id) = (key.table.as_str(), key.branch.as_str(), key.consumer_id.as_str());
    let lag_now = match &described.consumer.lag {
        Some(lag) => lag.snapshots,
        None => state.lag(),
    };
    let chart = if query.before.is_none() {
        lag_chart(&history, lag_now.map(|lag| (view.now, lag)))
    } else {
        LagChart::default()
    };
    let more = history.len() as i64 > HISTORY_PAGE;
    history.truncate(HISTORY_PAGE as usize);
    let older = history.last().filter(|_| more).map(|h| h.id.to_string());
    let chrome = console.chrome(&viewer);
    let can_revoke = viewer.operator && state.live_lease(view.now).is_some();
    console.render(ConsumerPage {
        can_revoke,
        can_act: viewer.operator,
        chart,
        csrf: if viewer.operator {
            viewer.csrf_token(&console.csrf_key)
        } else {
            String::new()
        },
        principal: chrome.principal,
        signed_in: chrome.signed_in,
        refresh_seconds: chrome.refresh_seconds,
        table: table.to_owned(),
        branch: branch.to_owned(),
        id: id.to_owned(),
        table_link: link("/table", &[("name", table), ("branch", branch)]),
        commands: format::commands(&key, state.next_snapshot()),
        facts,
        history: history
            .iter()
            .map(|h| HistoryLine {
                id: h.id,
                at: format::instant(h.at),
                event: h.event.kind.as_str(),
                old: or_dash(h.event.old_next),
                new: or_dash(h.event.new_next),
                epoch: or_dash(h.event.epoch),
                holder: h.event.holder.clone().unwrap_or_default(),
                principal: h.principal.clone(),
                detail: h.event.detail.clone().unwrap_or_default(),
            })
            .collect(),
        newer_link: if query.before.is_some() {
            link("/consumer", &[("table", table), ("branch", branch), ("id", id)])
        } else {
            String::new()
        },
        older_link: older.map_or_else(String::new, |before| {
            link(
                "/consumer",
                &[("table", table), ("branch", branch), ("id", id), ("before", &before)],
            )
        }),
    })
}
