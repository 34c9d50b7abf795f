//! libFuzzer over every request decoder and handler: the first byte picks
//! a method, the rest is decoded as its protobuf request (prost, as tonic
//! does) and, when it decodes, handed to the real service over an SQLite
//! store. Any panic is a crash; so is an INTERNAL/UNKNOWN answer, an
//! INVALID_ARGUMENT without ErrorInfo, or a message quoting SQL.
//! RegisterTable runs as a plan only (an executed one writes files where
//! the input says).

#![no_main]

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use libfuzzer_sys::fuzz_target;
use prost::Message;
use tidemark_proto::v1 as pb;
use tidemark_proto::v1::admin_server::Admin;
use tidemark_proto::v1::coordinator_server::Coordinator;
use tidemark_proto::v1::retention_server::Retention;
use tidemark_server::{AdminService, CoordinatorService, RetentionService};
use tidemark_store::{SqliteBackend, Store, SystemClock};
use tonic::{Code, Request, Status};
use tonic_types::StatusExt;

struct Services {
    runtime: tokio::runtime::Runtime,
    coordinator: CoordinatorService,
    retention: RetentionService,
    admin: AdminService,
    _dir: tempfile::TempDir,
}

fn services() -> &'static Services {
    static SERVICES: OnceLock<Services> = OnceLock::new();
    SERVICES.get_or_init(|| {
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        let dir = tempfile::tempdir().unwrap();
        let url = format!("sqlite://{}", dir.path().join("fuzz.db").display());
        let store = runtime.block_on(async {
            let backend = SqliteBackend::open(&url, Arc::new(SystemClock)).await.unwrap();
            tidemark_store::Backend::migrate(&backend).await.unwrap();
            Store::new(Arc::new(backend), tidemark_core::LeasePolicy::default())
        });
        let timeout = Duration::from_secs(10);
        // One application, as a server has: the handlers share its caches.
        let app = tidemark_service::App::new(store.clone());
        Services {
            coordinator: CoordinatorService::new(app.clone(), timeout),
            retention: RetentionService::new(store, timeout),
            admin: AdminService::new(app, timeout),
            runtime,
            _dir: dir,
        }
    })
}

fn check(answer: Result<(), Status>) {
    let Err(status) = answer else { return };
    let message = status.message();
    assert!(
        !["SELECT ", "INSERT ", "UPDATE ", "sqlx", "SQLSTATE"].iter().any(|s| message.contains(s)),
        "SQL in a message: {message}"
    );
    assert!(
        !matches!(status.code(), Code::Internal | Code::Unknown),
        "{:?}: {message}",
        status.code()
    );
    if status.code() == Code::InvalidArgument {
        let info = status.get_details_error_info().expect("INVALID_ARGUMENT carries ErrorInfo");
        assert_eq!((info.reason.as_str(), info.domain.as_str()), ("INVALID_ARGUMENT", "tidemark"));
    }
}

macro_rules! call {
    ($s:expr, $service:ident, $method:ident, $ty:ty, $bytes:expr) => {{
        if let Ok(request) = <$ty>::decode($bytes) {
            let answer = $s.runtime.block_on($s.$service.$method(Request::new(request)));
            check(answer.map(|_| ()));
        }
    }};
}

fuzz_target!(|data: &[u8]| {
    let Some((&selector, bytes)) = data.split_first() else { return };
    let s = services();
    match selector % 21 {
        0 => call!(s, coordinator, acquire_lease, pb::AcquireLeaseRequest, bytes),
        1 => call!(s, coordinator, renew_lease, pb::RenewLeaseRequest, bytes),
        2 => call!(s, coordinator, release_lease, pb::ReleaseLeaseRequest, bytes),
        3 => call!(s, coordinator, commit_batch, pb::CommitBatchRequest, bytes),
        4 => call!(s, coordinator, get_recovery_position, pb::GetRecoveryPositionRequest, bytes),
        5 => call!(s, retention, get_retention_fence, pb::GetRetentionFenceRequest, bytes),
        6 => call!(s, retention, explain_retention, pb::ExplainRetentionRequest, bytes),
        7 => call!(s, admin, list_consumers, pb::ListConsumersRequest, bytes),
        8 => call!(s, admin, describe_consumer, pb::DescribeConsumerRequest, bytes),
        9 => call!(s, admin, reset_consumer, pb::ResetConsumerRequest, bytes),
        10 => call!(s, admin, delete_consumer, pb::DeleteConsumerRequest, bytes),
        11 => call!(s, admin, clear_consumers, pb::ClearConsumersRequest, bytes),
        12 => call!(s, admin, revoke_lease, pb::RevokeLeaseRequest, bytes),
        13 => call!(s, admin, list_history, pb::ListHistoryRequest, bytes),
        14 => call!(s, admin, get_table_options, pb::GetTableOptionsRequest, bytes),
        15 => call!(s, admin, set_table_options, pb::SetTableOptionsRequest, bytes),
        16 => call!(s, admin, expire_consumers, pb::ExpireConsumersRequest, bytes),
        17 => {
            if let Ok(mut request) = pb::RegisterTableRequest::decode(bytes) {
                request.execute = false;
                let answer = s.runtime.block_on(s.admin.register_table(Request::new(request)));
                check(answer.map(|_| ()));
            }
        }
        18 => call!(s, admin, unregister_table, pb::UnregisterTableRequest, bytes),
        19 => call!(s, admin, list_tables, pb::ListTablesRequest, bytes),
        _ => call!(s, admin, import_consumers, pb::ImportConsumersRequest, bytes),
    }
});
