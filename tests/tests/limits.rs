//! Oversized messages and fields are refused with clear errors before any
//! database work: the server here has a database that cannot be reached, so
//! a request that got as far as the database would answer UNAVAILABLE.

use std::sync::Arc;
use std::time::Duration;

use tidemark_client::{AdminClient, ApiError, CoordinatorClient};
use tidemark_e2e::{key, test_policy};
use tidemark_proto::v1 as pb;
use tidemark_server::ServerConfig;
use tidemark_store::{PostgresBackend, PostgresOptions, Store};
use tonic::Code;

async fn server_without_database() -> (String, tokio::sync::oneshot::Sender<()>) {
    let dead = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = dead.local_addr().unwrap().port();
    drop(dead);
    let backend = PostgresBackend::connect(
        &format!("postgres://nobody@127.0.0.1:{port}/none"),
        &PostgresOptions {
            acquire_timeout: Duration::from_millis(300),
            ..PostgresOptions::default()
        },
    )
    .unwrap();
    let store = Store::new(Arc::new(backend), test_policy());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let config = ServerConfig {
        max_message_bytes: 8 * 1024,
        sweep_interval: Duration::ZERO,
        ..ServerConfig::default()
    };
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    tokio::spawn(tidemark_server::serve(config, store, listener, async {
        let _ = stopped.await;
    }));
    (url, stop)
}

#[tokio::test]
async fn the_database_is_really_unreachable_here() {
    let (url, _stop) = server_without_database().await;
    let mut client = CoordinatorClient::connect(url).await.unwrap();
    let status = client
        .acquire_lease(pb::AcquireLeaseRequest {
            consumer: Some(key("db.t", "main", "c")),
            holder: "q".into(),
            ttl: None,
        })
        .await
        .unwrap_err();
    assert_eq!(
        status.code(),
        Code::Unavailable,
        "a valid request reaches the (dead) database"
    );
}

#[tokio::test]
async fn an_oversized_message_is_refused_without_database_work() {
    let (url, _stop) = server_without_database().await;
    let mut client = CoordinatorClient::connect(url).await.unwrap();
    let status = client
        .acquire_lease(pb::AcquireLeaseRequest {
            consumer: Some(key("db.t", "main", "c")),
            holder: "h".repeat(64 * 1024),
            ttl: None,
        })
        .await
        .unwrap_err();
    // Issue 34: tonic's own OUT_OF_RANGE carried no ErrorInfo and no hint;
    // the answer names the limit, the size received and the flag.
    let error = ApiError::from(status);
    assert_eq!(error.code, Code::ResourceExhausted, "{error:?}");
    assert_eq!(error.reason, "MESSAGE_TOO_LARGE", "{error:?}");
    assert_eq!(
        error.metadata.get("limit_bytes").map(String::as_str),
        Some("8192"),
        "{error:?}"
    );
    assert!(error.metadata.contains_key("received_bytes"), "{error:?}");
    assert!(error.message.contains("--max-message-bytes"), "{}", error.message);
}

#[tokio::test]
async fn oversized_fields_are_invalid_arguments_without_database_work() {
    let (url, _stop) = server_without_database().await;
    let mut coordinator = CoordinatorClient::connect(url.clone()).await.unwrap();
    let mut admin = AdminClient::connect(url).await.unwrap();
    let long = |n: usize| "x".repeat(n);
    let cases: Vec<(&str, Result<(), tonic::Status>)> = vec![
        (
            "holder",
            coordinator
                .acquire_lease(pb::AcquireLeaseRequest {
                    consumer: Some(key("db.t", "main", "c")),
                    holder: long(300),
                    ttl: None,
                })
                .await
                .map(drop),
        ),
        (
            "consumer.consumer_id",
            coordinator
                .acquire_lease(pb::AcquireLeaseRequest {
                    consumer: Some(key("db.t", "main", &long(200))),
                    holder: "q".into(),
                    ttl: None,
                })
                .await
                .map(drop),
        ),
        (
            "consumer.table",
            coordinator
                .get_recovery_position(tidemark_e2e::recovery_request(
                    &key(&format!("db.{}", long(300)), "main", "c"),
                    tidemark_e2e::range(1, 2),
                ))
                .await
                .map(drop),
        ),
        (
            "consumer.branch",
            admin
                .describe_consumer(pb::DescribeConsumerRequest {
                    consumer: Some(key("db.t", &long(300), "c")),
                    history_limit: 0,
                })
                .await
                .map(drop),
        ),
        (
            "consumer_id_prefix",
            admin
                .list_consumers(pb::ListConsumersRequest {
                    consumer_id_prefix: long(200),
                    ..Default::default()
                })
                .await
                .map(drop),
        ),
        (
            "page_size",
            admin
                .list_consumers(pb::ListConsumersRequest {
                    page_size: 5000,
                    ..Default::default()
                })
                .await
                .map(drop),
        ),
        (
            "including",
            admin
                .clear_consumers(pb::ClearConsumersRequest {
                    table: "db.t".into(),
                    including: long(2000),
                    ..Default::default()
                })
                .await
                .map(drop),
        ),
        (
            "reason",
            admin
                .revoke_lease(pb::RevokeLeaseRequest {
                    consumer: Some(key("db.t", "main", "c")),
                    reason: long(600),
                    execute: true,
                    expected_lease_id: None,
                })
                .await
                .map(drop),
        ),
        (
            "options[consumer.mode]",
            admin
                .set_table_options(pb::SetTableOptionsRequest {
                    table: "db.t".into(),
                    options: [("consumer.mode".to_owned(), long(4000))].into(),
                    execute: true,
                    ..Default::default()
                })
                .await
                .map(drop),
        ),
        (
            "limit",
            admin
                .expire_consumers(pb::ExpireConsumersRequest {
                    limit: 1_000_000,
                    ..Default::default()
                })
                .await
                .map(drop),
        ),
    ];
    for (field, result) in cases {
        let err = ApiError::from(result.unwrap_err());
        assert_eq!(err.code, Code::InvalidArgument, "{field}: {err:?}");
        assert!(err.fields().contains(&field), "{field}: {:?}", err.fields());
    }
}
