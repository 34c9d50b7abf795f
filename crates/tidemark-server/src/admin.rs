//! The `tidemark.v1.Admin` service: the operator API. Every mutating call is
//! plan-only unless `execute: true`. Each handler parses (the `request`
//! module), calls the store or the registry, and builds the reply.

use std::time::Duration;

use tidemark_proto::v1 as pb;
use tidemark_proto::v1::admin_server::Admin;
use tidemark_store::{RegisteredTable, Store};
use tonic::{Request, Response, Status};

use crate::call::Rpcs;
use crate::convert;
use crate::registry::{self, ImportOutcome};
use crate::request;

/// The operator API over a [`Store`].
#[derive(Debug, Clone)]
pub struct AdminService {
    store: Store,
    rpcs: Rpcs,
    tables: std::sync::Arc<crate::tables::Registrations>,
    mirror_refresh: Duration,
    allowed_locations: Option<std::sync::Arc<tidemark_paimon::LocationAllowList>>,
    exports: ExportLimits,
    running_exports: std::sync::Arc<tokio::sync::Semaphore>,
}

/// What a replica allows of ExportState streams.
#[derive(Debug, Clone, Copy)]
pub struct ExportLimits {
    /// A client that takes nothing for this long has its export ended
    /// (`ABORTED`, `EXPORT_STALLED`).
    pub idle_timeout: Duration,
    /// Exports running at once; more are refused (`RESOURCE_EXHAUSTED`,
    /// `TOO_MANY_EXPORTS`).
    pub max_concurrent: usize,
}

impl Default for ExportLimits {
    fn default() -> Self {
        Self {
            idle_timeout: Duration::from_secs(60),
            max_concurrent: 2,
        }
    }
}

impl AdminService {
    /// The service over `store`.
    pub fn new(store: Store, request_timeout: Duration) -> Self {
        Self {
            tables: std::sync::Arc::new(crate::tables::Registrations::new(store.clone())),
            rpcs: Rpcs::new("Admin", request_timeout, store.unavailable_signal()),
            store,
            mirror_refresh: crate::ServerConfig::default().mirror_refresh,
            allowed_locations: None,
            exports: ExportLimits::default(),
            running_exports: std::sync::Arc::new(tokio::sync::Semaphore::new(ExportLimits::default().max_concurrent)),
        }
    }

    /// How long an export waits for a client that takes nothing, and how
    /// many run at once.
    pub fn with_export_limits(mut self, limits: ExportLimits) -> Self {
        self.exports = limits;
        self.running_exports = std::sync::Arc::new(tokio::sync::Semaphore::new(limits.max_concurrent));
        self
    }

    /// Only registrations under these locations are accepted (the server
    /// writes consumer files wherever a registration points); `None`: any.
    pub fn with_allowed_locations(mut self, allowed: Option<tidemark_paimon::LocationAllowList>) -> Self {
        self.allowed_locations = allowed.map(std::sync::Arc::new);
        self
    }

    /// The mirror's refresh interval, which RegisterTable checks against a
    /// table's own `consumer.expiration-time`.
    pub fn with_mirror_refresh(mut self, mirror_refresh: Duration) -> Self {
        self.mirror_refresh = mirror_refresh;
        self
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

/// A bulk change's outcomes: the changes made (or planned), and the
/// consumers left alone with why.
fn split_bulk(outcomes: &[tidemark_store::BulkChange]) -> (Vec<pb::ConsumerChange>, Vec<pb::SkippedConsumer>) {
    let mut changes = Vec::new();
    let mut skipped = Vec::new();
    for outcome in outcomes {
        match &outcome.result {
            Ok(change) => changes.push(convert::consumer_change(&outcome.key, change)),
            Err(why) => skipped.push(skipped_consumer(&outcome.key, why)),
        }
    }
    (changes, skipped)
}

/// A consumer a bulk operation left alone, and why.
fn skipped_consumer(key: &tidemark_core::ConsumerKey, why: &tidemark_core::CoreError) -> pb::SkippedConsumer {
    pb::SkippedConsumer {
        consumer_id: key.consumer_id.as_str().to_owned(),
        reason: why.reason().to_owned(),
        message: why.to_string(),
    }
}

fn options_map(options: &tidemark_core::TableOptions) -> std::collections::HashMap<String, String> {
    options.to_map().into_iter().collect()
}

#[tonic::async_trait]
impl Admin for AdminService {
    async fn list_consumers(
        &self,
        request: Request<pb::ListConsumersRequest>,
    ) -> Result<Response<pb::ListConsumersResponse>, Status> {
        self.rpcs
            .handle("ListConsumers", request, |_, req| async move {
                let page = self
                    .store
                    .list_consumers(&req.filter, req.after.as_ref(), req.page_size)
                    .await?;
                let mut consumers = Vec::with_capacity(page.consumers.len());
                for view in &page.consumers {
                    let mut info = convert::consumer_info(view);
                    self.tables.fill_lag(&mut info, None, view.now).await;
                    consumers.push(info);
                }
                Ok(pb::ListConsumersResponse {
                    consumers,
                    next_page_token: page.next.as_ref().map(convert::consumer_page_token).unwrap_or_default(),
                })
            })
            .await
    }

    async fn describe_consumer(
        &self,
        request: Request<pb::DescribeConsumerRequest>,
    ) -> Result<Response<pb::DescribeConsumerResponse>, Status> {
        self.rpcs
            .handle("DescribeConsumer", request, |_, req| async move {
                let key = &req.key;
                let (view, history) = self.store.describe(key, req.history_limit).await?;
                let mut info = convert::consumer_info(&view);
                let mut mirror = None;
                if let Some(registered) = registry::registration(&self.store, &key.table).await? {
                    let found =
                        registry::mirror_view(&self.store, &registered, key, view.state.next_snapshot()).await?;
                    // A registered table's latest snapshot comes from its
                    // directory, not from what the last worker reported.
                    if found.directory_latest.is_some() {
                        self.tables.fill_lag(&mut info, found.directory_latest, view.now).await;
                    }
                    mirror = Some(found.info);
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
        self.rpcs
            .handle("ResetConsumer", request, |ctx, req| async move {
                let key = &req.key;
                let planned = self
                    .store
                    .reset_consumer(
                        &ctx,
                        key,
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
                    change: Some(convert::consumer_change(key, &planned.change)),
                    executed: planned.applied,
                })
            })
            .await
    }

    async fn delete_consumer(
        &self,
        request: Request<pb::DeleteConsumerRequest>,
    ) -> Result<Response<pb::DeleteConsumerResponse>, Status> {
        self.rpcs
            .handle("DeleteConsumer", request, |ctx, req| async move {
                let key = &req.key;
                let planned = self
                    .store
                    .delete_consumer(&ctx, key, req.expected_next_snapshot, req.force, req.execute)
                    .await?;
                if planned.applied && planned.change.changes_anything() {
                    tracing::info!(consumer = %key, old = planned.change.old_next,
                    forced = planned.change.revoked.is_some(), "consumer deleted");
                }
                Ok(pb::DeleteConsumerResponse {
                    change: Some(convert::consumer_change(key, &planned.change)),
                    executed: planned.applied,
                })
            })
            .await
    }

    async fn clear_consumers(
        &self,
        request: Request<pb::ClearConsumersRequest>,
    ) -> Result<Response<pb::ClearConsumersResponse>, Status> {
        let until = self.rpcs.bulk_deadline(&request);
        self.rpcs
            .handle("ClearConsumers", request, |ctx, req| async move {
                let cleared = self
                    .store
                    .clear_consumers(
                        &ctx,
                        &req.table,
                        &req.branch,
                        &req.selector,
                        req.force,
                        req.execute,
                        Some(until),
                    )
                    .await?;
                let (cleared, skipped) = split_bulk(&cleared);
                let response = pb::ClearConsumersResponse {
                    cleared,
                    skipped,
                    executed: req.execute,
                };
                if req.execute {
                    tracing::info!(table = %req.table.as_str(), branch = %req.branch.as_str(),
                    cleared = response.cleared.len(), skipped = response.skipped.len(), "consumers cleared");
                }
                Ok(response)
            })
            .await
    }

    async fn reset_consumers(
        &self,
        request: Request<pb::ResetConsumersRequest>,
    ) -> Result<Response<pb::ResetConsumersResponse>, Status> {
        let until = self.rpcs.bulk_deadline(&request);
        self.rpcs
            .handle("ResetConsumers", request, |ctx, req| async move {
                use tidemark_core::reset::{ResetTarget, resolve};
                let table = if req.target.needs_snapshots() {
                    let at = match req.target {
                        ResetTarget::Time(ms) => Some(ms),
                        _ => None,
                    };
                    Some(crate::tables::reset_snapshots(&self.store, &req.table, req.branch.as_str(), at).await?)
                } else {
                    None
                };
                let reset = self
                    .store
                    .reset_consumers(
                        &ctx,
                        &req.table,
                        &req.branch,
                        &req.selector,
                        |current| resolve(req.target, current, table),
                        &req.expected,
                        req.force,
                        req.execute,
                        Some(until),
                    )
                    .await?;
                let (reset, skipped) = split_bulk(&reset);
                Ok(pb::ResetConsumersResponse {
                    reset,
                    skipped,
                    executed: req.execute,
                    earliest_snapshot: table.map(|t| t.earliest),
                    latest_snapshot: table.map(|t| t.latest),
                })
            })
            .await
    }

    async fn revoke_lease(
        &self,
        request: Request<pb::RevokeLeaseRequest>,
    ) -> Result<Response<pb::RevokeLeaseResponse>, Status> {
        self.rpcs.handle("RevokeLease", request, |ctx, req| async move {
            let planned = self.store.revoke(&ctx, &req.key, &req.reason, req.execute).await?;
            if planned.applied && planned.change.lease.is_some() {
                tracing::info!(consumer = %req.key, epoch = planned.change.epoch, reason = req.reason, "lease revoked");
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

    async fn revoke_leases(
        &self,
        request: Request<pb::RevokeLeasesRequest>,
    ) -> Result<Response<pb::RevokeLeasesResponse>, Status> {
        let until = self.rpcs.bulk_deadline(&request);
        self.rpcs
            .handle("RevokeLeases", request, |ctx, req| async move {
                let filter = tidemark_store::KeyFilter {
                    table: req.table.clone(),
                    branch: req.branch.clone(),
                    consumer_id_prefix: None,
                };
                let (revoked, left) = self
                    .store
                    .revoke_leases(&ctx, &filter, &req.selector, &req.reason, req.execute, Some(until))
                    .await?;
                Ok(pb::RevokeLeasesResponse {
                    revoked: revoked
                        .iter()
                        .map(|(key, r)| pb::RevokedLeaseEntry {
                            consumer: Some(convert::key_to_pb(key)),
                            lease: r.lease.as_ref().map(|l| convert::lease_info(l, l.deadline)),
                            epoch: r.epoch,
                        })
                        .collect(),
                    executed: req.execute,
                    not_reached: left
                        .iter()
                        .map(|key| {
                            let consumer_id = key.consumer_id.as_str().to_owned();
                            skipped_consumer(key, &tidemark_core::CoreError::NotReached { consumer_id })
                        })
                        .collect(),
                })
            })
            .await
    }

    async fn list_history(
        &self,
        request: Request<pb::ListHistoryRequest>,
    ) -> Result<Response<pb::ListHistoryResponse>, Status> {
        self.rpcs
            .handle("ListHistory", request, |_, req| async move {
                let entries = self.store.list_history(&req.filter, req.before, req.page_size).await?;
                let full = i64::try_from(entries.len()).unwrap_or(0) == req.page_size;
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
        self.rpcs
            .handle("GetTableOptions", request, |_, req| async move {
                let stored = self.store.table_options(&req.table).await?;
                let options = stored.options;
                Ok(pb::GetTableOptionsResponse {
                    table: req.table.as_str().to_owned(),
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
        self.rpcs
            .handle("SetTableOptions", request, |ctx, req| async move {
                let planned = self
                    .store
                    .set_table_options(&ctx, &req.table, &req.set, &req.unset, req.execute)
                    .await?;
                if planned.applied {
                    tidemark_store::audit::table_change(
                        &ctx,
                        req.table.as_str(),
                        "SET_OPTIONS",
                        &format!("{:?}", planned.change.before.options.to_map()),
                        &format!("{:?}", planned.change.after.to_map()),
                    );
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
        self.rpcs
            .handle("ExpireConsumers", request, |ctx, req| async move {
                let expired = self
                    .store
                    .expire_consumers(&ctx, req.table.as_ref(), req.branch.as_ref(), req.limit, req.execute)
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
        self.rpcs
            .handle("RegisterTable", request, |ctx, req| async move {
                let (table, location) = (&req.table, &req.location);
                // Before anything reads the location.
                if let Some(allowed) = &self.allowed_locations
                    && !allowed.allows(location.location())
                {
                    return Err(tidemark_core::access::Denied::LocationNotAllowed {
                        principal: ctx.principal.clone(),
                        location: location.location().to_owned(),
                        allowed: allowed.describe(),
                    }
                    .into());
                }
                let previous = registry::registration(&self.store, table).await?;
                let probe = registry::probe(table, location, self.mirror_refresh).await;
                if req.execute {
                    self.store
                        .paimon()
                        .register_table(table, location.location(), probe.identity.as_deref(), &ctx)
                        .await?;
                    let before = previous.as_ref().map(|p| p.location.as_str()).unwrap_or_default();
                    tidemark_store::audit::table_change(&ctx, table.as_str(), "REGISTER", before, location.location());
                }
                let registered = match registry::registration(&self.store, table).await? {
                    Some(now) if req.execute => now,
                    _ => RegisteredTable {
                        table: table.clone(),
                        location: location.location().to_owned(),
                        registered_at: tidemark_core::Timestamp::from_micros(0),
                        registered_by: ctx.principal.clone(),
                        identity: probe.identity,
                    },
                };
                Ok(pb::RegisterTableResponse {
                    table: Some(registered_to_pb(&registered)),
                    previous_location: previous
                        .map(|p| p.location)
                        .filter(|l| l != location.location())
                        .unwrap_or_default(),
                    earliest_snapshot: probe.range.map(|r| r.earliest),
                    latest_snapshot: probe.range.map(|r| r.latest),
                    executed: req.execute,
                    probe_error: probe.error,
                    warnings: probe.warnings,
                })
            })
            .await
    }

    async fn unregister_table(
        &self,
        request: Request<pb::UnregisterTableRequest>,
    ) -> Result<Response<pb::UnregisterTableResponse>, Status> {
        self.rpcs
            .handle("UnregisterTable", request, |ctx, req| async move {
                let was_registered = if req.execute {
                    let previous = registry::registration(&self.store, &req.table).await?;
                    let was = self.store.paimon().unregister_table(&req.table).await?;
                    if was {
                        let location = previous.map(|p| p.location).unwrap_or_default();
                        tidemark_store::audit::table_change(&ctx, req.table.as_str(), "UNREGISTER", &location, "");
                    }
                    was
                } else {
                    registry::registration(&self.store, &req.table).await?.is_some()
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
        self.rpcs
            .handle("ListTables", request, |ctx, _| async move {
                let tables = self.store.paimon().registered_tables().await?;
                Ok(pb::ListTablesResponse {
                    tables: tables
                        .iter()
                        .filter(|t| ctx.access().table(&t.table).is_ok())
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
        self.rpcs
            .handle("ImportConsumers", request, |ctx, req| async move {
                let Some(registered) = registry::registration(&self.store, &req.table).await? else {
                    let mut v = tidemark_core::validate::Violations::new();
                    v.add("table", "is not registered (RegisterTable first)");
                    return Err(request::invalid(v));
                };
                let outcomes =
                    registry::import_consumers(&self.store, &ctx, &req.table, &registered, req.execute).await?;
                let mut response = pb::ImportConsumersResponse {
                    executed: req.execute,
                    ..Default::default()
                };
                for outcome in outcomes {
                    match outcome {
                        ImportOutcome::Imported { key, next_snapshot } => {
                            response.imported.push(pb::ImportedConsumer {
                                consumer: Some(convert::key_to_pb(&key)),
                                next_snapshot,
                            })
                        }
                        ImportOutcome::Skipped(skipped) => response.skipped.push(skipped),
                    }
                }
                Ok(response)
            })
            .await
    }

    type ExportStateStream =
        std::pin::Pin<Box<dyn tokio_stream::Stream<Item = Result<pb::ExportStateResponse, Status>> + Send + 'static>>;

    async fn export_state(
        &self,
        request: Request<pb::ExportStateRequest>,
    ) -> Result<Response<Self::ExportStateStream>, Status> {
        // Each export holds a permit until its stream ends, however it ends.
        let Ok(permit) = std::sync::Arc::clone(&self.running_exports).try_acquire_owned() else {
            return Err(crate::status::too_many_exports(self.exports.max_concurrent));
        };
        let idle_timeout = self.exports.idle_timeout;
        self.rpcs
            .handle("ExportState", request, |ctx, req| async move {
                let (mut parts, task) = self.store.export_state(req.table.clone());
                // The head comes first: a database that cannot answer is an
                // error status, not a stream that breaks off.
                let Some(head) = parts.recv().await else {
                    task.await
                        .map_err(|e| tidemark_store::StoreError::Internal(format!("the export failed: {e}")))??;
                    return Err(tidemark_store::StoreError::Internal("the export sent nothing".into()));
                };
                // The snapshot is read to its end into the spool, ahead of
                // the client: its transaction never waits on the client.
                let spool = crate::spool::Spool::new(crate::spool::MEMORY_BOUND);
                tokio::spawn({
                    let spool = std::sync::Arc::clone(&spool);
                    let request_id = ctx.request_id.clone();
                    async move {
                        let mut writer = crate::state::Writer::default();
                        let mut next = Some(head);
                        while let Some(part) = next {
                            let lines = writer.lines(part, req.table.as_ref());
                            match spool.push(&pb::ExportStateResponse { lines }) {
                                Ok(true) => {}
                                // The client went away or stalled: dropping
                                // `parts` ends the snapshot's transaction.
                                Ok(false) => return,
                                Err(e) => {
                                    tracing::warn!(request_id, error = %e, "cannot spool an export");
                                    spool.finish(Err(Status::unavailable(format!(
                                        "the export cannot be spooled on this replica ({e}); check its temporary \
                                         directory (TMPDIR) and retry"
                                    ))));
                                    return;
                                }
                            }
                            next = parts.recv().await;
                        }
                        let outcome = match task.await {
                            Ok(Ok(())) => spool
                                .push(&pb::ExportStateResponse {
                                    lines: vec![writer.end()],
                                })
                                .map(drop)
                                .map_err(|e| Status::unavailable(format!("the export cannot be spooled: {e}"))),
                            // No trailer: whatever the client kept is
                            // refused by an import as cut short.
                            Ok(Err(e)) => Err(crate::status::store_status(e, &request_id)),
                            Err(e) => Err(Status::internal(format!("the export failed: {e}"))),
                        };
                        spool.finish(outcome);
                    }
                });
                let (sender, receiver) = tokio::sync::mpsc::channel(2);
                let stalled: std::sync::Arc<std::sync::Mutex<Option<Status>>> = std::sync::Arc::default();
                tokio::spawn({
                    let stalled = std::sync::Arc::clone(&stalled);
                    let request_id = ctx.request_id.clone();
                    async move {
                        let _permit = permit;
                        while let Some(item) = spool.next().await {
                            let last = item.is_err();
                            match tokio::time::timeout(idle_timeout, sender.send(item)).await {
                                Ok(Ok(())) if !last => {}
                                Ok(Ok(())) => return,
                                // The client went away.
                                Ok(Err(_)) => return spool.abandon(),
                                Err(_) => {
                                    tracing::warn!(request_id, ?idle_timeout, "export ended: its client took nothing");
                                    *stalled.lock().unwrap_or_else(std::sync::PoisonError::into_inner) =
                                        Some(crate::status::export_stalled(idle_timeout));
                                    return spool.abandon();
                                }
                            }
                        }
                    }
                });
                // After what was already queued, a stalled export ends with
                // its status (trailers reach the client once it reads).
                let tail = tokio_stream::iter(
                    std::iter::once_with(move || {
                        stalled.lock().unwrap_or_else(std::sync::PoisonError::into_inner).take()
                    })
                    .flatten()
                    .map(Err),
                );
                let stream: Self::ExportStateStream = Box::pin(tokio_stream::StreamExt::chain(
                    tokio_stream::wrappers::ReceiverStream::new(receiver),
                    tail,
                ));
                Ok(stream)
            })
            .await
    }

    async fn import_state(
        &self,
        request: Request<tonic::Streaming<pb::ImportStateRequest>>,
    ) -> Result<Response<pb::ImportStateResponse>, Status> {
        let (metadata, extensions, stream) = request.into_parts();
        let upload = gather_upload(stream).await;
        let request = Request::from_parts(metadata, extensions, upload);
        self.rpcs
            .handle("ImportState", request, |ctx, req| async move {
                let request::ImportState { parsed, settings } = req;
                let access = ctx.access();
                for table in parsed.file.tables() {
                    access.table(table)?;
                }
                if !settings.skip_registrations
                    && let Some(allowed) = &self.allowed_locations
                    && let Some(outside) = parsed.file.registrations.iter().find(|r| !allowed.allows(&r.location))
                {
                    return Err(tidemark_core::access::Denied::LocationNotAllowed {
                        principal: ctx.principal.clone(),
                        location: outside.location.clone(),
                        allowed: allowed.describe(),
                    }
                    .into());
                }
                let policy = tidemark_core::restore::ImportPolicy {
                    replace_existing: settings.replace_existing,
                    force: settings.force,
                };
                let report = self
                    .store
                    .import_state(
                        &ctx,
                        &parsed.file,
                        policy,
                        !settings.skip_registrations,
                        settings.execute,
                    )
                    .await?;
                Ok(import_response(&parsed, &report))
            })
            .await
    }
}

/// An ImportState call's messages, gathered with their bounds checked (the
/// parser reports a breach as INVALID_ARGUMENT, like any bad field).
async fn gather_upload(mut stream: tonic::Streaming<pb::ImportStateRequest>) -> request::ImportUpload {
    use tidemark_core::validate::FieldViolation;
    let mut settings = None;
    let mut lines = Vec::new();
    let mut first = true;
    loop {
        let message = match stream.message().await {
            Ok(Some(message)) => message,
            Ok(None) => break,
            Err(status) => {
                let why = FieldViolation::new("lines", format!("the upload failed: {}", status.message()));
                return request::ImportUpload {
                    settings: Err(why.clone()),
                    lines: Err(why),
                };
            }
        };
        match (first, message.settings) {
            (true, s) => settings = Some(s.unwrap_or_default()),
            (false, Some(_)) => {
                return request::ImportUpload {
                    settings: Err(FieldViolation::new(
                        "settings",
                        "only the first message may carry settings",
                    )),
                    lines: Ok(Vec::new()),
                };
            }
            (false, None) => {}
        }
        first = false;
        if let Some(long) = message.lines.iter().position(|l| l.len() > crate::state::MAX_LINE) {
            return request::ImportUpload {
                settings: Ok(settings.unwrap_or_default()),
                lines: Err(FieldViolation::new(
                    "lines",
                    format!(
                        "line {} is longer than {} bytes",
                        lines.len() + long + 1,
                        crate::state::MAX_LINE
                    ),
                )),
            };
        }
        lines.extend(message.lines);
        if lines.len() > crate::state::MAX_LINES {
            return request::ImportUpload {
                settings: Ok(settings.unwrap_or_default()),
                lines: Err(FieldViolation::new(
                    "lines",
                    format!("more than {} lines; split the export by table", crate::state::MAX_LINES),
                )),
            };
        }
    }
    request::ImportUpload {
        settings: Ok(settings.unwrap_or_default()),
        lines: Ok(lines),
    }
}

/// Most keys an import's answer lists.
const MAX_LISTED_KEYS: usize = 1000;

fn import_response(parsed: &crate::state::Parsed, report: &tidemark_store::ImportReport) -> pb::ImportStateResponse {
    use tidemark_core::restore::ConsumerOutcome;
    let mut response = pb::ImportStateResponse {
        executed: report.executed,
        exported_at: Some(convert::timestamp(parsed.exported_at)),
        exported_by_version: parsed.server_version.clone(),
        keys: report.keys.len() as i64,
        ..Default::default()
    };
    for (outcome, exported) in report.keys.iter().zip(&parsed.file.keys) {
        let file_next_snapshot = exported.consumer.map(|c| c.next_snapshot);
        let listed = match &outcome.result {
            Ok(done) => {
                let count = match done.consumer {
                    ConsumerOutcome::Created => &mut response.consumers_created,
                    ConsumerOutcome::Replaced => &mut response.consumers_replaced,
                    ConsumerOutcome::Same => &mut response.consumers_same,
                    ConsumerOutcome::Kept => &mut response.consumers_kept,
                    ConsumerOutcome::NotInFile => &mut 0,
                };
                *count += 1;
                response.epochs_raised += i64::from(done.new_epoch > done.old_epoch);
                response.keys_written += i64::from(done.changes_anything());
                (done.changes_anything() || done.consumer == ConsumerOutcome::Kept).then(|| pb::ImportedKey {
                    consumer: Some(convert::key_to_pb(&outcome.key)),
                    consumer_outcome: done.consumer.as_str().to_owned(),
                    old_next_snapshot: done.old_next,
                    new_next_snapshot: done.new_next,
                    old_epoch: done.old_epoch,
                    new_epoch: done.new_epoch,
                    revoked_lease: done.revoked.as_ref().map(|l| pb::RevokedLease {
                        lease_id: l.lease_id.to_string(),
                        epoch: l.epoch,
                        holder: l.holder.clone(),
                    }),
                    refused_reason: String::new(),
                    refused_message: String::new(),
                    file_next_snapshot,
                })
            }
            Err(why) => {
                response.keys_refused += 1;
                Some(pb::ImportedKey {
                    consumer: Some(convert::key_to_pb(&outcome.key)),
                    refused_reason: why.reason().to_owned(),
                    refused_message: why.to_string(),
                    file_next_snapshot,
                    ..Default::default()
                })
            }
        };
        if let Some(listed) = listed {
            if response.changes.len() < MAX_LISTED_KEYS {
                response.changes.push(listed);
            } else {
                response.changes_truncated = true;
            }
        }
    }
    let options_text = |o: &tidemark_core::TableOptions| {
        o.to_map()
            .into_iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect::<Vec<_>>()
            .join(",")
    };
    for o in &report.options {
        response.tables.push(pb::ImportedTableSetting {
            table: o.table.as_str().to_owned(),
            setting: "options".into(),
            outcome: o.outcome.as_str().to_owned(),
            before: o.before.as_ref().map(options_text).unwrap_or_default(),
            file: options_text(&o.file),
        });
    }
    for r in &report.registrations {
        response.tables.push(pb::ImportedTableSetting {
            table: r.table.as_str().to_owned(),
            setting: "registration".into(),
            outcome: r.outcome.as_str().to_owned(),
            before: r.before.clone().unwrap_or_default(),
            file: r.location.clone(),
        });
    }
    response
}
