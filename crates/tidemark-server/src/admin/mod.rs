//! The `tidemark.v1.Admin` service: the operator API. Every mutating call is
//! plan-only unless `execute: true`. Each handler parses (the `request`
//! module), makes one call to the application (or, for a call that is one
//! store operation, to the store), and builds the reply.

use std::time::Duration;

use tidemark_proto::v1 as pb;
use tidemark_proto::v1::admin_server::Admin;
use tidemark_service::store::RegisteredTable;
use tidemark_service::{App, ImportOutcome};
use tonic::{Request, Response, Status};

mod export;
mod import;

use crate::call::Rpcs;
use crate::convert;
use crate::request;

/// The operator API over the application.
#[derive(Debug, Clone)]
pub struct AdminService {
    app: App,
    rpcs: Rpcs,
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
    /// The service over `app`.
    pub fn new(app: App, request_timeout: Duration) -> Self {
        Self {
            rpcs: Rpcs::new("Admin", request_timeout, app.unavailable_signal()),
            app,
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
fn split_bulk(outcomes: &[tidemark_service::store::BulkChange]) -> (Vec<pb::ConsumerChange>, Vec<pb::SkippedConsumer>) {
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
                    .app
                    .list_consumers(&req.filter, req.after.as_ref(), req.page_size)
                    .await?;
                Ok(pb::ListConsumersResponse {
                    consumers: page
                        .consumers
                        .iter()
                        .map(|c| convert::consumer_info(&c.view, c.lag.as_ref()))
                        .collect(),
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
                let described = self.app.describe(&req.key, req.history_limit).await?;
                let consumer = &described.consumer;
                Ok(pb::DescribeConsumerResponse {
                    info: Some(convert::consumer_info(&consumer.view, consumer.lag.as_ref())),
                    table_options: options_map(&consumer.view.options),
                    recent_history: described.history.iter().map(convert::history_entry).collect(),
                    mirror: described.mirror.as_ref().map(convert::mirror_info),
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
                    .app
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
                    .app
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
                    .app
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
                let (reset, table) = self
                    .app
                    .reset_consumers(
                        &ctx,
                        &req.table,
                        &req.branch,
                        &req.selector,
                        req.target,
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
            let planned = self.app.revoke_lease(&ctx, &req.key, &req.reason, req.execute).await?;
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
                let filter = tidemark_service::store::KeyFilter {
                    table: req.table.clone(),
                    branch: req.branch.clone(),
                    consumer_id_prefix: None,
                };
                let (revoked, left) = self
                    .app
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
                let entries = self.app.list_history(&req.filter, req.before, req.page_size).await?;
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
                let stored = self.app.table_options(&req.table).await?;
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
                    .app
                    .set_table_options(&ctx, &req.table, &req.set, &req.unset, req.execute)
                    .await?;
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
                    .app
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
                let registration = self.app.register(&ctx, &req.table, &req.location, req.execute).await?;
                Ok(pb::RegisterTableResponse {
                    table: Some(registered_to_pb(&registration.table)),
                    previous_location: registration.previous_location.unwrap_or_default(),
                    earliest_snapshot: registration.range.map(|r| r.earliest),
                    latest_snapshot: registration.range.map(|r| r.latest),
                    executed: req.execute,
                    probe_error: registration.probe_error,
                    warnings: registration.warnings,
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
                let was_registered = self.app.unregister(&ctx, &req.table, req.execute).await?;
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
                let tables = self.app.list_tables().await?;
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
                let outcomes = self.app.import_consumers(&ctx, &req.table, req.execute).await?;
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
                        ImportOutcome::Skipped(skipped) => response.skipped.push(pb::ImportSkipped {
                            branch: skipped.branch,
                            consumer_id: skipped.consumer_id,
                            reason: skipped.reason,
                            message: skipped.message,
                        }),
                    }
                }
                Ok(response)
            })
            .await
    }

    type ExportStateStream = export::ExportStream;

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
                let mut export = self.app.export(req.table);
                // The head comes first: a database that cannot answer is an
                // error status, not a stream that breaks off.
                let head = match export.next().await {
                    Some(head) => head?,
                    None => {
                        return Err(tidemark_service::store::StoreError::Internal(
                            "the export sent nothing".into(),
                        ));
                    }
                };
                Ok(export::stream(
                    export,
                    head,
                    permit,
                    idle_timeout,
                    ctx.request_id.clone(),
                ))
            })
            .await
    }

    async fn import_state(
        &self,
        request: Request<tonic::Streaming<pb::ImportStateRequest>>,
    ) -> Result<Response<pb::ImportStateResponse>, Status> {
        let (metadata, extensions, stream) = request.into_parts();
        let upload = import::gather_upload(stream).await;
        let request = Request::from_parts(metadata, extensions, upload);
        self.rpcs
            .handle("ImportState", request, |ctx, req| async move {
                let request::ImportState { parsed, settings } = req;
                let report = self.app.import_state(&ctx, &parsed, settings).await?;
                Ok(import::response(&parsed, &report))
            })
            .await
    }
}
