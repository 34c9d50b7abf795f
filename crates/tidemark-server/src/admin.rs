//! The `tidemark.v1.Admin` service: the operator API. Every mutating call is
//! plan-only unless `execute: true`.

use std::collections::BTreeMap;
use std::time::Duration;

use tidemark_core::admin::{ConsumerSelector, Imported};
use tidemark_core::validate::Violations;
use tidemark_core::{ConsumerKey, TableName};
use tidemark_paimon::{FileState, PaimonTable};
use tidemark_proto::v1 as pb;
use tidemark_proto::v1::admin_server::Admin;
use tidemark_store::{HistoryFilter, KeyFilter, MAX_BATCH, MAX_PAGE, RegisteredTable, Store, StoreError};
use tonic::{Request, Response, Status};

use crate::call::{self, invalid};
use crate::context::call_context;
use crate::convert;

/// Longest revoke reason kept in history.
const MAX_REASON: usize = 512;

/// The operator API over a [`Store`].
#[derive(Debug, Clone)]
pub struct AdminService {
    store: Store,
    request_timeout: Duration,
    mirror_refresh: Duration,
}

impl AdminService {
    /// The service over `store`.
    pub fn new(store: Store, request_timeout: Duration) -> Self {
        Self {
            store,
            request_timeout,
            mirror_refresh: crate::ServerConfig::default().mirror_refresh,
        }
    }

    /// The mirror's refresh interval, which RegisterTable checks against a
    /// table's own `consumer.expiration-time`.
    pub fn with_mirror_refresh(mut self, mirror_refresh: Duration) -> Self {
        self.mirror_refresh = mirror_refresh;
        self
    }
}

impl AdminService {
    /// The registration of `table`, if any.
    async fn registration(&self, table: &TableName) -> Result<Option<RegisteredTable>, StoreError> {
        let tables = self.store.paimon().registered_tables().await?;
        Ok(tables.into_iter().find(|t| &t.table == table))
    }

    /// The consumer's Paimon file as read from storage now, and what the
    /// mirror last wrote there.
    async fn mirror_info(
        &self,
        key: &ConsumerKey,
        table: Option<&PaimonTable>,
        next: Option<i64>,
    ) -> Result<pb::MirrorInfo, StoreError> {
        let (branch, id) = (key.branch.as_str(), key.consumer_id.as_str());
        let path = table.map(|t| t.consumer_location(branch, id)).unwrap_or_default();
        let state = self.store.paimon().mirror_state(key).await?.unwrap_or_default();
        let mut info = pb::MirrorInfo {
            path,
            mirrored_next_snapshot: state.mirrored_next,
            mirrored_at: state.mirrored_at.map(convert::timestamp),
            in_sync: false,
            failures: state.failures,
            last_error: state.last_error.unwrap_or_default(),
            ..Default::default()
        };
        let Some(table) = table else {
            info.file_state = "STORAGE_ERROR".into();
            info.file_error = "the registered location cannot be opened".into();
            return Ok(info);
        };
        match table.branch_exists(branch).await {
            Ok(false) => {
                info.file_state = "BRANCH_MISSING".into();
                return Ok(info);
            }
            Err(e) => {
                info.file_state = "STORAGE_ERROR".into();
                info.file_error = e.to_string();
                return Ok(info);
            }
            Ok(true) => {}
        }
        match table.consumer_file(branch, id).await {
            Ok(FileState::Position(n)) => {
                info.file_state = "PRESENT".into();
                info.file_next_snapshot = Some(n);
                info.in_sync = Some(n) == next;
                info.file_modified_at = table
                    .stat_consumer(branch, id)
                    .await
                    .ok()
                    .flatten()
                    .map(|f| prost_types::Timestamp::from(f.modified));
            }
            Ok(FileState::Missing) => {
                info.file_state = "MISSING".into();
                info.in_sync = next.is_none();
            }
            Ok(FileState::Unreadable(why)) => {
                info.file_state = "UNREADABLE".into();
                info.file_error = why;
            }
            Err(e) => {
                info.file_state = "STORAGE_ERROR".into();
                info.file_error = e.to_string();
            }
        }
        Ok(info)
    }
}

fn registered_to_pb(t: &RegisteredTable) -> pb::RegisteredTable {
    pb::RegisteredTable {
        table: t.table.as_str().to_owned(),
        location: t.location.clone(),
        registered_at: Some(convert::timestamp(t.registered_at)),
        registered_by: t.registered_by.clone(),
        identity: t.identity.clone().unwrap_or_default(),
    }
}

/// Longest table location accepted.
const MAX_LOCATION: usize = 2048;

fn options_map(options: &tidemark_core::TableOptions) -> std::collections::HashMap<String, String> {
    options.to_map().into_iter().collect()
}

#[tonic::async_trait]
impl Admin for AdminService {
    async fn list_consumers(
        &self,
        request: Request<pb::ListConsumersRequest>,
    ) -> Result<Response<pb::ListConsumersResponse>, Status> {
        let ctx = call_context(&request);
        let req = request.into_inner();
        call::run("Admin", "ListConsumers", self.request_timeout, ctx.clone(), async {
            let mut v = Violations::new();
            let table = convert::optional(&mut v, &req.table, "table", convert::table_name);
            let branch = convert::optional(&mut v, &req.branch, "branch", convert::branch_name);
            if req.consumer_id_prefix.len() > 128 {
                v.add("consumer_id_prefix", "must be at most 128 characters");
            }
            let page_size = convert::page_size(&mut v, req.page_size, 100, MAX_PAGE, "page_size");
            let after = convert::parse_consumer_page_token(&mut v, &req.page_token);
            let (Some(table), Some(branch), Some(page_size), Some(after), true) =
                (table, branch, page_size, after, v.is_empty())
            else {
                return Err(invalid(v));
            };
            match &table {
                Some(table) => call::in_scope(&ctx, table)?,
                None => call::all_tables(&ctx, "list consumers")?,
            }
            let filter = KeyFilter {
                table,
                branch,
                consumer_id_prefix: Some(req.consumer_id_prefix).filter(|p| !p.is_empty()),
            };
            let page = self.store.list_consumers(&filter, after.as_ref(), page_size).await?;
            Ok(pb::ListConsumersResponse {
                consumers: page.consumers.iter().map(convert::consumer_info).collect(),
                next_page_token: page.next.as_ref().map(convert::consumer_page_token).unwrap_or_default(),
            })
        })
        .await
    }

    async fn describe_consumer(
        &self,
        request: Request<pb::DescribeConsumerRequest>,
    ) -> Result<Response<pb::DescribeConsumerResponse>, Status> {
        let ctx = call_context(&request);
        let req = request.into_inner();
        call::run("Admin", "DescribeConsumer", self.request_timeout, ctx.clone(), async {
            let mut v = Violations::new();
            let key = convert::consumer_key(&mut v, req.consumer.as_ref(), "consumer");
            let limit = convert::page_size(&mut v, req.history_limit, 20, MAX_PAGE, "history_limit");
            let (Some(key), Some(limit)) = (key, limit) else {
                return Err(invalid(v));
            };
            call::in_scope(&ctx, &key.table)?;
            let (view, history) = self.store.describe(&key, limit).await?;
            let mut info = convert::consumer_info(&view);
            let mut mirror = None;
            if let Some(registered) = self.registration(&key.table).await? {
                let table = PaimonTable::open(&registered.location).ok();
                mirror = Some(
                    self.mirror_info(&key, table.as_ref(), view.state.next_snapshot())
                        .await?,
                );
                // A registered table's latest snapshot comes from its
                // directory, not from what the last worker reported.
                if let (Some(consumer), Some(table)) = (info.consumer.as_mut(), &table)
                    && let Ok(Some(range)) = table.snapshot_range(key.branch.as_str()).await
                {
                    consumer.latest_snapshot = Some(range.latest);
                    consumer.lag = tidemark_core::state::lag(consumer.next_snapshot, range.latest);
                }
            }
            Ok(pb::DescribeConsumerResponse {
                info: Some(info),
                table_options: options_map(&view.options),
                recent_history: history.iter().map(convert::history_entry).collect(),
                mirror,
            })
        })
        .await
    }

    async fn reset_consumer(
        &self,
        request: Request<pb::ResetConsumerRequest>,
    ) -> Result<Response<pb::ResetConsumerResponse>, Status> {
        let ctx = call_context(&request);
        let req = request.into_inner();
        call::run("Admin", "ResetConsumer", self.request_timeout, ctx.clone(), async {
            let mut v = Violations::new();
            let key = convert::consumer_key(&mut v, req.consumer.as_ref(), "consumer");
            if req.next_snapshot < 1 {
                v.add("next_snapshot", format!("must be >= 1 (got {})", req.next_snapshot));
            }
            if let Some(expected) = req.expected_next_snapshot
                && expected < 1
            {
                v.add(
                    "expected_next_snapshot",
                    format!("must be >= 1 when present (got {expected})"),
                );
            }
            let (Some(key), true) = (key, v.is_empty()) else {
                return Err(invalid(v));
            };
            call::in_scope(&ctx, &key.table)?;
            let planned = self
                .store
                .reset_consumer(
                    &ctx,
                    &key,
                    req.next_snapshot,
                    req.expected_next_snapshot,
                    req.force,
                    req.execute,
                )
                .await?;
            if planned.applied {
                tracing::info!(consumer = %key, old = planned.change.old_next, new = planned.change.new_next,
                    forced = planned.change.revoked.is_some(), "consumer reset");
            }
            Ok(pb::ResetConsumerResponse {
                change: Some(convert::consumer_change(&key, &planned.change)),
                executed: planned.applied,
            })
        })
        .await
    }

    async fn delete_consumer(
        &self,
        request: Request<pb::DeleteConsumerRequest>,
    ) -> Result<Response<pb::DeleteConsumerResponse>, Status> {
        let ctx = call_context(&request);
        let req = request.into_inner();
        call::run("Admin", "DeleteConsumer", self.request_timeout, ctx.clone(), async {
            let mut v = Violations::new();
            let key = convert::consumer_key(&mut v, req.consumer.as_ref(), "consumer");
            if let Some(expected) = req.expected_next_snapshot
                && expected < 1
            {
                v.add(
                    "expected_next_snapshot",
                    format!("must be >= 1 when present (got {expected})"),
                );
            }
            let (Some(key), true) = (key, v.is_empty()) else {
                return Err(invalid(v));
            };
            call::in_scope(&ctx, &key.table)?;
            let planned = self
                .store
                .delete_consumer(&ctx, &key, req.expected_next_snapshot, req.force, req.execute)
                .await?;
            if planned.applied && planned.change.changes_anything() {
                tracing::info!(consumer = %key, old = planned.change.old_next,
                    forced = planned.change.revoked.is_some(), "consumer deleted");
            }
            Ok(pb::DeleteConsumerResponse {
                change: Some(convert::consumer_change(&key, &planned.change)),
                executed: planned.applied,
            })
        })
        .await
    }

    async fn clear_consumers(
        &self,
        request: Request<pb::ClearConsumersRequest>,
    ) -> Result<Response<pb::ClearConsumersResponse>, Status> {
        let ctx = call_context(&request);
        let req = request.into_inner();
        call::run("Admin", "ClearConsumers", self.request_timeout, ctx.clone(), async {
            let mut v = Violations::new();
            let table = convert::table_name(&mut v, &req.table, "table");
            let branch = convert::branch_name(&mut v, &req.branch, "branch");
            let selector = v.check(ConsumerSelector::parse(&req.including, &req.excluding));
            let (Some(table), Some(branch), Some(selector)) = (table, branch, selector) else {
                return Err(invalid(v));
            };
            call::in_scope(&ctx, &table)?;
            let cleared = self
                .store
                .clear_consumers(&ctx, &table, &branch, &selector, req.force, req.execute)
                .await?;
            let mut response = pb::ClearConsumersResponse {
                executed: req.execute,
                ..Default::default()
            };
            for c in &cleared {
                match &c.result {
                    Ok(change) => response.cleared.push(convert::consumer_change(&c.key, change)),
                    Err(why) => response.skipped.push(pb::SkippedConsumer {
                        consumer_id: c.key.consumer_id.as_str().to_owned(),
                        reason: why.reason().to_owned(),
                        message: why.to_string(),
                    }),
                }
            }
            if req.execute {
                tracing::info!(table = %table.as_str(), branch = %branch.as_str(), cleared = response.cleared.len(),
                    skipped = response.skipped.len(), "consumers cleared");
            }
            Ok(response)
        })
        .await
    }

    async fn revoke_lease(
        &self,
        request: Request<pb::RevokeLeaseRequest>,
    ) -> Result<Response<pb::RevokeLeaseResponse>, Status> {
        let ctx = call_context(&request);
        let req = request.into_inner();
        call::run("Admin", "RevokeLease", self.request_timeout, ctx.clone(), async {
            let mut v = Violations::new();
            let key = convert::consumer_key(&mut v, req.consumer.as_ref(), "consumer");
            if req.reason.chars().count() > MAX_REASON {
                v.add("reason", format!("must be at most {MAX_REASON} characters"));
            }
            let (Some(key), true) = (key, v.is_empty()) else {
                return Err(invalid(v));
            };
            let reason = if req.reason.is_empty() {
                "revoked by an operator"
            } else {
                &req.reason
            };
            let planned = self.store.revoke(&ctx, &key, reason, req.execute).await?;
            if planned.applied && planned.change.lease.is_some() {
                tracing::info!(consumer = %key, epoch = planned.change.epoch, reason, "lease revoked");
            }
            Ok(pb::RevokeLeaseResponse {
                // The lease as the revocation leaves it (state "revoked").
                lease: planned
                    .change
                    .lease
                    .as_ref()
                    .map(|l| convert::lease_info(l, l.deadline)),
                epoch: planned.change.epoch,
                executed: planned.applied,
            })
        })
        .await
    }

    async fn list_history(
        &self,
        request: Request<pb::ListHistoryRequest>,
    ) -> Result<Response<pb::ListHistoryResponse>, Status> {
        let ctx = call_context(&request);
        let req = request.into_inner();
        call::run("Admin", "ListHistory", self.request_timeout, ctx.clone(), async {
            let mut v = Violations::new();
            let filter = match &req.consumer {
                Some(key) => {
                    if !req.table.is_empty() || !req.branch.is_empty() {
                        v.add("table", "give either consumer or table (and branch), not both");
                    }
                    convert::consumer_key(&mut v, Some(key), "consumer").map(|k| HistoryFilter::key(&k))
                }
                None => {
                    let table = convert::table_name(&mut v, &req.table, "table");
                    let branch = convert::optional(&mut v, &req.branch, "branch", convert::branch_name);
                    table.zip(branch).map(|(table, branch)| HistoryFilter {
                        table,
                        branch,
                        consumer_id: None,
                    })
                }
            };
            let page_size = convert::page_size(&mut v, req.page_size, 100, MAX_PAGE, "page_size");
            let before = convert::parse_history_page_token(&mut v, &req.page_token);
            let (Some(filter), Some(page_size), Some(before), true) = (filter, page_size, before, v.is_empty()) else {
                return Err(invalid(v));
            };
            call::in_scope(&ctx, &filter.table)?;
            let entries = self.store.list_history(&filter, before, page_size).await?;
            let full = i64::try_from(entries.len()).unwrap_or(0) == page_size;
            Ok(pb::ListHistoryResponse {
                next_page_token: entries
                    .last()
                    .filter(|_| full)
                    .map(|h| h.id.to_string())
                    .unwrap_or_default(),
                entries: entries.iter().map(convert::history_entry).collect(),
            })
        })
        .await
    }

    async fn get_table_options(
        &self,
        request: Request<pb::GetTableOptionsRequest>,
    ) -> Result<Response<pb::GetTableOptionsResponse>, Status> {
        let ctx = call_context(&request);
        let req = request.into_inner();
        call::run("Admin", "GetTableOptions", self.request_timeout, ctx.clone(), async {
            let mut v = Violations::new();
            let Some(table) = convert::table_name(&mut v, &req.table, "table") else {
                return Err(invalid(v));
            };
            call::in_scope(&ctx, &table)?;
            let stored = self.store.table_options(&table).await?;
            let options = stored.options;
            Ok(pb::GetTableOptionsResponse {
                table: table.as_str().to_owned(),
                options: options_map(&options),
                expiration_time: options.expiration.map(convert::duration_to_pb),
                changelog_only: options.changelog_only,
                mode: options
                    .mode
                    .unwrap_or(tidemark_core::ConsumerMode::ExactlyOnce)
                    .as_str()
                    .to_owned(),
                updated_at: stored.updated_at.map(convert::timestamp),
                updated_by: stored.updated_by.unwrap_or_default(),
            })
        })
        .await
    }

    async fn set_table_options(
        &self,
        request: Request<pb::SetTableOptionsRequest>,
    ) -> Result<Response<pb::SetTableOptionsResponse>, Status> {
        let ctx = call_context(&request);
        let req = request.into_inner();
        call::run("Admin", "SetTableOptions", self.request_timeout, ctx.clone(), async {
            let mut v = Violations::new();
            let table = convert::table_name(&mut v, &req.table, "table");
            let set: BTreeMap<String, String> = req.options.into_iter().collect();
            // Validate the change before reading anything: bad keys or values
            // never reach the database.
            v.check(tidemark_core::TableOptions::default().apply(&set, &req.unset));
            let (Some(table), true) = (table, v.is_empty()) else {
                return Err(invalid(v));
            };
            call::in_scope(&ctx, &table)?;
            let planned = self
                .store
                .set_table_options(&ctx, &table, &set, &req.unset, req.execute)
                .await?;
            if planned.applied {
                tracing::info!(table = %table.as_str(), options = ?planned.change.after.to_map(), "table options set");
            }
            Ok(pb::SetTableOptionsResponse {
                before: options_map(&planned.change.before.options),
                after: options_map(&planned.change.after),
                executed: planned.applied,
            })
        })
        .await
    }

    async fn expire_consumers(
        &self,
        request: Request<pb::ExpireConsumersRequest>,
    ) -> Result<Response<pb::ExpireConsumersResponse>, Status> {
        let ctx = call_context(&request);
        let req = request.into_inner();
        call::run("Admin", "ExpireConsumers", self.request_timeout, ctx.clone(), async {
            let mut v = Violations::new();
            let table = convert::optional(&mut v, &req.table, "table", convert::table_name);
            let branch = convert::optional(&mut v, &req.branch, "branch", convert::branch_name);
            let limit = convert::page_size(&mut v, req.limit, 1000, MAX_BATCH, "limit");
            let (Some(table), Some(branch), Some(limit)) = (table, branch, limit) else {
                return Err(invalid(v));
            };
            match &table {
                Some(table) => call::in_scope(&ctx, table)?,
                None => call::all_tables(&ctx, "expire consumers")?,
            }
            let expired = self
                .store
                .expire_consumers(&ctx, table.as_ref(), branch.as_ref(), limit, req.execute)
                .await?;
            if req.execute && !expired.is_empty() {
                tracing::info!(expired = expired.len(), "consumers expired on request");
            }
            Ok(pb::ExpireConsumersResponse {
                expired: expired
                    .iter()
                    .map(|e| pb::ExpiredConsumer {
                        consumer: Some(convert::key_to_pb(&e.key)),
                        next_snapshot: e.next_snapshot,
                        idle: Some(convert::duration_to_pb(e.idle)),
                    })
                    .collect(),
                executed: req.execute,
            })
        })
        .await
    }

    async fn register_table(
        &self,
        request: Request<pb::RegisterTableRequest>,
    ) -> Result<Response<pb::RegisterTableResponse>, Status> {
        let ctx = call_context(&request);
        let req = request.into_inner();
        call::run("Admin", "RegisterTable", self.request_timeout, ctx.clone(), async {
            let mut v = Violations::new();
            let table = convert::table_name(&mut v, &req.table, "table");
            let location = if req.location.len() > MAX_LOCATION {
                v.add("location", format!("must be at most {MAX_LOCATION} bytes"));
                None
            } else {
                match PaimonTable::open(&req.location) {
                    Ok(opened) => Some(opened),
                    Err(e) => {
                        v.add("location", e.to_string());
                        None
                    }
                }
            };
            let (Some(table), Some(location), true) = (table, location, v.is_empty()) else {
                return Err(invalid(v));
            };
            call::in_scope(&ctx, &table)?;
            let previous = self.registration(&table).await?;
            // Reading the range shows the location is the table's.
            let (range, probe_error) = match location.snapshot_range(tidemark_paimon::MAIN_BRANCH).await {
                Ok(range) => (range, String::new()),
                Err(e) => (None, e.to_string()),
            };
            // The identity binds the registration to this table (SPEC §9);
            // registering again accepts a recreated one.
            let identity = location.identity().await.ok().flatten();
            let mut warnings = Vec::new();
            match location.consumer_expiration().await {
                Ok(Some(expiration)) if expiration < 3 * self.mirror_refresh => {
                    let warning = format!(
                        "MIRROR_REFRESH_TOO_SLOW: the table's consumer.expiration-time ({}) is shorter than three \
                         times this server's --mirror-refresh ({}): Paimon could expire the file of a consumer \
                         tidemark keeps; set --mirror-refresh to at most a third of it",
                        humantime::format_duration(expiration),
                        humantime::format_duration(self.mirror_refresh)
                    );
                    tracing::warn!(table = %table.as_str(), "{warning}");
                    warnings.push(warning);
                }
                Ok(_) => {}
                Err(e) => warnings.push(format!("cannot read the table's schema options: {e}")),
            }
            if req.execute {
                self.store
                    .paimon()
                    .register_table(&table, location.location(), identity.as_deref(), &ctx)
                    .await?;
            }
            let registered = match self.registration(&table).await? {
                Some(now) if req.execute => now,
                _ => RegisteredTable {
                    table: table.clone(),
                    location: location.location().to_owned(),
                    registered_at: tidemark_core::Timestamp::from_micros(0),
                    registered_by: ctx.principal.clone(),
                    identity,
                },
            };
            Ok(pb::RegisterTableResponse {
                table: Some(registered_to_pb(&registered)),
                previous_location: previous
                    .map(|p| p.location)
                    .filter(|l| l != location.location())
                    .unwrap_or_default(),
                earliest_snapshot: range.map(|r| r.earliest),
                latest_snapshot: range.map(|r| r.latest),
                executed: req.execute,
                probe_error,
                warnings,
            })
        })
        .await
    }

    async fn unregister_table(
        &self,
        request: Request<pb::UnregisterTableRequest>,
    ) -> Result<Response<pb::UnregisterTableResponse>, Status> {
        let ctx = call_context(&request);
        let req = request.into_inner();
        call::run("Admin", "UnregisterTable", self.request_timeout, ctx.clone(), async {
            let mut v = Violations::new();
            let Some(table) = convert::table_name(&mut v, &req.table, "table") else {
                return Err(invalid(v));
            };
            call::in_scope(&ctx, &table)?;
            let was_registered = if req.execute {
                self.store.paimon().unregister_table(&table).await?
            } else {
                self.registration(&table).await?.is_some()
            };
            Ok(pb::UnregisterTableResponse {
                was_registered,
                executed: req.execute,
            })
        })
        .await
    }

    async fn list_tables(
        &self,
        request: Request<pb::ListTablesRequest>,
    ) -> Result<Response<pb::ListTablesResponse>, Status> {
        let ctx = call_context(&request);
        call::run("Admin", "ListTables", self.request_timeout, ctx.clone(), async {
            let tables = self.store.paimon().registered_tables().await?;
            Ok(pb::ListTablesResponse {
                tables: tables
                    .iter()
                    .filter(|t| call::in_scope(&ctx, &t.table).is_ok())
                    .map(registered_to_pb)
                    .collect(),
            })
        })
        .await
    }

    async fn import_consumers(
        &self,
        request: Request<pb::ImportConsumersRequest>,
    ) -> Result<Response<pb::ImportConsumersResponse>, Status> {
        let ctx = call_context(&request);
        let req = request.into_inner();
        call::run("Admin", "ImportConsumers", self.request_timeout, ctx.clone(), async {
            let mut v = Violations::new();
            let Some(table) = convert::table_name(&mut v, &req.table, "table") else {
                return Err(invalid(v));
            };
            call::in_scope(&ctx, &table)?;
            let Some(registered) = self.registration(&table).await? else {
                v.add("table", "is not registered (RegisterTable first)");
                return Err(invalid(v));
            };
            let paimon = PaimonTable::open(&registered.location)
                .map_err(|e| StoreError::Internal(format!("stored location: {e}")))?;
            let found = paimon
                .list_consumers()
                .await
                .map_err(|e| StoreError::Unavailable(format!("cannot read the table's consumer files: {e}")))?;
            let mut imported = Vec::new();
            let mut skipped = Vec::new();
            let skip = |f: &tidemark_paimon::FoundConsumer, reason: &str, message: String| pb::ImportSkipped {
                branch: f.branch.clone(),
                consumer_id: f.consumer_id.clone(),
                reason: reason.to_owned(),
                message,
            };
            for f in &found {
                if f.consumer_id.starts_with(tidemark_paimon::PIN_PREFIX) {
                    skipped.push(skip(f, "PIN_FILE", "tidemark's own full-scan pin file".to_owned()));
                    continue;
                }
                let next = match &f.next_snapshot {
                    Ok(n) if *n >= 1 => *n,
                    Ok(n) => {
                        skipped.push(skip(f, "UNREADABLE", format!("nextSnapshot {n} is not a snapshot id")));
                        continue;
                    }
                    Err(e) => {
                        skipped.push(skip(f, "UNREADABLE", e.clone()));
                        continue;
                    }
                };
                let key = match ConsumerKey::parse(table.as_str(), &f.branch, &f.consumer_id, "") {
                    Ok(key) => key,
                    Err(violations) => {
                        let why = violations.iter().map(|v| v.description.clone()).collect::<Vec<_>>();
                        skipped.push(skip(f, "INVALID_ID", why.join("; ")));
                        continue;
                    }
                };
                let exists =
                    |existing: i64| format!("tidemark already has this consumer at {existing}; the file shows {next}");
                if !req.execute {
                    if let Some(existing) = self.store.key_state(&key).await?.and_then(|s| s.next_snapshot()) {
                        skipped.push(skip(f, "EXISTS", exists(existing)));
                        continue;
                    }
                } else {
                    // Created only while still absent (compare-and-set): a
                    // consumer created meanwhile wins.
                    match self.store.import_consumer(&ctx, &key, next).await {
                        Ok(Imported::Created) => {}
                        Ok(Imported::Exists { next_snapshot }) => {
                            skipped.push(skip(f, "EXISTS", exists(next_snapshot)));
                            continue;
                        }
                        Err(StoreError::Rule(rule)) => {
                            skipped.push(skip(f, rule.reason(), rule.to_string()));
                            continue;
                        }
                        Err(other) => return Err(other),
                    }
                }
                imported.push(pb::ImportedConsumer {
                    consumer: Some(convert::key_to_pb(&key)),
                    next_snapshot: next,
                });
            }
            Ok(pb::ImportConsumersResponse {
                imported,
                skipped,
                executed: req.execute,
            })
        })
        .await
    }
}
