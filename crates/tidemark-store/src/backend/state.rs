//! Backups and moves between clusters (SPEC §11 A7): a state export read
//! from one snapshot, page by page, and the keys an import creates.

use async_trait::async_trait;
use tidemark_core::{ConsumerKey, HistoryEvent, KeyState, TableName, TableOptions, Timestamp};

use super::{CallContext, RegisteredTable};
use crate::error::StoreError;

/// One part of a state export (SPEC §11 A7), in the order it is sent.
#[derive(Debug, Clone)]
pub enum ExportPart {
    /// First: the database clock at the snapshot, the tables' options and
    /// the registrations.
    Head {
        /// The database clock at the snapshot.
        now: Timestamp,
        /// Tables with options set, by name.
        options: Vec<(TableName, TableOptions)>,
        /// Registered tables, by name.
        registrations: Vec<RegisteredTable>,
    },
    /// Then every key row, in key order, a page at a time.
    Keys(Vec<KeyState>),
}

/// Sends one page of an export's keys; the key the next page starts after,
/// or `None` when this page was the last (or nobody listens any more).
pub(crate) async fn send_key_page(
    out: &tokio::sync::mpsc::Sender<ExportPart>,
    keys: Vec<KeyState>,
    page: i64,
) -> Option<ConsumerKey> {
    let last_page = i64::try_from(keys.len()).unwrap_or(0) < page;
    let after = keys.last().map(|s| s.key.clone());
    if !keys.is_empty() && out.send(ExportPart::Keys(keys)).await.is_err() {
        return None;
    }
    if last_page { None } else { after }
}

/// Backups and moves between clusters (SPEC §11 A7).
#[async_trait]
pub trait StateStore: Send + Sync + 'static {
    /// Sends everything tidemark holds of `table` (or of every table) to
    /// `out`, from one consistent snapshot: the head, then every key row
    /// (every key ever used: its epoch high-water mark matters even without
    /// a consumer) `page` rows at a time. Ends early, without error, when
    /// `out` is closed.
    async fn export_state(
        &self,
        table: Option<&TableName>,
        page: i64,
        out: tokio::sync::mpsc::Sender<ExportPart>,
    ) -> Result<(), StoreError>;

    /// Creates the rows of keys that have none, each with its one history
    /// row, in one transaction; the states are written as they are (their
    /// times are the export's, not restamped). Says which were created: a
    /// key that has a row by now is left alone (decide it again).
    async fn insert_new_keys(
        &self,
        rows: &[(KeyState, HistoryEvent)],
        ctx: &CallContext,
    ) -> Result<Vec<bool>, StoreError>;
}
