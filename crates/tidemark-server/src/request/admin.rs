//! The operator API's requests.

use std::collections::BTreeMap;

use tidemark_core::admin::ConsumerSelector;
use tidemark_core::validate::Violations;
use tidemark_core::{BranchName, ConsumerKey, TableName, TableOptions};
use tidemark_proto::v1 as pb;
use tidemark_service::paimon::PaimonTable;
use tidemark_service::store::{HistoryFilter, KeyFilter, MAX_BATCH, MAX_PAGE, StoreError};

use super::{Parse, Scoped, Touches, checked, fields};

pub(crate) struct ListConsumers {
    pub filter: KeyFilter,
    pub after: Option<ConsumerKey>,
    pub page_size: i64,
}

impl Parse for pb::ListConsumersRequest {
    type Parsed = ListConsumers;
    fn parse(self) -> Result<ListConsumers, StoreError> {
        let mut v = Violations::new();
        let table = fields::optional(&mut v, &self.table, "table", fields::table_name);
        let branch = fields::optional(&mut v, &self.branch, "branch", fields::branch_name);
        if let Err(violation) =
            tidemark_core::ids::check_consumer_id_prefix(&self.consumer_id_prefix, "consumer_id_prefix")
        {
            v.extend(vec![violation]);
        }
        let page_size = fields::page_size(&mut v, self.page_size, 100, MAX_PAGE, "page_size");
        let after = fields::parse_consumer_page_token(&mut v, &self.page_token);
        let parsed = match (table, branch, page_size, after) {
            (Some(table), Some(branch), Some(page_size), Some(after)) => Some(ListConsumers {
                filter: KeyFilter {
                    table,
                    branch,
                    consumer_id_prefix: Some(self.consumer_id_prefix).filter(|p| !p.is_empty()),
                },
                after,
                page_size,
            }),
            _ => None,
        };
        checked(v, parsed)
    }
}

impl Scoped for ListConsumers {
    fn touches(&self) -> Touches<'_> {
        Touches::TableOrAll(self.filter.table.as_ref(), "list consumers")
    }
}

pub(crate) struct DescribeConsumer {
    pub key: ConsumerKey,
    pub history_limit: i64,
}

impl Parse for pb::DescribeConsumerRequest {
    type Parsed = DescribeConsumer;
    fn parse(self) -> Result<DescribeConsumer, StoreError> {
        let mut v = Violations::new();
        let key = fields::consumer_key(&mut v, self.consumer.as_ref(), "consumer");
        let limit = fields::page_size(&mut v, self.history_limit, 20, MAX_PAGE, "history_limit");
        let parsed = key
            .zip(limit)
            .map(|(key, history_limit)| DescribeConsumer { key, history_limit });
        checked(v, parsed)
    }
}

impl Scoped for DescribeConsumer {
    fn touches(&self) -> Touches<'_> {
        Touches::Table(&self.key.table)
    }
}

/// A change to one consumer (reset or delete).
pub(crate) struct ChangeConsumer {
    pub key: ConsumerKey,
    /// The new position (reset only).
    pub next_snapshot: i64,
    pub expected_next_snapshot: Option<i64>,
    pub force: bool,
    pub execute: bool,
}

impl Parse for pb::ResetConsumerRequest {
    type Parsed = ChangeConsumer;
    fn parse(self) -> Result<ChangeConsumer, StoreError> {
        let mut v = Violations::new();
        let key = fields::consumer_key(&mut v, self.consumer.as_ref(), "consumer");
        fields::position(&mut v, self.next_snapshot, "next_snapshot");
        expected_snapshot(&mut v, self.expected_next_snapshot);
        let parsed = key.map(|key| ChangeConsumer {
            key,
            next_snapshot: self.next_snapshot,
            expected_next_snapshot: self.expected_next_snapshot,
            force: self.force,
            execute: self.execute,
        });
        checked(v, parsed)
    }
}

impl Parse for pb::DeleteConsumerRequest {
    type Parsed = ChangeConsumer;
    fn parse(self) -> Result<ChangeConsumer, StoreError> {
        let mut v = Violations::new();
        let key = fields::consumer_key(&mut v, self.consumer.as_ref(), "consumer");
        expected_snapshot(&mut v, self.expected_next_snapshot);
        let parsed = key.map(|key| ChangeConsumer {
            key,
            next_snapshot: 0,
            expected_next_snapshot: self.expected_next_snapshot,
            force: self.force,
            execute: self.execute,
        });
        checked(v, parsed)
    }
}

fn expected_snapshot(v: &mut Violations, expected: Option<i64>) {
    if let Some(expected) = expected
        && expected < 1
    {
        v.add(
            "expected_next_snapshot",
            format!("must be >= 1 when present (got {expected})"),
        );
    }
}

impl Scoped for ChangeConsumer {
    fn touches(&self) -> Touches<'_> {
        Touches::Table(&self.key.table)
    }
}

pub(crate) struct ClearConsumers {
    pub table: TableName,
    pub branch: BranchName,
    pub selector: ConsumerSelector,
    pub force: bool,
    pub execute: bool,
}

impl Parse for pb::ClearConsumersRequest {
    type Parsed = ClearConsumers;
    fn parse(self) -> Result<ClearConsumers, StoreError> {
        let mut v = Violations::new();
        let table = fields::table_name(&mut v, &self.table, "table");
        let branch = fields::branch_name(&mut v, &self.branch, "branch");
        let selector = v.check(ConsumerSelector::parse(&self.including, &self.excluding));
        let parsed = match (table, branch, selector) {
            (Some(table), Some(branch), Some(selector)) => Some(ClearConsumers {
                table,
                branch,
                selector,
                force: self.force,
                execute: self.execute,
            }),
            _ => None,
        };
        checked(v, parsed)
    }
}

impl Scoped for ClearConsumers {
    fn touches(&self) -> Touches<'_> {
        Touches::Table(&self.table)
    }
}

pub(crate) struct ResetConsumers {
    pub table: TableName,
    pub branch: BranchName,
    pub selector: ConsumerSelector,
    pub target: tidemark_core::reset::ResetTarget,
    pub force: bool,
    pub execute: bool,
    pub expected: std::collections::HashMap<String, i64>,
}

impl Parse for pb::ResetConsumersRequest {
    type Parsed = ResetConsumers;
    fn parse(self) -> Result<ResetConsumers, StoreError> {
        use pb::reset_target::Target;
        use tidemark_core::reset::ResetTarget;
        let mut v = Violations::new();
        let table = fields::table_name(&mut v, &self.table, "table");
        let branch = fields::branch_name(&mut v, &self.branch, "branch");
        let selector = v.check(ConsumerSelector::parse(&self.including, &self.excluding));
        let target = match self.target.and_then(|t| t.target) {
            Some(Target::Snapshot(id)) => fields::position(&mut v, id, "target.snapshot").map(ResetTarget::Snapshot),
            Some(Target::Earliest(true)) => Some(ResetTarget::Earliest),
            Some(Target::Latest(true)) => Some(ResetTarget::Latest),
            Some(Target::Earliest(false) | Target::Latest(false)) => {
                v.add("target", "earliest and latest are set with true");
                None
            }
            // Up to the end of year 9999, as RFC 3339 allows.
            Some(Target::Time(t))
                if (0..=253_402_300_799).contains(&t.seconds) && (0..1_000_000_000).contains(&t.nanos) =>
            {
                Some(ResetTarget::Time(t.seconds * 1000 + i64::from(t.nanos) / 1_000_000))
            }
            Some(Target::Time(_)) => {
                v.add("target.time", "must be a valid time between 1970 and 9999");
                None
            }
            Some(Target::ShiftBy(n)) => Some(ResetTarget::ShiftBy(n)),
            None => {
                v.add(
                    "target",
                    "required: one of snapshot, earliest, latest, time or shift_by",
                );
                None
            }
        };
        for (id, position) in &self.expected_next_snapshots {
            if *position < 1 {
                v.add(format!("expected_next_snapshots[{id}]"), "must be >= 1");
            }
        }
        let parsed = match (table, branch, selector, target) {
            (Some(table), Some(branch), Some(selector), Some(target)) => Some(ResetConsumers {
                table,
                branch,
                selector,
                target,
                force: self.force,
                execute: self.execute,
                expected: self.expected_next_snapshots.into_iter().collect(),
            }),
            _ => None,
        };
        checked(v, parsed)
    }
}

impl Scoped for ResetConsumers {
    fn touches(&self) -> Touches<'_> {
        Touches::Table(&self.table)
    }
}

/// Longest revoke reason kept in history.
const MAX_REASON: usize = 512;

/// A revoke's reason is free text kept in history and printed in tables:
/// bounded, and without control characters (Postgres cannot store a NUL
/// in text at all; a line break or an escape would garble what prints it).
fn check_reason(v: &mut Violations, reason: &str) {
    let len = reason.chars().count();
    if len > MAX_REASON {
        v.add("reason", format!("must be at most {MAX_REASON} characters (got {len})"));
    }
    if reason.chars().any(char::is_control) {
        v.add("reason", "must not contain control characters");
    }
}

pub(crate) struct RevokeLease {
    pub key: ConsumerKey,
    /// Why, for history (a default when none was given).
    pub reason: String,
    pub execute: bool,
}

impl Parse for pb::RevokeLeaseRequest {
    type Parsed = RevokeLease;
    fn parse(self) -> Result<RevokeLease, StoreError> {
        let mut v = Violations::new();
        let key = fields::consumer_key(&mut v, self.consumer.as_ref(), "consumer");
        check_reason(&mut v, &self.reason);
        let reason = if self.reason.is_empty() {
            "revoked by an operator".to_owned()
        } else {
            self.reason
        };
        let parsed = key.map(|key| RevokeLease {
            key,
            reason,
            execute: self.execute,
        });
        checked(v, parsed)
    }
}

impl Scoped for RevokeLease {
    fn touches(&self) -> Touches<'_> {
        Touches::Table(&self.key.table)
    }
}

pub(crate) struct ListHistory {
    pub filter: HistoryFilter,
    pub before: Option<i64>,
    pub page_size: i64,
}

impl Parse for pb::ListHistoryRequest {
    type Parsed = ListHistory;
    fn parse(self) -> Result<ListHistory, StoreError> {
        let mut v = Violations::new();
        let filter = match &self.consumer {
            Some(key) => {
                if !self.table.is_empty() || !self.branch.is_empty() {
                    v.add("table", "give either consumer or table (and branch), not both");
                }
                fields::consumer_key(&mut v, Some(key), "consumer").map(|k| HistoryFilter::key(&k))
            }
            None => {
                let table = fields::table_name(&mut v, &self.table, "table");
                let branch = fields::optional(&mut v, &self.branch, "branch", fields::branch_name);
                table.zip(branch).map(|(table, branch)| HistoryFilter {
                    table,
                    branch,
                    consumer_id: None,
                })
            }
        };
        let page_size = fields::page_size(&mut v, self.page_size, 100, MAX_PAGE, "page_size");
        let before = fields::parse_history_page_token(&mut v, &self.page_token);
        let parsed = match (filter, page_size, before) {
            (Some(filter), Some(page_size), Some(before)) => Some(ListHistory {
                filter,
                before,
                page_size,
            }),
            _ => None,
        };
        checked(v, parsed)
    }
}

impl Scoped for ListHistory {
    fn touches(&self) -> Touches<'_> {
        Touches::Table(&self.filter.table)
    }
}

/// A request naming one table and whether to execute.
pub(crate) struct OneTable {
    pub table: TableName,
    pub execute: bool,
}

fn one_table(table: &str, execute: bool) -> Result<OneTable, StoreError> {
    let mut v = Violations::new();
    let table = fields::table_name(&mut v, table, "table");
    checked(v, table.map(|table| OneTable { table, execute }))
}

impl Parse for pb::GetTableOptionsRequest {
    type Parsed = OneTable;
    fn parse(self) -> Result<OneTable, StoreError> {
        one_table(&self.table, false)
    }
}

impl Parse for pb::UnregisterTableRequest {
    type Parsed = OneTable;
    fn parse(self) -> Result<OneTable, StoreError> {
        one_table(&self.table, self.execute)
    }
}

impl Parse for pb::ImportConsumersRequest {
    type Parsed = OneTable;
    fn parse(self) -> Result<OneTable, StoreError> {
        one_table(&self.table, self.execute)
    }
}

impl Scoped for OneTable {
    fn touches(&self) -> Touches<'_> {
        Touches::Table(&self.table)
    }
}

pub(crate) struct SetTableOptions {
    pub table: TableName,
    pub set: BTreeMap<String, String>,
    pub unset: Vec<String>,
    pub execute: bool,
}

impl Parse for pb::SetTableOptionsRequest {
    type Parsed = SetTableOptions;
    fn parse(self) -> Result<SetTableOptions, StoreError> {
        let mut v = Violations::new();
        let table = fields::table_name(&mut v, &self.table, "table");
        let set: BTreeMap<String, String> = self.options.into_iter().collect();
        // Validate the change before reading anything: bad keys or values
        // never reach the database.
        v.check(TableOptions::default().apply(&set, &self.unset));
        let parsed = table.map(|table| SetTableOptions {
            table,
            set,
            unset: self.unset,
            execute: self.execute,
        });
        checked(v, parsed)
    }
}

impl Scoped for SetTableOptions {
    fn touches(&self) -> Touches<'_> {
        Touches::Table(&self.table)
    }
}

pub(crate) struct RevokeLeases {
    pub table: Option<TableName>,
    pub branch: Option<BranchName>,
    pub selector: ConsumerSelector,
    pub reason: String,
    pub execute: bool,
}

impl Parse for pb::RevokeLeasesRequest {
    type Parsed = RevokeLeases;
    fn parse(self) -> Result<RevokeLeases, StoreError> {
        let mut v = Violations::new();
        let table = fields::optional(&mut v, &self.table, "table", fields::table_name);
        let branch = fields::optional(&mut v, &self.branch, "branch", fields::branch_name);
        let selector = v.check(ConsumerSelector::parse(&self.including, &self.excluding));
        check_reason(&mut v, &self.reason);
        let parsed = match (table, branch, selector) {
            (Some(table), Some(branch), Some(selector)) if v.is_empty() => Some(RevokeLeases {
                table,
                branch,
                selector,
                reason: if self.reason.is_empty() {
                    "revoked by an operator (bulk)".to_owned()
                } else {
                    self.reason
                },
                execute: self.execute,
            }),
            _ => None,
        };
        checked(v, parsed)
    }
}

impl Scoped for RevokeLeases {
    fn touches(&self) -> Touches<'_> {
        Touches::TableOrAll(self.table.as_ref(), "revoke leases")
    }
}

pub(crate) struct ExpireConsumers {
    pub table: Option<TableName>,
    pub branch: Option<BranchName>,
    pub limit: i64,
    pub execute: bool,
}

impl Parse for pb::ExpireConsumersRequest {
    type Parsed = ExpireConsumers;
    fn parse(self) -> Result<ExpireConsumers, StoreError> {
        let mut v = Violations::new();
        let table = fields::optional(&mut v, &self.table, "table", fields::table_name);
        let branch = fields::optional(&mut v, &self.branch, "branch", fields::branch_name);
        let limit = fields::page_size(&mut v, self.limit, 1000, MAX_BATCH, "limit");
        let parsed = match (table, branch, limit) {
            (Some(table), Some(branch), Some(limit)) => Some(ExpireConsumers {
                table,
                branch,
                limit,
                execute: self.execute,
            }),
            _ => None,
        };
        checked(v, parsed)
    }
}

impl Scoped for ExpireConsumers {
    fn touches(&self) -> Touches<'_> {
        Touches::TableOrAll(self.table.as_ref(), "expire consumers")
    }
}

/// Longest table location accepted.
const MAX_LOCATION: usize = 2048;

pub(crate) struct RegisterTable {
    pub table: TableName,
    /// The table's directory, opened (not yet read).
    pub location: PaimonTable,
    pub execute: bool,
}

impl Parse for pb::RegisterTableRequest {
    type Parsed = RegisterTable;
    fn parse(self) -> Result<RegisterTable, StoreError> {
        let mut v = Violations::new();
        let table = fields::table_name(&mut v, &self.table, "table");
        let location = if self.location.len() > MAX_LOCATION {
            v.add("location", format!("must be at most {MAX_LOCATION} bytes"));
            None
        } else {
            match PaimonTable::open(&self.location) {
                Ok(opened) => Some(opened),
                Err(e) => {
                    v.add("location", e.to_string());
                    None
                }
            }
        };
        let parsed = table.zip(location).map(|(table, location)| RegisterTable {
            table,
            location,
            execute: self.execute,
        });
        checked(v, parsed)
    }
}

impl Scoped for RegisterTable {
    fn touches(&self) -> Touches<'_> {
        Touches::Table(&self.table)
    }
}

impl Parse for pb::ListTablesRequest {
    type Parsed = ListTables;
    fn parse(self) -> Result<ListTables, StoreError> {
        Ok(ListTables)
    }
}

pub(crate) struct ListTables;

impl Scoped for ListTables {
    fn touches(&self) -> Touches<'_> {
        Touches::Filtered
    }
}

pub(crate) struct ExportState {
    pub table: Option<TableName>,
}

impl Parse for pb::ExportStateRequest {
    type Parsed = ExportState;
    fn parse(self) -> Result<ExportState, StoreError> {
        let mut v = Violations::new();
        let table = fields::optional(&mut v, &self.table, "table", fields::table_name);
        checked(v, table.map(|table| ExportState { table }))
    }
}

impl Scoped for ExportState {
    fn touches(&self) -> Touches<'_> {
        Touches::TableOrAll(self.table.as_ref(), "export the state of")
    }
}

/// An ImportState call's messages, gathered: the first one's settings and
/// every line, or why the upload itself is refused.
pub(crate) struct ImportUpload {
    pub settings: Result<pb::ImportSettings, tidemark_core::validate::FieldViolation>,
    pub lines: Result<Vec<String>, tidemark_core::validate::FieldViolation>,
}

pub(crate) struct ImportState {
    pub parsed: tidemark_service::backup::Parsed,
    pub settings: tidemark_service::ImportSettings,
}

impl Parse for ImportUpload {
    type Parsed = ImportState;
    fn parse(self) -> Result<ImportState, StoreError> {
        let mut v = Violations::new();
        let settings = self.settings.map_err(|e| v.extend(vec![e])).ok();
        let lines = self.lines.map_err(|e| v.extend(vec![e])).ok();
        let parsed = match (settings, lines) {
            (Some(settings), Some(lines)) if v.is_empty() => Some(ImportState {
                parsed: tidemark_service::backup::parse(&lines)?,
                settings: crate::convert::import_settings(&settings),
            }),
            _ => None,
        };
        checked(v, parsed)
    }
}

impl Scoped for ImportState {
    fn touches(&self) -> Touches<'_> {
        // Every table of the file is checked by the handler.
        Touches::Filtered
    }
}
