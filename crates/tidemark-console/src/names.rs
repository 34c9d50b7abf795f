//! A page naming a table tidemark has never seen (issue 55).

use axum::http::StatusCode;
use axum::response::Response;
use tidemark_core::TableName;

use crate::Console;
use crate::session::Viewer;

impl Console {
    /// A 404 naming the table most likely meant when tidemark has never
    /// seen `table` (issue 55: a typo must not read as "nothing holds this
    /// branch"); `None` when it has. Asked only of pages that found
    /// nothing, so a page that shows something costs no extra read.
    pub(super) async fn unknown_table(&self, viewer: &Viewer, table: &TableName) -> Option<Response> {
        let seen = self.app.table_seen(&viewer.call_context(), table).await;
        if seen.known {
            return None;
        }
        let mut message = format!("tidemark has never seen table {}", table.as_str());
        if !seen.did_you_mean.is_empty() {
            message.push_str(&format!("; did you mean {}?", seen.did_you_mean));
        }
        Some(self.error_page(viewer, StatusCode::NOT_FOUND, "No such table", message))
    }
}
