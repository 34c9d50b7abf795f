//! Rust client SDK for tidemark.
//!
//! Re-exports the generated `tidemark.v1` clients and adds [`ApiError`], which
//! exposes a failed call's `google.rpc.ErrorInfo` reason and details and its
//! `BadRequest` field violations.

use std::collections::HashMap;

pub use tidemark_proto::v1 as proto;
pub use tidemark_proto::v1::coordinator_client::CoordinatorClient;
use tonic::transport::{Channel, Endpoint};
use tonic_types::StatusExt;

/// Connects a Coordinator client to `endpoint` (e.g. `http://127.0.0.1:50051`).
pub async fn connect_coordinator(endpoint: impl Into<String>) -> Result<CoordinatorClient<Channel>, ConnectError> {
    let endpoint = Endpoint::from_shared(endpoint.into()).map_err(|e| ConnectError(e.to_string()))?;
    let channel = endpoint.connect().await.map_err(|e| ConnectError(e.to_string()))?;
    Ok(CoordinatorClient::new(channel))
}

/// The server could not be reached.
#[derive(Debug, thiserror::Error)]
#[error("cannot connect to tidemark: {0}")]
pub struct ConnectError(String);

/// A failed call, with tidemark's error details decoded.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{code:?} {reason}: {message}")]
pub struct ApiError {
    /// The gRPC code.
    pub code: tonic::Code,
    /// The `ErrorInfo` reason (e.g. `LEASE_NOT_HELD`); empty when the status
    /// carries none (e.g. a transport error).
    pub reason: String,
    /// The `ErrorInfo` domain ("tidemark").
    pub domain: String,
    /// The `ErrorInfo` metadata (e.g. `current_epoch`, `holder`).
    pub metadata: HashMap<String, String>,
    /// `BadRequest` field violations: (field path, description).
    pub field_violations: Vec<(String, String)>,
    /// The status message.
    pub message: String,
}

impl ApiError {
    /// Whether the error's reason is `reason`.
    pub fn is(&self, reason: &str) -> bool {
        self.reason == reason
    }

    /// The fields named by `BadRequest` violations.
    pub fn fields(&self) -> Vec<&str> {
        self.field_violations.iter().map(|(f, _)| f.as_str()).collect()
    }
}

impl From<tonic::Status> for ApiError {
    fn from(status: tonic::Status) -> Self {
        let details = status.get_error_details();
        let (reason, domain, metadata) = details
            .error_info()
            .map(|i| (i.reason.clone(), i.domain.clone(), i.metadata.clone()))
            .unwrap_or_default();
        let field_violations = details
            .bad_request()
            .map(|b| {
                b.field_violations
                    .iter()
                    .map(|v| (v.field.clone(), v.description.clone()))
                    .collect()
            })
            .unwrap_or_default();
        Self {
            code: status.code(),
            reason,
            domain,
            metadata,
            field_violations,
            message: status.message().to_owned(),
        }
    }
}
