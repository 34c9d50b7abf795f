//! Valid requests for every method: the starting points of mutation. They
//! name a consumer the harness keeps leased and committed, so mutations
//! reach the deep paths (epoch checks, decision table, recovery planning),
//! not only the first validation.

use prost::Message;
use tidemark_proto::v1 as pb;

/// Every unary method of the API, by full gRPC path, except RegisterTable:
/// an executed registration makes the server write consumer files wherever
/// the (mutated) location points, which a fuzzer must not do to its host.
pub(crate) const METHODS: [&str; 20] = [
    "/tidemark.v1.Coordinator/AcquireLease",
    "/tidemark.v1.Coordinator/RenewLease",
    "/tidemark.v1.Coordinator/ReleaseLease",
    "/tidemark.v1.Coordinator/CommitBatch",
    "/tidemark.v1.Coordinator/GetRecoveryPosition",
    "/tidemark.v1.Retention/GetRetentionFence",
    "/tidemark.v1.Retention/ExplainRetention",
    "/tidemark.v1.Admin/ListConsumers",
    "/tidemark.v1.Admin/DescribeConsumer",
    "/tidemark.v1.Admin/ResetConsumer",
    "/tidemark.v1.Admin/DeleteConsumer",
    "/tidemark.v1.Admin/ClearConsumers",
    "/tidemark.v1.Admin/RevokeLease",
    "/tidemark.v1.Admin/ListHistory",
    "/tidemark.v1.Admin/GetTableOptions",
    "/tidemark.v1.Admin/SetTableOptions",
    "/tidemark.v1.Admin/ExpireConsumers",
    "/tidemark.v1.Admin/UnregisterTable",
    "/tidemark.v1.Admin/ListTables",
    "/tidemark.v1.Admin/ImportConsumers",
];

/// The short name of a method path ("Coordinator.CommitBatch").
pub(crate) fn short(path: &str) -> String {
    path.trim_start_matches("/tidemark.v1.").replace('/', ".")
}

fn key(id: &str) -> Option<pb::ConsumerKey> {
    Some(pb::ConsumerKey {
        table: "db.fuzz".into(),
        branch: "main".into(),
        consumer_id: id.into(),
    })
}

fn offset(snapshot_id: i64, index: i64, total: Option<i64>) -> Option<pb::Offset> {
    Some(pb::Offset {
        snapshot_id,
        index,
        scan_snapshot: false,
        total_splits: total,
    })
}

fn ttl(seconds: i64) -> Option<prost_types::Duration> {
    Some(prost_types::Duration { seconds, nanos: 0 })
}

/// The leases the live seeds use: `committer` on consumer c1 (commits and
/// recovery), `spare` on c2 (renewed and released by the seeds, so c1's
/// lease survives them).
#[derive(Debug, Clone)]
pub(crate) struct Leases {
    pub committer: (String, i64),
    pub spare: (String, i64),
    /// A fresh batch id for commits, so mutated ends reach the decision
    /// table instead of stopping at DUPLICATE / BATCH_CONFLICT.
    pub batch: i64,
}

/// Valid encodings of each method's requests, using `leases` for the
/// lease-bound calls.
pub(crate) fn seeds(method: &str, leases: &Leases) -> Vec<Vec<u8>> {
    let (lease, epoch) = leases.committer.clone();
    let (spare, spare_epoch) = leases.spare.clone();
    let name = method.rsplit('/').next().unwrap_or_default();
    let messages: Vec<Vec<u8>> = match name {
        "AcquireLease" => vec![
            pb::AcquireLeaseRequest {
                consumer: key("c2"),
                holder: "fuzz-2".into(),
                ttl: ttl(30),
            }
            .encode_to_vec(),
            pb::AcquireLeaseRequest {
                consumer: key("c4"),
                holder: "fuzz".into(),
                ttl: None,
            }
            .encode_to_vec(),
        ],
        "RenewLease" => vec![
            pb::RenewLeaseRequest {
                lease_id: spare.clone(),
                epoch: spare_epoch,
                ttl: ttl(3600),
            }
            .encode_to_vec(),
        ],
        "ReleaseLease" => vec![
            pb::ReleaseLeaseRequest {
                lease_id: spare,
                epoch: spare_epoch,
            }
            .encode_to_vec(),
        ],
        "CommitBatch" => vec![
            pb::CommitBatchRequest {
                lease_id: lease.clone(),
                epoch,
                batch_id: leases.batch,
                end: offset(7, 1, Some(3)),
                latest_snapshot: Some(9),
            }
            .encode_to_vec(),
            pb::CommitBatchRequest {
                lease_id: lease,
                epoch,
                batch_id: 6,
                end: offset(7, 2, Some(3)),
                latest_snapshot: None,
            }
            .encode_to_vec(),
        ],
        "GetRecoveryPosition" => vec![
            pb::GetRecoveryPositionRequest {
                consumer: key("c1"),
                startup: Some(pb::StartupOptions {
                    mode: pb::StartupMode::FromSnapshot as i32,
                    snapshot_id: 3,
                }),
                table: Some(pb::SnapshotRange {
                    earliest_snapshot: 2,
                    latest_snapshot: 9,
                    earliest_changelog: Some(1),
                    changelog_decoupled: true,
                }),
                checkpoint: Some(pb::LoggedBatch {
                    start: offset(6, 2, Some(3)),
                    end: offset(7, 1, Some(3)),
                }),
                on_expired: pb::OnExpired::ClampToEarliest as i32,
                lease_id: Some(lease),
                ..Default::default()
            }
            .encode_to_vec(),
        ],
        "GetRetentionFence" => vec![
            pb::GetRetentionFenceRequest {
                table: "db.fuzz".into(),
                branch: "main".into(),
                changelog_decoupled: true,
            }
            .encode_to_vec(),
        ],
        "ExplainRetention" => vec![
            pb::ExplainRetentionRequest {
                table: "db.fuzz".into(),
                branch: "main".into(),
                ..Default::default()
            }
            .encode_to_vec(),
        ],
        "ListConsumers" => vec![
            pb::ListConsumersRequest {
                table: "db.fuzz".into(),
                consumer_id_prefix: "c".into(),
                page_size: 2,
                ..Default::default()
            }
            .encode_to_vec(),
        ],
        "DescribeConsumer" => vec![
            pb::DescribeConsumerRequest {
                consumer: key("c1"),
                ..Default::default()
            }
            .encode_to_vec(),
        ],
        "ResetConsumer" => vec![
            pb::ResetConsumerRequest {
                consumer: key("c3"),
                next_snapshot: 4,
                expected_next_snapshot: Some(2),
                force: true,
                execute: true,
                expected_lease_id: Some(String::new()),
                reason: String::new(),
            }
            .encode_to_vec(),
        ],
        "DeleteConsumer" => vec![
            pb::DeleteConsumerRequest {
                consumer: key("c3"),
                force: true,
                execute: true,
                ..Default::default()
            }
            .encode_to_vec(),
        ],
        "ClearConsumers" => vec![
            pb::ClearConsumersRequest {
                table: "db.fuzz".into(),
                branch: "main".into(),
                including: "c[0-9]+".into(),
                excluding: "c1".into(),
                force: false,
                execute: false,
            }
            .encode_to_vec(),
        ],
        "RevokeLease" => vec![
            pb::RevokeLeaseRequest {
                consumer: key("c2"),
                reason: "fuzz".into(),
                execute: false,
                expected_lease_id: None,
            }
            .encode_to_vec(),
        ],
        "ListHistory" => vec![
            pb::ListHistoryRequest {
                consumer: key("c1"),
                page_size: 3,
                ..Default::default()
            }
            .encode_to_vec(),
            pb::ListHistoryRequest {
                table: "db.fuzz".into(),
                branch: "main".into(),
                ..Default::default()
            }
            .encode_to_vec(),
        ],
        "GetTableOptions" => vec![
            pb::GetTableOptionsRequest {
                table: "db.fuzz".into(),
            }
            .encode_to_vec(),
        ],
        "SetTableOptions" => vec![
            pb::SetTableOptionsRequest {
                table: "db.fuzz".into(),
                options: [("consumer.expiration-time".to_owned(), "1 d".to_owned())].into(),
                unset: vec!["consumer.mode".into()],
                execute: false,
            }
            .encode_to_vec(),
        ],
        "ExpireConsumers" => vec![
            pb::ExpireConsumersRequest {
                table: "db.fuzz".into(),
                limit: 10,
                ..Default::default()
            }
            .encode_to_vec(),
        ],
        "UnregisterTable" => {
            vec![
                pb::UnregisterTableRequest {
                    table: "db.fuzz".into(),
                    execute: false,
                }
                .encode_to_vec(),
            ]
        }
        "ListTables" => vec![pb::ListTablesRequest {}.encode_to_vec()],
        "ImportConsumers" => {
            vec![
                pb::ImportConsumersRequest {
                    table: "db.fuzz".into(),
                    execute: false,
                }
                .encode_to_vec(),
            ]
        }
        other => panic!("no seeds for {other}"),
    };
    messages
}
