//! The `tidemark.v1.Admin` service: the operator API. Every mutating call is
//! plan-only unless `execute: true`. One file per call, by entity
//! (`consumers/`, `leases/`, `tables/`, `state/`), each in the same shape:
//! the request as parsed (every field checked), one call to the
//! application, the reply; this file only routes the trait's methods.

use std::time::Duration;

use tidemark_proto::v1 as pb;
use tidemark_proto::v1::admin_server::Admin;
use tidemark_service::App;
use tonic::{Request, Response, Status};

mod consumers;
mod leases;
mod state;
mod tables;

use crate::call::Rpcs;

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

/// A table's consumer options as a reply's map.
fn options_map(options: &tidemark_core::TableOptions) -> std::collections::HashMap<String, String> {
    options.to_map().into_iter().collect()
}

#[tonic::async_trait]
impl Admin for AdminService {
    async fn list_consumers(
        &self,
        request: Request<pb::ListConsumersRequest>,
    ) -> Result<Response<pb::ListConsumersResponse>, Status> {
        consumers::list::handle(self, request).await
    }

    async fn describe_consumer(
        &self,
        request: Request<pb::DescribeConsumerRequest>,
    ) -> Result<Response<pb::DescribeConsumerResponse>, Status> {
        consumers::describe::handle(self, request).await
    }

    async fn reset_consumer(
        &self,
        request: Request<pb::ResetConsumerRequest>,
    ) -> Result<Response<pb::ResetConsumerResponse>, Status> {
        consumers::reset::handle(self, request).await
    }

    async fn delete_consumer(
        &self,
        request: Request<pb::DeleteConsumerRequest>,
    ) -> Result<Response<pb::DeleteConsumerResponse>, Status> {
        consumers::delete::handle(self, request).await
    }

    async fn clear_consumers(
        &self,
        request: Request<pb::ClearConsumersRequest>,
    ) -> Result<Response<pb::ClearConsumersResponse>, Status> {
        consumers::clear::handle(self, request).await
    }

    async fn reset_consumers(
        &self,
        request: Request<pb::ResetConsumersRequest>,
    ) -> Result<Response<pb::ResetConsumersResponse>, Status> {
        consumers::reset_many::handle(self, request).await
    }

    async fn revoke_lease(
        &self,
        request: Request<pb::RevokeLeaseRequest>,
    ) -> Result<Response<pb::RevokeLeaseResponse>, Status> {
        leases::revoke::handle(self, request).await
    }

    async fn revoke_leases(
        &self,
        request: Request<pb::RevokeLeasesRequest>,
    ) -> Result<Response<pb::RevokeLeasesResponse>, Status> {
        leases::revoke_many::handle(self, request).await
    }

    async fn list_history(
        &self,
        request: Request<pb::ListHistoryRequest>,
    ) -> Result<Response<pb::ListHistoryResponse>, Status> {
        consumers::history::handle(self, request).await
    }

    async fn get_table_options(
        &self,
        request: Request<pb::GetTableOptionsRequest>,
    ) -> Result<Response<pb::GetTableOptionsResponse>, Status> {
        tables::get_options::handle(self, request).await
    }

    async fn set_table_options(
        &self,
        request: Request<pb::SetTableOptionsRequest>,
    ) -> Result<Response<pb::SetTableOptionsResponse>, Status> {
        tables::set_options::handle(self, request).await
    }

    async fn expire_consumers(
        &self,
        request: Request<pb::ExpireConsumersRequest>,
    ) -> Result<Response<pb::ExpireConsumersResponse>, Status> {
        consumers::expire::handle(self, request).await
    }

    async fn register_table(
        &self,
        request: Request<pb::RegisterTableRequest>,
    ) -> Result<Response<pb::RegisterTableResponse>, Status> {
        tables::register::handle(self, request).await
    }

    async fn unregister_table(
        &self,
        request: Request<pb::UnregisterTableRequest>,
    ) -> Result<Response<pb::UnregisterTableResponse>, Status> {
        tables::unregister::handle(self, request).await
    }

    async fn list_tables(
        &self,
        request: Request<pb::ListTablesRequest>,
    ) -> Result<Response<pb::ListTablesResponse>, Status> {
        tables::list::handle(self, request).await
    }

    async fn import_consumers(
        &self,
        request: Request<pb::ImportConsumersRequest>,
    ) -> Result<Response<pb::ImportConsumersResponse>, Status> {
        tables::import_consumers::handle(self, request).await
    }

    type ExportStateStream = state::export::ExportStream;

    async fn export_state(
        &self,
        request: Request<pb::ExportStateRequest>,
    ) -> Result<Response<Self::ExportStateStream>, Status> {
        state::export::handle(self, request).await
    }

    async fn import_state(
        &self,
        request: Request<tonic::Streaming<pb::ImportStateRequest>>,
    ) -> Result<Response<pb::ImportStateResponse>, Status> {
        state::import::handle(self, request).await
    }
}
