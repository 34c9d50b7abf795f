//! The console over raw HTTP/1.1 (the browser tests are in
//! clients/python/tests/test_console.py): what a script with a bearer token
//! sees, bad input, the session cookie's attributes, posts from other
//! origins, and the console over TLS when the gRPC port asks for client
//! certificates (browsers have none to give).

use std::net::SocketAddr;
use std::sync::Arc;

use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair};
use tidemark_e2e::credentials::entry;
use tidemark_e2e::{Kind, TestServer, channel_with_token, key, test_policy};
use tidemark_proto::v1 as pb;
use tidemark_server::auth::{AuthConfig, SharedAuth};
use tidemark_server::{ServerConfig, TlsSettings};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio_rustls::rustls;
use tokio_rustls::rustls::pki_types::pem::PemObject;

const OPERATOR: &str = "tdm_console_operator";
const VIEWER: &str = "tdm_console_viewer";
const WORKER: &str = "tdm_console_worker";

struct Answer {
    status: u16,
    headers: Vec<(String, String)>,
    body: String,
}

impl Answer {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

async fn exchange<S: AsyncRead + AsyncWrite + Unpin>(mut stream: S, request: String) -> Answer {
    // A server that turns the request away may close before it is read.
    let _ = stream.write_all(request.as_bytes()).await;
    let mut raw = Vec::new();
    let _ = stream.read_to_end(&mut raw).await;
    let text = String::from_utf8_lossy(&raw).into_owned();
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let mut lines = head.lines();
    let status = lines
        .next()
        .unwrap_or_default()
        .split(' ')
        .nth(1)
        .unwrap_or("0")
        .parse()
        .unwrap();
    let headers = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(n, v)| (n.trim().to_owned(), v.trim().to_owned()))
        .collect();
    Answer {
        status,
        headers,
        body: body.to_owned(),
    }
}

fn request(method: &str, path: &str, addr: SocketAddr, extra: &[(&str, &str)], body: &str) -> String {
    let mut text = format!("{method} {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n");
    for (name, value) in extra {
        text.push_str(&format!("{name}: {value}\r\n"));
    }
    if !body.is_empty() {
        text.push_str(&format!(
            "Content-Type: application/x-www-form-urlencoded\r\nContent-Length: {}\r\n",
            body.len()
        ));
    }
    text.push_str("\r\n");
    text.push_str(body);
    text
}

async fn get(addr: SocketAddr, path: &str, token: Option<&str>) -> Answer {
    let bearer = token.map(|t| format!("Bearer {t}"));
    let headers: Vec<(&str, &str)> = bearer.iter().map(|b| ("Authorization", b.as_str())).collect();
    exchange(
        TcpStream::connect(addr).await.unwrap(),
        request("GET", path, addr, &headers, ""),
    )
    .await
}

async fn authenticated_server() -> TestServer {
    let text = [
        entry("ops", OPERATOR, &["operator"], &[]),
        entry("dbview", VIEWER, &["viewer"], &["db.*"]),
        entry("etl", WORKER, &["worker"], &[]),
    ]
    .concat();
    let config = ServerConfig {
        auth: SharedAuth::new(AuthConfig::parse(&text, "test").unwrap()),
        ..ServerConfig::default()
    };
    let server = TestServer::start_with_console(Kind::Sqlite, test_policy(), config).await;
    let mut admin = pb::admin_client::AdminClient::new(channel_with_token(&server.url(), Some(OPERATOR)).await);
    for (table, id, next) in [
        ("db.orders", "etl-1", 5),
        ("db.orders", "etl-2", 3),
        ("other.secret", "x-1", 9),
    ] {
        admin
            .reset_consumer(pb::ResetConsumerRequest {
                consumer: Some(key(table, "main", id)),
                next_snapshot: next,
                execute: true,
                ..Default::default()
            })
            .await
            .unwrap();
    }
    server
}

tidemark_e2e::on_both_backends!(a_page_costs_a_few_database_calls_whatever_the_consumers);

/// The console's pages cost a few database calls each, counted by the
/// store itself (on SQLite as on Postgres, where pg_stat_statements counts
/// the same in `crates/tidemark/tests/bounded.rs`): a table page of 2,000
/// consumers reads them in pages, every mirror state in one call; the
/// tables page reads per-branch aggregates and a fence per branch; and
/// viewers within one refresh interval share a read.
async fn a_page_costs_a_few_database_calls_whatever_the_consumers(kind: Kind) {
    const CONSUMERS: usize = 3_000;
    // The background jobs off: the count is the pages' alone.
    let config = ServerConfig {
        mirror_interval: std::time::Duration::ZERO,
        sweep_interval: std::time::Duration::ZERO,
        gauge_interval: std::time::Duration::ZERO,
        readiness_interval: std::time::Duration::from_secs(3600),
        ..ServerConfig::default()
    };
    let server = TestServer::start_with_console(kind, test_policy(), config).await;
    let console = server.console_addr.unwrap();
    let dir = tempfile::tempdir().unwrap();
    tidemark_e2e::paimon_table_dir(dir.path(), 9, 1_000, "");
    std::fs::create_dir_all(dir.path().join("consumer")).unwrap();
    for i in 0..CONSUMERS {
        let file = dir.path().join(format!("consumer/consumer-c{i:04}"));
        std::fs::write(file, r#"{"nextSnapshot":5}"#).unwrap();
    }
    let mut admin = pb::admin_client::AdminClient::new(server.channel().await);
    admin
        .register_table(pb::RegisterTableRequest {
            table: "db.orders".into(),
            location: dir.path().display().to_string(),
            execute: true,
        })
        .await
        .unwrap();
    let imported = admin
        .import_consumers(pb::ImportConsumersRequest {
            table: "db.orders".into(),
            execute: true,
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(imported.imported.len(), CONSUMERS);
    // The table page's sixth call reads the branch's highest reported
    // latest snapshot, which every lag counts to (issue 55: lags are
    // current); it is shared for a refresh interval, so the tables page
    // after it reads it from memory.
    for (path, budget) in [("/table?name=db.orders&branch=main", 5 + 1), ("/", 5 + 1)] {
        let before = server.store.calls_made();
        let page = get(console, path, None).await;
        assert_eq!(page.status, 200, "{}", page.body);
        let calls = server.store.calls_made() - before;
        // Ten more viewers within the refresh interval: no more calls.
        for _ in 0..10 {
            assert_eq!(get(console, path, None).await.status, 200);
        }
        let shared = server.store.calls_made() - before;
        eprintln!("{kind:?} {path}, {CONSUMERS} consumers: {calls} calls, {shared} with ten more viewers");
        assert!(
            calls <= budget,
            "{path} cost {calls} calls, over its budget of {budget}"
        );
        assert_eq!(shared, calls, "{path}: viewers within a refresh share one read");
    }
}

#[tokio::test]
async fn a_bearer_token_sees_its_scope_and_nothing_else() {
    let server = authenticated_server().await;
    let console = server.console_addr.unwrap();
    let page = get(console, "/", Some(VIEWER)).await;
    assert_eq!(page.status, 200, "{}", page.body);
    assert!(page.body.contains("db.orders") && !page.body.contains("other.secret"));
    let policy = page.header("content-security-policy").unwrap();
    assert!(
        policy.contains("script-src 'self'") && !policy.contains("unsafe-inline"),
        "{policy}"
    );
    assert_eq!(page.header("x-content-type-options"), Some("nosniff"));
    let hidden = get(console, "/table?name=other.secret", Some(VIEWER)).await;
    assert_eq!(hidden.status, 404);
    assert!(!hidden.body.contains("x-1"));
    let hidden = get(console, "/consumer?table=other.secret&id=x-1", Some(VIEWER)).await;
    assert_eq!(hidden.status, 404);
    let fence = get(console, "/fence?table=other.secret", Some(VIEWER)).await;
    assert_eq!(fence.status, 404);
    // The operator sees every table.
    assert!(get(console, "/", Some(OPERATOR)).await.body.contains("other.secret"));
    // Workers and unknown tokens get nothing.
    assert_eq!(get(console, "/", Some(WORKER)).await.status, 403);
    assert_eq!(get(console, "/", Some("tdm_nope")).await.status, 401);
    let anonymous = get(console, "/table?name=db.orders", None).await;
    assert_eq!((anonymous.status, anonymous.header("location")), (303, Some("/signin")));
    assert!(!anonymous.body.contains("etl-1"));
}

#[tokio::test]
async fn bad_input_names_the_field() {
    let server = authenticated_server().await;
    let console = server.console_addr.unwrap();
    for (path, field) in [
        ("/table?name=nodot", "name"),
        ("/table?name=db.orders&branch=a%2Fb", "branch"),
        ("/consumer?table=db.orders&id=..", "consumer_id"),
        ("/fence?table=db.orders&snapshot=-3", "snapshot"),
    ] {
        let page = get(console, path, Some(VIEWER)).await;
        assert_eq!(page.status, 400, "{path}: {}", page.body);
        assert!(page.body.contains(&format!("{field}:")), "{path}: {}", page.body);
    }
}

#[tokio::test]
async fn sign_in_sets_a_strict_cookie_and_refuses_other_origins() {
    let server = authenticated_server().await;
    let console = server.console_addr.unwrap();
    let body = format!("token={VIEWER}");
    let foreign = request("POST", "/signin", console, &[("Origin", "http://evil.example")], &body);
    let refused = exchange(TcpStream::connect(console).await.unwrap(), foreign).await;
    assert_eq!(refused.status, 403);
    assert!(refused.header("set-cookie").is_none());
    let origin = format!("http://{console}");
    let own = request("POST", "/signin", console, &[("Origin", &origin)], &body);
    let signed = exchange(TcpStream::connect(console).await.unwrap(), own).await;
    assert_eq!(signed.status, 303, "{}", signed.body);
    let cookie = signed.header("set-cookie").unwrap().to_owned();
    for attribute in ["Secure", "HttpOnly", "SameSite=Strict", "Max-Age="] {
        assert!(cookie.contains(attribute), "{cookie}");
    }
    let session = cookie.split(';').next().unwrap().to_owned();
    let page = exchange(
        TcpStream::connect(console).await.unwrap(),
        request("GET", "/", console, &[("Cookie", &session)], ""),
    )
    .await;
    assert_eq!(page.status, 200);
    assert!(page.body.contains("db.orders") && page.body.contains("dbview"));
    // Signing out ends the session on the server, not only in the browser.
    exchange(
        TcpStream::connect(console).await.unwrap(),
        request(
            "POST",
            "/signout",
            console,
            &[("Cookie", &session), ("Origin", &origin)],
            "",
        ),
    )
    .await;
    let after = exchange(
        TcpStream::connect(console).await.unwrap(),
        request("GET", "/", console, &[("Cookie", &session)], ""),
    )
    .await;
    assert_eq!(after.status, 303);
    // A worker's token opens no session.
    let worker = request(
        "POST",
        "/signin",
        console,
        &[("Origin", &origin)],
        &format!("token={WORKER}"),
    );
    let refused = exchange(TcpStream::connect(console).await.unwrap(), worker).await;
    assert_eq!(refused.status, 403);
    assert!(refused.header("set-cookie").is_none());
}

#[tokio::test]
async fn with_mutual_tls_the_console_speaks_https_without_a_client_certificate() {
    let mut ca_params = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca_params.distinguished_name.push(DnType::CommonName, "console test CA");
    let ca_key = KeyPair::generate().unwrap();
    let ca_pem = ca_params.self_signed(&ca_key).unwrap().pem();
    let issuer = Issuer::new(ca_params, ca_key);
    let server_key = KeyPair::generate().unwrap();
    let server_cert = CertificateParams::new(vec!["localhost".to_owned()])
        .unwrap()
        .signed_by(&server_key, &issuer)
        .unwrap();
    let auth = [entry("dbview", VIEWER, &["viewer"], &["db.*"])].concat();
    let config = ServerConfig {
        tls: Some(TlsSettings {
            cert_pem: server_cert.pem().into_bytes(),
            key_pem: server_key.serialize_pem().into_bytes(),
            client_ca_pem: Some(ca_pem.clone().into_bytes()),
        }),
        auth: SharedAuth::new(AuthConfig::parse(&auth, "test").unwrap()),
        ..ServerConfig::default()
    };
    let server = TestServer::start_with_console(Kind::Sqlite, test_policy(), config).await;
    let console = server.console_addr.unwrap();

    let mut roots = rustls::RootCertStore::empty();
    for cert in rustls::pki_types::CertificateDer::pem_slice_iter(ca_pem.as_bytes()) {
        roots.add(cert.unwrap()).unwrap();
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let client = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth();
    let connector = tokio_rustls::TlsConnector::from(Arc::new(client));
    let name = rustls::pki_types::ServerName::try_from("localhost").unwrap();
    let stream = connector
        .connect(name, TcpStream::connect(console).await.unwrap())
        .await
        .expect("the console's TLS handshake needs no client certificate");
    let bearer = format!("Bearer {VIEWER}");
    let page = exchange(stream, request("GET", "/", console, &[("Authorization", &bearer)], "")).await;
    assert_eq!(page.status, 200, "{}", page.body);
    // Plain HTTP gets no page from a TLS console.
    let plain = tokio::time::timeout(std::time::Duration::from_secs(15), get(console, "/", Some(VIEWER)))
        .await
        .expect("a plaintext request is turned away, not left hanging");
    assert_ne!(plain.status, 200);
}
