//! Did-you-mean for every call that names a table or a consumer (issue
//! 55): a name tidemark has never seen is said to be unknown, with the
//! closest known name (one rule, `tidemark_core::suggest`), instead of
//! reading as "nothing here". Suggestions only name tables the caller may
//! see.

use tidemark_core::suggest::{Suggestion, closest};
use tidemark_core::{ConsumerKey, CoreError, TableName};
use tidemark_store::{CallContext, KeyFilter, StoreError};

use crate::app::App;

/// The most table names read for a suggestion.
const KNOWN_TABLES_READ: i64 = 10_000;
/// The most consumer ids of a branch read for a suggestion.
const KNOWN_CONSUMERS_READ: i64 = 1_000;

impl App {
    /// `None` when tidemark has seen `table` (a key, a registration or
    /// options); otherwise that it has not, with the closest known table
    /// the caller may see.
    pub async fn unknown_table(&self, ctx: &CallContext, table: &TableName) -> Result<Option<Suggestion>, StoreError> {
        if self.store.table_known(table).await? {
            return Ok(None);
        }
        let known = self.store.known_tables(KNOWN_TABLES_READ).await?;
        let visible = known
            .iter()
            .map(String::as_str)
            .filter(|name| TableName::parse(name, "table").is_ok_and(|t| ctx.scope.allows(&t)));
        Ok(Some(Suggestion::UnknownTable {
            asked: table.as_str().to_owned(),
            closest: closest(table.as_str(), visible).map(str::to_owned),
        }))
    }

    /// What a key that was not found most likely meant: its table is
    /// unknown, or a consumer of its branch is spelled nearly the same.
    /// Best effort: `None` when the names cannot be read.
    pub async fn suggest_consumer(&self, ctx: &CallContext, key: &ConsumerKey) -> Option<Suggestion> {
        if let Some(unknown) = self.unknown_table(ctx, &key.table).await.ok()? {
            return Some(unknown);
        }
        let filter = KeyFilter {
            table: Some(key.table.clone()),
            branch: Some(key.branch.clone()),
            consumer_id_prefix: None,
        };
        let page = self
            .store
            .list_consumers(&filter, None, KNOWN_CONSUMERS_READ)
            .await
            .ok()?;
        let ids: Vec<&str> = page
            .consumers
            .iter()
            .map(|c| c.state.key.consumer_id.as_str())
            .collect();
        closest(key.consumer_id.as_str(), ids).map(|id| Suggestion::Consumer(id.to_owned()))
    }

    /// A key's call, with a CONSUMER_NOT_FOUND refusal told what the name
    /// most likely meant.
    pub async fn suggesting<T>(
        &self,
        ctx: &CallContext,
        key: &ConsumerKey,
        result: Result<T, StoreError>,
    ) -> Result<T, StoreError> {
        match result {
            Err(StoreError::Rule(CoreError::ConsumerNotFound { key: missing, .. })) => {
                Err(CoreError::ConsumerNotFound {
                    suggestion: self.suggest_consumer(ctx, key).await,
                    key: missing,
                }
                .into())
            }
            other => other,
        }
    }
}

/// Whether a table is known, as responses carry it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TableSeen {
    /// Whether tidemark has seen it.
    pub known: bool,
    /// When not: the closest known table (empty when none is close).
    pub did_you_mean: String,
}

impl App {
    /// [`Self::unknown_table`] as responses carry it. Best effort: a read
    /// that fails says "known", so an answer never raises a false alarm.
    pub async fn table_seen(&self, ctx: &CallContext, table: &TableName) -> TableSeen {
        match self.unknown_table(ctx, table).await {
            Ok(Some(unknown)) => TableSeen {
                known: false,
                did_you_mean: unknown.name().unwrap_or_default().to_owned(),
            },
            Ok(None) | Err(_) => TableSeen {
                known: true,
                did_you_mean: String::new(),
            },
        }
    }
}

impl App {
    /// What a reset to `next` on a table tidemark cannot check deserves a
    /// word about: an unregistered table's latest snapshot is unknown, but
    /// the highest snapshot any consumer of the branch reported is, and a
    /// position past it + 1 is most likely a typo (issue 55: a reset to
    /// 999999999999 planned without a word).
    pub async fn reset_warnings(
        &self,
        table: &TableName,
        branch: &tidemark_core::BranchName,
        next: i64,
    ) -> Vec<String> {
        if !matches!(self.tables.table(table).await, Ok(None)) {
            return Vec::new(); // registered: checked against its directory
        }
        match self.tables.reported_latest(table, branch.as_str()).await {
            Some(reported) if next > reported.saturating_add(1) => vec![format!(
                "warning: {} is not registered, so tidemark cannot check positions against its snapshots; the \
                 highest snapshot any consumer of {}@{} reported is {reported}, and next snapshot {next} is past \
                 {} (register the table: tidemark tables register)",
                table.as_str(),
                table.as_str(),
                branch.as_str(),
                reported.saturating_add(1)
            )],
            _ => Vec::new(),
        }
    }
}
