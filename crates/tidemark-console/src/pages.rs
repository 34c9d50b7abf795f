//! The console's pages: what each shows, built from the application layer
//! ([`tidemark_service::App`]) the gRPC handlers use, and rendered by the
//! templates under `templates/console/` (which escape every value).

use askama::Template;
use axum::extract::{Query, State};
use axum::response::Response;
use http::{HeaderMap, StatusCode};
use serde::Deserialize;
use tidemark_core::TablePattern;
use tidemark_service::store::{FenceReport, MirrorState, RegisteredTable, StoreError};
use tidemark_service::{ConsumerRow, OVERVIEW_BRANCH_LIMIT};

use super::Console;
use super::format::{link, span};

/// Most consumers one table page reads.
pub(super) const TABLE_PAGE_LIMIT: usize = 2_000;

pub(super) const DASH: &str = "—";

pub(super) fn or_dash<T: ToString>(value: Option<T>) -> String {
    value.map_or_else(|| DASH.to_owned(), |v| v.to_string())
}

#[derive(Template)]
#[template(path = "console/tables.html")]
struct TablesPage {
    principal: String,
    signed_in: bool,
    refresh_seconds: u64,
    rows: Vec<TableRow>,
    truncated: bool,
    limit: usize,
}

struct TableRow {
    table: String,
    branch: String,
    registered: String,
    consumers: usize,
    leased: usize,
    expired: usize,
    lag: String,
    waited: String,
    fence: String,
    holders: String,
    table_link: String,
    fence_link: String,
}

pub(super) async fn tables(State(console): State<Console>, headers: HeaderMap) -> Response {
    let viewer = match console.viewer(&headers).await {
        Ok(v) => v,
        Err(refused) => return *refused,
    };
    // Viewers with the same scope share one read per refresh interval.
    let scope = viewer.scope.to_string();
    let read = console
        .overviews
        .get(scope, || console.app.overview(&viewer.scope))
        .await;
    let overview = match read {
        Ok(o) => o,
        Err(e) => return console.store_error(&viewer, e),
    };
    let rows = overview
        .branches
        .iter()
        .map(|b| {
            let (table, branch) = (b.table.as_str(), b.branch.as_str());
            let fence = b.fence.as_ref();
            let holders: Vec<String> = fence
                .map(|f| {
                    f.snapshot_holders
                        .iter()
                        .map(|h| h.view.state.key.consumer_id.as_str().to_owned())
                        .collect()
                })
                .unwrap_or_default();
            TableRow {
                table: table.to_owned(),
                branch: branch.to_owned(),
                registered: b
                    .registration
                    .as_ref()
                    .map_or_else(|| "no".to_owned(), |r| r.location.clone()),
                consumers: b.consumers,
                leased: b.leased,
                expired: b.expired,
                lag: or_dash(b.worst_lag_snapshots),
                waited: b.worst_lag_time.map_or_else(|| DASH.to_owned(), span),
                fence: or_dash(fence.and_then(|f| f.fences.snapshot)),
                holders: if holders.is_empty() {
                    DASH.to_owned()
                } else {
                    holders.join(", ")
                },
                table_link: link("/table", &[("name", table), ("branch", branch)]),
                fence_link: link("/fence", &[("table", table), ("branch", branch)]),
            }
        })
        .collect();
    let chrome = console.chrome(&viewer);
    console.render(TablesPage {
        principal: chrome.principal,
        signed_in: chrome.signed_in,
        refresh_seconds: chrome.refresh_seconds,
        rows,
        truncated: overview.truncated,
        limit: OVERVIEW_BRANCH_LIMIT as usize,
    })
}

/// What a table page reads, shared by its viewers for one refresh.
#[derive(Debug)]
pub(crate) struct TableData {
    rows: Vec<ConsumerRow>,
    truncated: bool,
    fence: FenceReport,
    registration: Option<RegisteredTable>,
}

#[derive(Debug, Deserialize)]
pub(super) struct TableQuery {
    name: String,
    #[serde(default)]
    branch: String,
    #[serde(default)]
    q: String,
    #[serde(default)]
    sort: String,
    #[serde(default)]
    desc: String,
}

#[derive(Template)]
#[template(path = "console/table.html")]
struct TablePage {
    principal: String,
    signed_in: bool,
    refresh_seconds: u64,
    table: String,
    branch: String,
    location: String,
    fence: String,
    fence_link: String,
    pattern: String,
    sort: String,
    desc: bool,
    headers: Vec<SortHeader>,
    rows: Vec<ConsumerLine>,
    shown: usize,
    total: usize,
    truncated: bool,
    limit: usize,
    /// Operators only: the bulk reset form's CSRF token (empty: no form).
    csrf: String,
}

struct SortHeader {
    key: &'static str,
    label: &'static str,
    class: &'static str,
    link: String,
    arrow: &'static str,
}

struct ConsumerLine {
    id: String,
    class: &'static str,
    link: String,
    position: String,
    lag: String,
    waited: String,
    idle: String,
    lease_left: String,
    holder: String,
    epoch: String,
    mirror: String,
}

/// The sortable columns: key, label, whether numbers.
const SORTS: [(&str, &str, bool); 6] = [
    ("id", "Consumer", false),
    ("position", "Next snapshot", true),
    ("lag", "Lag", true),
    ("waited", "Oldest wait", true),
    ("idle", "Idle", true),
    ("lease", "Lease left", true),
];

/// A consumer id filter: a glob, or (without `*` or `?`) a part of the id.
fn id_filter(pattern: &str) -> Option<TablePattern> {
    let pattern = pattern.trim();
    if pattern.is_empty() {
        return None;
    }
    let glob = if pattern.contains(['*', '?']) {
        pattern.to_owned()
    } else {
        format!("*{pattern}*")
    };
    TablePattern::parse(&glob).ok()
}

fn sort_value(row: &ConsumerRow, key: &str) -> (Option<u128>, String) {
    let c = &row.consumer;
    let view = &c.view;
    let number = match key {
        "position" => view.state.next_snapshot().map(|n| n as u128),
        "lag" => c.lag_snapshots().map(|n| n as u128),
        "waited" => c.lag.as_ref().and_then(|l| l.waited).map(|d| d.as_millis()),
        "idle" => view.liveness.as_ref().map(|l| l.idle.as_millis()),
        "lease" => view
            .state
            .live_lease(view.now)
            .map(|l| view.now.until(l.deadline).as_millis()),
        _ => None,
    };
    (number, view.state.key.consumer_id.as_str().to_owned())
}

fn mirror_text(state: Option<&MirrorState>, next: Option<i64>, registered: bool) -> String {
    let Some(m) = state else {
        return if registered {
            "not written yet".to_owned()
        } else {
            "not registered".to_owned()
        };
    };
    if m.failures > 0 {
        return format!(
            "failing ({} in a row): {}",
            m.failures,
            m.last_error.as_deref().unwrap_or_default()
        );
    }
    match (m.mirrored_next, next) {
        (None, _) => "deleted".to_owned(),
        (Some(file), Some(want)) if file == want => format!("in sync ({file})"),
        (Some(file), Some(want)) => format!("behind: file {file}, position {want}"),
        (Some(file), None) => format!("file {file}"),
    }
}

pub(super) async fn table(
    State(console): State<Console>,
    headers: HeaderMap,
    Query(query): Query<TableQuery>,
) -> Response {
    let asked = super::table_and_branch(&query.name, "name", &query.branch);
    let (viewer, (table, branch)) = match console.viewing(&headers, asked, |(table, _)| table).await {
        Ok(viewing) => viewing,
        Err(refused) => return *refused,
    };
    // Viewers of the same table page share one read per refresh interval
    // (the viewer's scope was checked above; the page is the same for all).
    let key = (table.as_str().to_owned(), branch.as_str().to_owned());
    let read = console
        .table_pages
        .get(key, || async {
            let found = console.app.branch_consumers(&table, &branch, TABLE_PAGE_LIMIT).await?;
            let fence = console.app.fence(&table, &branch, false, 1).await?;
            let (rows, truncated, registration) = (found.rows, found.truncated, found.registration);
            Ok::<_, StoreError>(TableData {
                rows,
                truncated,
                fence,
                registration,
            })
        })
        .await;
    let data = match read {
        Ok(data) => data,
        Err(e) => return console.store_error(&viewer, e),
    };
    let (mut rows, truncated, fence, registration) = (
        data.rows.clone(),
        data.truncated,
        data.fence.clone(),
        data.registration.clone(),
    );
    if rows.is_empty()
        && registration.is_none()
        && let Some(unknown) = console.unknown_table(&viewer, &table).await
    {
        return unknown;
    }
    let total = rows.len();
    if let Some(filter) = id_filter(&query.q) {
        rows.retain(|r| filter.matches(r.consumer.view.state.key.consumer_id.as_str()));
    }
    // Most lagging first unless a column is asked for: the page answers
    // "who is behind" first (issue 55).
    let (sort, desc) = match SORTS.iter().find(|(k, _, _)| *k == query.sort) {
        Some((key, _, _)) => (*key, query.desc == "1"),
        None => ("lag", true),
    };
    rows.sort_by(|a, b| {
        let (a, b) = (sort_value(a, sort), sort_value(b, sort));
        // Unknown values last, whichever the direction.
        let ordered = match (a.0, b.0) {
            (Some(x), Some(y)) if desc => y.cmp(&x),
            (Some(x), Some(y)) => x.cmp(&y),
            (Some(_), None) => std::cmp::Ordering::Less,
            (None, Some(_)) => std::cmp::Ordering::Greater,
            (None, None) if desc && sort == "id" => b.1.cmp(&a.1),
            (None, None) => std::cmp::Ordering::Equal,
        };
        ordered.then_with(|| a.1.cmp(&b.1))
    });
    let (name, branch_name) = (table.as_str(), branch.as_str());
    let headers = SORTS
        .iter()
        .map(|(key, label, numeric)| {
            let next_desc = if *key == sort { !desc } else { *numeric };
            SortHeader {
                key,
                label,
                class: if *numeric { "n" } else { "" },
                link: link(
                    "/table",
                    &[
                        ("name", name),
                        ("branch", branch_name),
                        ("q", &query.q),
                        ("sort", key),
                        ("desc", if next_desc { "1" } else { "" }),
                    ],
                ),
                arrow: match (*key == sort, desc) {
                    (true, true) => " ▼",
                    (true, false) => " ▲",
                    _ => "",
                },
            }
        })
        .collect();
    let lines = rows
        .iter()
        .map(|r| {
            let view = &r.consumer.view;
            let key = &view.state.key;
            let live = view.state.live_lease(view.now);
            let expired = view.liveness.as_ref().is_some_and(|l| l.expired);
            ConsumerLine {
                id: key.consumer_id.as_str().to_owned(),
                class: if expired {
                    "expired"
                } else if live.is_some() {
                    "leased"
                } else {
                    ""
                },
                link: link(
                    "/consumer",
                    &[
                        ("table", name),
                        ("branch", branch_name),
                        ("id", key.consumer_id.as_str()),
                    ],
                ),
                position: or_dash(view.state.next_snapshot()),
                lag: or_dash(r.consumer.lag_snapshots()),
                waited: r
                    .consumer
                    .lag
                    .as_ref()
                    .and_then(|l| l.waited)
                    .map_or_else(|| DASH.to_owned(), span),
                idle: match &view.liveness {
                    Some(l) if l.expired => format!("{} (expired)", span(l.idle)),
                    Some(l) => span(l.idle),
                    None => DASH.to_owned(),
                },
                lease_left: live.map_or_else(|| DASH.to_owned(), |l| span(view.now.until(l.deadline))),
                holder: live.map_or_else(|| DASH.to_owned(), |l| l.holder.clone()),
                epoch: live.map_or_else(|| DASH.to_owned(), |l| l.epoch.to_string()),
                mirror: mirror_text(r.mirror.as_ref(), view.state.next_snapshot(), registration.is_some()),
            }
        })
        .collect::<Vec<_>>();
    let chrome = console.chrome(&viewer);
    console.render(TablePage {
        principal: chrome.principal,
        signed_in: chrome.signed_in,
        refresh_seconds: chrome.refresh_seconds,
        table: name.to_owned(),
        branch: branch_name.to_owned(),
        location: registration.map(|r| r.location).unwrap_or_default(),
        fence: fence.fences.snapshot.map_or_else(
            || "none (nothing holds snapshots)".to_owned(),
            |s| format!("snapshot {s}"),
        ),
        fence_link: link("/fence", &[("table", name), ("branch", branch_name)]),
        pattern: query.q.clone(),
        sort: sort.to_owned(),
        desc,
        headers,
        shown: lines.len(),
        rows: lines,
        total,
        truncated,
        limit: TABLE_PAGE_LIMIT,
        csrf: if viewer.operator {
            viewer.csrf_token(&console.csrf_key)
        } else {
            String::new()
        },
    })
}

/// A page's frame: who is signed in, and the refresh interval.
pub(super) struct Chrome {
    pub(super) principal: String,
    pub(super) signed_in: bool,
    pub(super) refresh_seconds: u64,
}

#[derive(Template)]
#[template(path = "console/error.html")]
pub(super) struct ErrorPage {
    pub(super) principal: String,
    pub(super) signed_in: bool,
    pub(super) refresh_seconds: u64,
    pub(super) heading: String,
    pub(super) message: String,
}

#[derive(Template)]
#[template(path = "console/signin.html")]
pub(super) struct SignInPage {
    pub(super) message: String,
    pub(super) session_hours: u64,
}

/// The status of an error page.
pub(super) fn error_status(code: i32) -> StatusCode {
    // google.rpc.Code numbers.
    match code {
        3 => StatusCode::BAD_REQUEST,          // INVALID_ARGUMENT
        5 => StatusCode::NOT_FOUND,            // NOT_FOUND
        7 => StatusCode::FORBIDDEN,            // PERMISSION_DENIED
        14 => StatusCode::SERVICE_UNAVAILABLE, // UNAVAILABLE
        4 => StatusCode::GATEWAY_TIMEOUT,      // DEADLINE_EXCEEDED
        _ => StatusCode::INTERNAL_SERVER_ERROR,
    }
}
