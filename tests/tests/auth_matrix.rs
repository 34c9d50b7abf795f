//! The authorization matrix: every RPC × every identity (no token, a wrong
//! token, each role, an out-of-scope table, another worker's lease), on both
//! backends. Each call is either allowed (OK) or refused with the exact code
//! and reason — and a refusal changes nothing.

use std::sync::Arc;

use tidemark_client::{AdminClient, ApiError, AuthChannel, CoordinatorClient, RetentionClient};
use tidemark_e2e::credentials::entry;
use tidemark_e2e::{Kind, TestServer, channel_with_token, key, offset, on_both_backends, range, test_policy};
use tidemark_proto::v1 as pb;
use tidemark_server::ServerConfig;
use tidemark_server::auth::AuthConfig;
use tonic::Code;

on_both_backends!(
    every_rpc_for_every_identity,
    a_worker_may_only_use_its_own_leases,
    health_and_reflection_stay_open
);

const WORKER: &str = "tdm_worker_0123456789";
const WORKER2: &str = "tdm_worker2_0123456789";
const MAINTAINER: &str = "tdm_maintainer_0123456789";
const VIEWER: &str = "tdm_viewer_0123456789";
const OPERATOR: &str = "tdm_operator_0123456789";

fn auth() -> Arc<AuthConfig> {
    let text = [
        entry("etl", WORKER, &["worker"], &["db.*"]),
        entry("etl-2", WORKER2, &["worker"], &["db.*"]),
        entry("expirer", MAINTAINER, &["maintainer"], &["db.*"]),
        entry("dashboards", VIEWER, &["viewer"], &[]),
        entry("alice", OPERATOR, &["operator"], &[]),
    ]
    .join("\n");
    Arc::new(AuthConfig::parse(&text, "test").unwrap())
}

async fn secured(kind: Kind) -> TestServer {
    let config = ServerConfig {
        auth: auth().into(),
        ..ServerConfig::default()
    };
    TestServer::start_with(kind, test_policy(), config).await
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Who {
    Nobody,
    WrongToken,
    Worker,
    WorkerOutOfScope,
    Maintainer,
    Viewer,
    Operator,
}

impl Who {
    fn token(self) -> Option<&'static str> {
        match self {
            Who::Nobody => None,
            Who::WrongToken => Some("tdm_not_a_real_token"),
            Who::Worker | Who::WorkerOutOfScope => Some(WORKER),
            Who::Maintainer => Some(MAINTAINER),
            Who::Viewer => Some(VIEWER),
            Who::Operator => Some(OPERATOR),
        }
    }

    /// The table the call names.
    fn table(self) -> &'static str {
        match self {
            Who::WorkerOutOfScope => "other.t",
            _ => "db.t",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Rpc {
    AcquireLease,
    RenewLease,
    ReleaseLease,
    CommitBatch,
    GetRecoveryPosition,
    GetRetentionFence,
    ExplainRetention,
    ListConsumers,
    DescribeConsumer,
    ListHistory,
    GetTableOptions,
    ResetConsumer,
    DeleteConsumer,
    ClearConsumers,
    RevokeLease,
    SetTableOptions,
    ExpireConsumers,
}

const RPCS: [Rpc; 17] = [
    Rpc::AcquireLease,
    Rpc::RenewLease,
    Rpc::ReleaseLease,
    Rpc::CommitBatch,
    Rpc::GetRecoveryPosition,
    Rpc::GetRetentionFence,
    Rpc::ExplainRetention,
    Rpc::ListConsumers,
    Rpc::DescribeConsumer,
    Rpc::ListHistory,
    Rpc::GetTableOptions,
    Rpc::ResetConsumer,
    Rpc::DeleteConsumer,
    Rpc::ClearConsumers,
    Rpc::RevokeLease,
    Rpc::SetTableOptions,
    Rpc::ExpireConsumers,
];

/// The expected answer: `None` = OK, else (code, reason).
fn expected(rpc: Rpc, who: Who) -> Option<(Code, &'static str)> {
    use Rpc::*;
    let coordinator = matches!(
        rpc,
        AcquireLease | RenewLease | ReleaseLease | CommitBatch | GetRecoveryPosition
    );
    let retention = matches!(rpc, GetRetentionFence | ExplainRetention);
    let admin_read = matches!(rpc, ListConsumers | DescribeConsumer | ListHistory | GetTableOptions);
    let denied = Some((Code::PermissionDenied, "ROLE_NOT_ALLOWED"));
    match who {
        Who::Nobody => Some((Code::Unauthenticated, "MISSING_CREDENTIALS")),
        Who::WrongToken => Some((Code::Unauthenticated, "UNKNOWN_CREDENTIALS")),
        Who::Operator => None,
        Who::Worker if coordinator => None,
        Who::WorkerOutOfScope if coordinator => Some((Code::PermissionDenied, "TABLE_NOT_IN_SCOPE")),
        Who::Maintainer if retention => None,
        // SPEC §7: viewers read the admin state and the Retention reads.
        Who::Viewer if admin_read || retention => None,
        _ => denied,
    }
}

/// Makes the call `rpc` as `who`, on a key of its own.
async fn call(server: &TestServer, rpc: Rpc, who: Who) -> Result<(), tonic::Status> {
    let channel = channel_with_token(&server.url(), who.token()).await;
    let operator = channel_with_token(&server.url(), Some(OPERATOR)).await;
    let id = format!("{rpc:?}-{who:?}").to_lowercase();
    let k = key(who.table(), "main", &id);
    // Setup, as the operator (lease-based calls need a lease on the key,
    // acquired by the worker when the table is in its scope).
    let lease = if matches!(rpc, Rpc::RenewLease | Rpc::ReleaseLease | Rpc::CommitBatch) {
        let owner = if who.table() == "db.t" {
            channel_with_token(&server.url(), Some(WORKER)).await
        } else {
            operator.clone()
        };
        Some(acquire(owner, &k).await)
    } else {
        None
    };
    AdminClient::new(operator)
        .reset_consumer(pb::ResetConsumerRequest {
            consumer: Some(key(who.table(), "main", &format!("{id}-existing"))),
            next_snapshot: 3,
            execute: true,
            ..Default::default()
        })
        .await?;

    let table = who.table().to_owned();
    let mut coordinator = CoordinatorClient::new(channel.clone());
    let mut retention = RetentionClient::new(channel.clone());
    let mut admin = AdminClient::new(channel);
    let lease_id = lease.as_ref().map(|l| l.lease_id.clone()).unwrap_or_default();
    let epoch = lease.as_ref().map_or(1, |l| l.epoch);
    match rpc {
        Rpc::AcquireLease => coordinator
            .acquire_lease(pb::AcquireLeaseRequest {
                consumer: Some(k),
                holder: "q".into(),
                ttl: None,
            })
            .await
            .map(drop),
        Rpc::RenewLease => coordinator
            .renew_lease(pb::RenewLeaseRequest {
                lease_id,
                epoch,
                ttl: None,
            })
            .await
            .map(drop),
        Rpc::ReleaseLease => coordinator
            .release_lease(pb::ReleaseLeaseRequest { lease_id, epoch })
            .await
            .map(drop),
        Rpc::CommitBatch => coordinator
            .commit_batch(pb::CommitBatchRequest {
                lease_id,
                epoch,
                batch_id: 0,
                end: Some(offset(4, 0, false, Some(1))),
                latest_snapshot: None,
            })
            .await
            .map(drop),
        Rpc::GetRecoveryPosition => coordinator
            .get_recovery_position(tidemark_e2e::recovery_request(&k, range(1, 9)))
            .await
            .map(drop),
        Rpc::GetRetentionFence => retention
            .get_retention_fence(pb::GetRetentionFenceRequest {
                table,
                ..Default::default()
            })
            .await
            .map(drop),
        Rpc::ExplainRetention => retention
            .explain_retention(pb::ExplainRetentionRequest {
                table,
                ..Default::default()
            })
            .await
            .map(drop),
        Rpc::ListConsumers => admin
            .list_consumers(pb::ListConsumersRequest {
                table,
                ..Default::default()
            })
            .await
            .map(drop),
        Rpc::DescribeConsumer => admin
            .describe_consumer(pb::DescribeConsumerRequest {
                consumer: Some(key(who.table(), "main", &format!("{id}-existing"))),
                history_limit: 0,
            })
            .await
            .map(drop),
        Rpc::ListHistory => admin
            .list_history(pb::ListHistoryRequest {
                table,
                ..Default::default()
            })
            .await
            .map(drop),
        Rpc::GetTableOptions => admin
            .get_table_options(pb::GetTableOptionsRequest { table })
            .await
            .map(drop),
        Rpc::ResetConsumer => admin
            .reset_consumer(pb::ResetConsumerRequest {
                consumer: Some(k),
                next_snapshot: 7,
                execute: true,
                ..Default::default()
            })
            .await
            .map(drop),
        Rpc::DeleteConsumer => admin
            .delete_consumer(pb::DeleteConsumerRequest {
                consumer: Some(key(who.table(), "main", &format!("{id}-existing"))),
                execute: true,
                ..Default::default()
            })
            .await
            .map(drop),
        Rpc::ClearConsumers => admin
            .clear_consumers(pb::ClearConsumersRequest {
                table,
                including: format!("{id}-existing"),
                execute: true,
                ..Default::default()
            })
            .await
            .map(drop),
        Rpc::RevokeLease => admin
            .revoke_lease(pb::RevokeLeaseRequest {
                consumer: Some(k),
                reason: "matrix".into(),
                execute: true,
                expected_lease_id: None,
            })
            .await
            .map(drop),
        Rpc::SetTableOptions => admin
            .set_table_options(pb::SetTableOptionsRequest {
                table,
                options: [("consumer.mode".to_owned(), "at-least-once".to_owned())].into(),
                execute: true,
                ..Default::default()
            })
            .await
            .map(drop),
        Rpc::ExpireConsumers => admin
            .expire_consumers(pb::ExpireConsumersRequest {
                table,
                execute: true,
                ..Default::default()
            })
            .await
            .map(drop),
    }
}

async fn acquire(channel: AuthChannel, k: &pb::ConsumerKey) -> pb::Lease {
    CoordinatorClient::new(channel)
        .acquire_lease(pb::AcquireLeaseRequest {
            consumer: Some(k.clone()),
            holder: "owner".into(),
            ttl: None,
        })
        .await
        .expect("setup acquire")
        .into_inner()
        .lease
        .unwrap()
}

async fn every_rpc_for_every_identity(kind: Kind) {
    let server = secured(kind).await;
    let identities = [
        Who::Nobody,
        Who::WrongToken,
        Who::Worker,
        Who::WorkerOutOfScope,
        Who::Maintainer,
        Who::Viewer,
        Who::Operator,
    ];
    let mut failures = Vec::new();
    for rpc in RPCS {
        for who in identities {
            let result = call(&server, rpc, who).await;
            let want = expected(rpc, who);
            match (result, want) {
                (Ok(()), None) => {}
                (Err(status), Some((code, reason))) => {
                    let err = ApiError::from(status);
                    if (err.code, err.reason.as_str()) != (code, reason) {
                        failures.push(format!(
                            "{rpc:?} as {who:?}: expected {code:?}/{reason}, got {:?}/{} ({})",
                            err.code, err.reason, err.message
                        ));
                    }
                }
                (Ok(()), Some((code, reason))) => {
                    failures.push(format!("{rpc:?} as {who:?}: expected {code:?}/{reason}, got OK"))
                }
                (Err(status), None) => failures.push(format!("{rpc:?} as {who:?}: expected OK, got {status:?}")),
            }
            if want.is_some() {
                // Only the setup may have written: repeating the denied call
                // must leave the database exactly as it is.
                let after_setup = server.fingerprint().await;
                let again = call_without_setup(&server, rpc, who).await;
                assert!(again.is_err(), "{rpc:?} as {who:?} succeeded on retry");
                assert_eq!(
                    server.fingerprint().await,
                    after_setup,
                    "{rpc:?} as {who:?} changed the database although refused"
                );
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// Repeats a refused call without its setup writes.
async fn call_without_setup(server: &TestServer, rpc: Rpc, who: Who) -> Result<(), tonic::Status> {
    let channel = channel_with_token(&server.url(), who.token()).await;
    let id = format!("{rpc:?}-{who:?}").to_lowercase();
    let k = key(who.table(), "main", &id);
    let table = who.table().to_owned();
    let mut coordinator = CoordinatorClient::new(channel.clone());
    let mut retention = RetentionClient::new(channel.clone());
    let mut admin = AdminClient::new(channel);
    // The key's current lease (set up by the first call), if any.
    let lease = server.stored(&k).await.0.and_then(|s| s.lease);
    let lease_id = lease.as_ref().map(|l| l.lease_id.to_string()).unwrap_or_default();
    let epoch = lease.as_ref().map_or(1, |l| l.epoch);
    match rpc {
        Rpc::AcquireLease => coordinator
            .acquire_lease(pb::AcquireLeaseRequest {
                consumer: Some(k),
                holder: "q".into(),
                ttl: None,
            })
            .await
            .map(drop),
        Rpc::RenewLease => coordinator
            .renew_lease(pb::RenewLeaseRequest {
                lease_id,
                epoch,
                ttl: None,
            })
            .await
            .map(drop),
        Rpc::ReleaseLease => coordinator
            .release_lease(pb::ReleaseLeaseRequest { lease_id, epoch })
            .await
            .map(drop),
        Rpc::CommitBatch => coordinator
            .commit_batch(pb::CommitBatchRequest {
                lease_id,
                epoch,
                batch_id: 1,
                end: Some(offset(5, 0, false, Some(1))),
                latest_snapshot: None,
            })
            .await
            .map(drop),
        Rpc::GetRecoveryPosition => coordinator
            .get_recovery_position(tidemark_e2e::recovery_request(&k, range(1, 9)))
            .await
            .map(drop),
        Rpc::GetRetentionFence => retention
            .get_retention_fence(pb::GetRetentionFenceRequest {
                table,
                ..Default::default()
            })
            .await
            .map(drop),
        Rpc::ExplainRetention => retention
            .explain_retention(pb::ExplainRetentionRequest {
                table,
                ..Default::default()
            })
            .await
            .map(drop),
        Rpc::ListConsumers | Rpc::ListHistory | Rpc::GetTableOptions | Rpc::DescribeConsumer => admin
            .list_consumers(pb::ListConsumersRequest {
                table,
                ..Default::default()
            })
            .await
            .map(drop),
        Rpc::ResetConsumer => admin
            .reset_consumer(pb::ResetConsumerRequest {
                consumer: Some(k),
                next_snapshot: 8,
                execute: true,
                ..Default::default()
            })
            .await
            .map(drop),
        Rpc::DeleteConsumer | Rpc::ClearConsumers => admin
            .clear_consumers(pb::ClearConsumersRequest {
                table,
                execute: true,
                force: true,
                ..Default::default()
            })
            .await
            .map(drop),
        Rpc::RevokeLease => admin
            .revoke_lease(pb::RevokeLeaseRequest {
                consumer: Some(k),
                reason: "again".into(),
                execute: true,
                expected_lease_id: None,
            })
            .await
            .map(drop),
        Rpc::SetTableOptions => admin
            .set_table_options(pb::SetTableOptionsRequest {
                table,
                options: [("consumer.expiration-time".to_owned(), "1 s".to_owned())].into(),
                execute: true,
                ..Default::default()
            })
            .await
            .map(drop),
        Rpc::ExpireConsumers => admin
            .expire_consumers(pb::ExpireConsumersRequest {
                execute: true,
                ..Default::default()
            })
            .await
            .map(drop),
    }
}

async fn a_worker_may_only_use_its_own_leases(kind: Kind) {
    let server = secured(kind).await;
    let mine = channel_with_token(&server.url(), Some(WORKER)).await;
    let theirs = channel_with_token(&server.url(), Some(WORKER2)).await;
    let k = key("db.t", "main", "owned");
    let lease = acquire(mine.clone(), &k).await;
    let before = server.fingerprint().await;
    let mut other = CoordinatorClient::new(theirs.clone());
    let err = ApiError::from(
        other
            .commit_batch(pb::CommitBatchRequest {
                lease_id: lease.lease_id.clone(),
                epoch: lease.epoch,
                batch_id: 0,
                end: Some(offset(4, 0, false, Some(1))),
                latest_snapshot: None,
            })
            .await
            .unwrap_err(),
    );
    assert_eq!(
        (err.code, err.reason.as_str()),
        (Code::PermissionDenied, "LEASE_NOT_OWNED")
    );
    for result in [
        other
            .renew_lease(pb::RenewLeaseRequest {
                lease_id: lease.lease_id.clone(),
                epoch: lease.epoch,
                ttl: None,
            })
            .await
            .map(drop),
        other
            .release_lease(pb::ReleaseLeaseRequest {
                lease_id: lease.lease_id.clone(),
                epoch: lease.epoch,
            })
            .await
            .map(drop),
    ] {
        assert_eq!(ApiError::from(result.unwrap_err()).reason, "LEASE_NOT_OWNED");
    }
    // Knowing the holder string is not enough to take the lease over.
    let err = ApiError::from(
        other
            .acquire_lease(pb::AcquireLeaseRequest {
                consumer: Some(k.clone()),
                holder: "owner".into(),
                ttl: None,
            })
            .await
            .unwrap_err(),
    );
    assert_eq!(err.reason, "LEASE_HELD");
    assert_eq!(server.fingerprint().await, before);
    // The owner still can; the history names the principal.
    CoordinatorClient::new(mine)
        .commit_batch(pb::CommitBatchRequest {
            lease_id: lease.lease_id,
            epoch: lease.epoch,
            batch_id: 0,
            end: Some(offset(4, 0, false, Some(1))),
            latest_snapshot: None,
        })
        .await
        .unwrap();
    let (_, history) = server.stored(&k).await;
    assert!(history.iter().all(|h| h.principal == "etl"), "{history:?}");
}

async fn health_and_reflection_stay_open(kind: Kind) {
    let server = secured(kind).await;
    let channel = server.channel().await;
    let mut health = tonic_health::pb::health_client::HealthClient::new(channel);
    let status = health
        .check(tonic_health::pb::HealthCheckRequest { service: String::new() })
        .await
        .expect("health needs no token")
        .into_inner();
    assert_eq!(
        status.status(),
        tonic_health::pb::health_check_response::ServingStatus::Serving
    );
}
