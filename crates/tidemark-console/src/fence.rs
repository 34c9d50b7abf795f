//! A branch's fence: a picture of its snapshots with the holders marked,
//! the holders in a table, and "why is snapshot N not expiring?".

use askama::Template;
use axum::extract::{Query, State};
use axum::response::Response;
use http::HeaderMap;
use serde::Deserialize;
use tidemark_service::store::HolderKind;

use super::Console;
use super::format::{link, span};
use super::pages::DASH;
use super::picture::{Picture, picture};

/// Holders the fence page lists and draws.
const FENCE_HOLDERS: i64 = 200;

#[derive(Debug, Deserialize)]
pub(super) struct FenceQuery {
    table: String,
    #[serde(default)]
    branch: String,
    #[serde(default)]
    snapshot: String,
}

#[derive(Template)]
#[template(path = "console/fence.html")]
struct FencePage {
    principal: String,
    signed_in: bool,
    refresh_seconds: u64,
    table: String,
    branch: String,
    table_link: String,
    summary: String,
    range_note: String,
    pic: Picture,
    asked: String,
    answer: String,
    holders: Vec<HolderLine>,
    truncated: bool,
}

struct HolderLine {
    id: String,
    class: &'static str,
    link: String,
    kind: &'static str,
    snapshot: i64,
    holder: String,
    activity: String,
    idle: String,
    expires: String,
}

pub(super) async fn fence(
    State(console): State<Console>,
    headers: HeaderMap,
    Query(query): Query<FenceQuery>,
) -> Response {
    let asked = super::table_and_branch(&query.table, "table", &query.branch);
    let (viewer, (table, branch)) = match console.viewing(&headers, asked, |(table, _)| table).await {
        Ok(viewing) => viewing,
        Err(refused) => return *refused,
    };
    let asked = match query.snapshot.trim() {
        "" => None,
        text => match text.parse::<i64>() {
            Ok(n) if n >= 1 => Some(n),
            _ => return console.bad_request(&viewer, "snapshot", "must be a snapshot id (a whole number >= 1)"),
        },
    };
    let found = match console.app.fence_picture(&table, &branch, FENCE_HOLDERS).await {
        Ok(f) => f,
        Err(e) => return console.store_error(&viewer, e),
    };
    let fences = &found.explanation.fences.fences;
    let holders = &found.explanation.holders;
    if holders.is_empty()
        && fences.snapshot.is_none()
        && let Some(unknown) = console.unknown_table(&viewer, &table).await
    {
        return unknown;
    }
    let summary = match fences.snapshot {
        Some(s) => format!(
            "Snapshots from {s} on are kept: {} holder(s) need them. Snapshots below {s} may be expired by the table's own retention.",
            holders.len()
        ),
        None if fences.changelog_only => {
            "consumer.changelog-only is set: consumers hold changelogs, not snapshots.".to_owned()
        }
        None => "Nothing holds this branch's snapshots: the table's own retention decides.".to_owned(),
    };
    let range_note = match (&found.range, found.range_error.as_str()) {
        (Some(r), _) => format!("The table's directory holds snapshots {} to {}.", r.earliest, r.latest),
        (None, "") => {
            "The table is not registered (or has no snapshot yet): the picture spans its holders only.".to_owned()
        }
        (None, e) => format!("The table's directory cannot be read now: {e}"),
    };
    let answer = asked.map_or_else(String::new, |n| {
        let needing: Vec<&str> = holders
            .iter()
            .filter(|h| h.snapshot <= n)
            .map(|h| h.view.state.key.consumer_id.as_str())
            .collect();
        match fences.snapshot {
            Some(s) if n >= s => format!(
                "Snapshot {n} is at or above the fence ({s}): tidemark asks retention to keep it for {} holder(s) still to read it: {}.",
                needing.len(),
                needing.join(", ")
            ),
            Some(s) => format!(
                "Snapshot {n} is below the fence ({s}): tidemark does not hold it. If it is not expiring, look at the table's own retention (snapshot.num-retained.min, snapshot.time-retained) and tags."
            ),
            None => format!(
                "Nothing on this branch holds snapshot {n}: tidemark does not hold it. If it is not expiring, look at the table's own retention (snapshot.num-retained.min, snapshot.time-retained) and tags."
            ),
        }
    });
    let (name, branch_name) = (table.as_str(), branch.as_str());
    let lines = holders
        .iter()
        .map(|h| {
            let view = &h.view;
            let live = view.state.live_lease(view.now);
            let id = view.state.key.consumer_id.as_str();
            HolderLine {
                id: id.to_owned(),
                class: if live.is_some() { "leased" } else { "" },
                link: link("/consumer", &[("table", name), ("branch", branch_name), ("id", id)]),
                kind: match h.kind {
                    HolderKind::Consumer => "consumer",
                    HolderKind::FullScanPin => "full-scan pin",
                },
                snapshot: h.snapshot,
                holder: live.map_or_else(|| DASH.to_owned(), |l| format!("{} (epoch {})", l.holder, l.epoch)),
                activity: view
                    .state
                    .lease
                    .as_ref()
                    .map_or_else(|| DASH.to_owned(), |l| l.activity(view.now).to_string()),
                idle: view.liveness.map_or_else(|| DASH.to_owned(), |l| span(l.idle)),
                expires: view
                    .liveness
                    .and_then(|l| l.expires_in)
                    .map_or_else(|| DASH.to_owned(), span),
            }
        })
        .collect();
    let chrome = console.chrome(&viewer);
    console.render(FencePage {
        principal: chrome.principal,
        signed_in: chrome.signed_in,
        refresh_seconds: chrome.refresh_seconds,
        table: name.to_owned(),
        branch: branch_name.to_owned(),
        table_link: link("/table", &[("name", name), ("branch", branch_name)]),
        summary,
        range_note,
        pic: picture(fences.snapshot, found.range, holders),
        asked: asked.map(|n| n.to_string()).unwrap_or_default(),
        answer,
        holders: lines,
        truncated: found.explanation.truncated,
    })
}
