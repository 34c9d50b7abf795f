//! The `tidemark.v1.Retention` service: fences for maintenance jobs.

use std::time::Duration;

use tidemark_proto::v1 as pb;
use tidemark_proto::v1::retention_server::Retention;
use tidemark_service::App;
use tonic::{Request, Response, Status};

use crate::call::Rpcs;
use crate::convert;

/// Retention fences over the application.
#[derive(Debug, Clone)]
pub struct RetentionService {
    app: App,
    rpcs: Rpcs,
}

impl RetentionService {
    /// The service over `app`.
    pub fn new(app: App, request_timeout: Duration) -> Self {
        Self {
            rpcs: Rpcs::new("Retention", request_timeout, app.unavailable_signal()),
            app,
        }
    }
}

impl RetentionService {
    /// The latest snapshot the holders' lags count to; not read when
    /// nothing holds the branch (there is no lag to show).
    async fn latest_for_holders(
        &self,
        table: &tidemark_core::TableName,
        branch: &tidemark_core::BranchName,
        held: bool,
    ) -> Option<i64> {
        match held {
            true => self.app.latest_now(table, branch).await,
            false => None,
        }
    }

    /// Whether the table is one tidemark knows: a table something holds
    /// is, without a read; only an empty answer asks the store, so an
    /// expiration job's calls on a table in use cost nothing more.
    async fn seen_unless_held(
        &self,
        ctx: &tidemark_service::store::CallContext,
        table: &tidemark_core::TableName,
        held: bool,
    ) -> tidemark_service::TableSeen {
        match held {
            true => tidemark_service::TableSeen {
                known: true,
                did_you_mean: String::new(),
            },
            false => self.app.table_seen(ctx, table).await,
        }
    }
}

#[tonic::async_trait]
impl Retention for RetentionService {
    async fn get_retention_fence(
        &self,
        request: Request<pb::GetRetentionFenceRequest>,
    ) -> Result<Response<pb::GetRetentionFenceResponse>, Status> {
        self.rpcs
            .handle("GetRetentionFence", request, |ctx, req| async move {
                let (table, branch) = (&req.table, &req.branch);
                let report = self
                    .app
                    .fence(table, branch, req.changelog_decoupled, req.limit)
                    .await?;
                let held = !(report.snapshot_holders.is_empty() && report.changelog_holders.is_empty());
                let latest = self.latest_for_holders(table, branch, held).await;
                let seen = self.seen_unless_held(&ctx, table, held).await;
                let holder = |h| convert::retention_holder(h, latest);
                Ok(pb::GetRetentionFenceResponse {
                    snapshot_fence: report.fences.snapshot,
                    changelog_fence: report.fences.changelog,
                    snapshot_fence_holders: report.snapshot_holders.iter().map(holder).collect(),
                    changelog_fence_holders: report.changelog_holders.iter().map(holder).collect(),
                    changelog_only: report.fences.changelog_only,
                    evaluated_at: Some(convert::timestamp(report.now)),
                    known: Some(seen.known),
                    did_you_mean: seen.did_you_mean,
                })
            })
            .await
    }

    async fn explain_retention(
        &self,
        request: Request<pb::ExplainRetentionRequest>,
    ) -> Result<Response<pb::ExplainRetentionResponse>, Status> {
        self.rpcs
            .handle("ExplainRetention", request, |ctx, req| async move {
                let (table, branch) = (&req.table, &req.branch);
                let explained = self
                    .app
                    .explain_retention(table, branch, req.changelog_decoupled, req.limit)
                    .await?;
                let held = !explained.holders.is_empty();
                let latest = self.latest_for_holders(table, branch, held).await;
                let seen = self.seen_unless_held(&ctx, table, held).await;
                let report = &explained.fences;
                Ok(pb::ExplainRetentionResponse {
                    snapshot_fence: report.fences.snapshot,
                    changelog_fence: report.fences.changelog,
                    changelog_only: report.fences.changelog_only,
                    holders: explained
                        .holders
                        .iter()
                        .map(|h| convert::retention_holder(h, latest))
                        .collect(),
                    truncated: explained.truncated,
                    table_options: report.options.to_map().into_iter().collect(),
                    evaluated_at: Some(convert::timestamp(report.now)),
                    known: Some(seen.known),
                    did_you_mean: seen.did_you_mean,
                })
            })
            .await
    }
}
