//! Credentials and certificates change without a restart (issue 19): a
//! revoked token is refused within seconds, a renewed certificate is served
//! to new connections within seconds, a file caught half-written never takes
//! effect, and calls made all along with credentials that stay valid never
//! fail.

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair};
use tidemark_client::{ClientOptions, ClientTls, CoordinatorClient};
use tidemark_e2e::credentials::entry;
use tidemark_e2e::{Kind, TestServer, channel_with_token, key, range, recovery_request, test_policy};
use tidemark_proto::v1 as pb;
use tidemark_server::auth::SharedAuth;
use tidemark_server::reload::{AuthSource, ReloadSettings, TlsFiles};
use tidemark_server::{ServerConfig, TlsSettings};
use tokio_rustls::rustls;

const INTERVAL: Duration = Duration::from_millis(600);
/// How long a prefix stays in the file before the rest is written: a sixth
/// of an interval, so a writer stalled five times that long still cannot be
/// read twice.
const PREFIX_HELD: Duration = Duration::from_millis(100);

/// Replaces `path` the way Kubernetes and careful tools do: write aside,
/// then rename over it.
fn replace_file(path: &Path, text: &[u8]) {
    let aside = path.with_extension("new");
    std::fs::write(&aside, text).unwrap();
    std::fs::rename(&aside, path).unwrap();
}

/// Calls `acquire_lease` with `token` in a loop until `stop`; counts calls
/// and failures.
fn keep_calling(
    url: String,
    token: &'static str,
    stop: Arc<AtomicBool>,
) -> tokio::task::JoinHandle<(u64, Vec<String>)> {
    tokio::spawn(async move {
        let mut client = CoordinatorClient::new(channel_with_token(&url, Some(token)).await);
        let (mut calls, mut failures) = (0, Vec::new());
        while !stop.load(Ordering::Relaxed) {
            let result = client
                .get_recovery_position(recovery_request(&key("db.t", "main", token), range(1, 5)))
                .await;
            calls += 1;
            if let Err(status) = result {
                failures.push(format!("{:?}: {}", status.code(), status.message()));
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        (calls, failures)
    })
}

async fn code_for(url: &str, token: &str) -> tonic::Code {
    let mut client = CoordinatorClient::new(channel_with_token(url, Some(token)).await);
    match client
        .acquire_lease(pb::AcquireLeaseRequest {
            consumer: Some(key("db.t", "main", &format!("probe-{}", uuid::Uuid::new_v4()))),
            holder: "probe".to_owned(),
            ttl: None,
        })
        .await
    {
        Ok(_) => tonic::Code::Ok,
        Err(status) => status.code(),
    }
}

/// Polls until `token` gets `want`, or panics after `limit`; returns how long
/// it took.
async fn until_code(url: &str, token: &str, want: tonic::Code, limit: Duration) -> Duration {
    let started = Instant::now();
    loop {
        let got = code_for(url, token).await;
        if got == want {
            return started.elapsed();
        }
        assert!(
            started.elapsed() < limit,
            "{token} still gets {got:?} after {limit:?}, want {want:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_revoked_token_is_refused_within_seconds_and_a_half_written_file_never_counts() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("auth.toml");
    let keep = entry("keep", "tdm_keep", &["worker"], &[]);
    let revoked = entry("revoked", "tdm_revoked", &["worker"], &[]);
    let added = entry("added", "tdm_added", &["worker"], &[]);
    std::fs::write(&file, format!("{keep}\n{revoked}")).unwrap();
    let source = AuthSource {
        file: Some(file.clone()),
        ..AuthSource::default()
    };
    let config = ServerConfig {
        auth: SharedAuth::new(source.load().unwrap()),
        reload: Some(ReloadSettings {
            interval: INTERVAL,
            trigger: Arc::default(),
            auth: Some(source),
            tls: None,
        }),
        ..ServerConfig::default()
    };
    let server = TestServer::start_with(Kind::Sqlite, test_policy(), config).await;
    let url = server.url();
    assert_eq!(code_for(&url, "tdm_revoked").await, tonic::Code::Ok);
    assert_eq!(code_for(&url, "tdm_added").await, tonic::Code::Unauthenticated);

    let stop = Arc::new(AtomicBool::new(false));
    let keeper = keep_calling(url.clone(), "tdm_keep", Arc::clone(&stop));

    // Revoke one token, add another.
    replace_file(&file, format!("{keep}\n{added}").as_bytes());
    let took = until_code(
        &url,
        "tdm_revoked",
        tonic::Code::Unauthenticated,
        Duration::from_secs(10),
    )
    .await;
    eprintln!("revoked token refused {took:?} after the file changed");
    assert_eq!(code_for(&url, "tdm_added").await, tonic::Code::Ok);
    let adder = keep_calling(url.clone(), "tdm_added", Arc::clone(&stop));

    // A file caught half-written, in place: it does not parse, so nothing
    // changes, however long it stays.
    let full = format!("{keep}\n{added}\n{}", entry("later", "tdm_later", &["worker"], &[]));
    std::fs::write(&file, &full.as_bytes()[..full.len() - 30]).unwrap();
    tokio::time::sleep(INTERVAL * 6).await;
    assert_eq!(
        code_for(&url, "tdm_added").await,
        tonic::Code::Ok,
        "the old credentials stay"
    );
    assert_eq!(code_for(&url, "tdm_revoked").await, tonic::Code::Unauthenticated);

    // A valid prefix written in place and completed PREFIX_HELD later: the
    // prefix (which would revoke `added`) is read at most once, so it never
    // takes effect; the finished file does. Six rounds, each starting a
    // sixth of the watcher's interval later in its cycle than the one before
    // (a round lasts three intervals and a sixth), so the prefixes' windows
    // cover the whole cycle: taking a file at its first read would take one
    // of them (and `added` would be refused). Between rounds the finished
    // file stays long enough to be taken.
    for _ in 0..6 {
        std::fs::write(&file, keep.as_bytes()).unwrap();
        tokio::time::sleep(PREFIX_HELD).await;
        std::fs::write(&file, full.as_bytes()).unwrap();
        tokio::time::sleep(INTERVAL * 3).await;
    }
    until_code(&url, "tdm_later", tonic::Code::Ok, Duration::from_secs(10)).await;

    // Emptying the file would switch authentication off: refused.
    replace_file(&file, b"");
    tokio::time::sleep(INTERVAL * 4).await;
    assert_eq!(code_for(&url, "tdm_nobody").await, tonic::Code::Unauthenticated);

    stop.store(true, Ordering::Relaxed);
    for (name, task) in [("keep", keeper), ("added", adder)] {
        let (calls, failures) = task.await.unwrap();
        assert!(calls > 20, "{name} made only {calls} calls");
        assert!(
            failures.is_empty(),
            "{name}: {} of {calls} calls failed, first: {:?}",
            failures.len(),
            &failures[..failures.len().min(5)]
        );
    }
    server.stop().await;
}

struct Ca {
    issuer: Issuer<'static, KeyPair>,
    pem: String,
}

fn ca() -> Ca {
    let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params.distinguished_name.push(DnType::CommonName, "tidemark reload CA");
    let key = KeyPair::generate().unwrap();
    let pem = params.self_signed(&key).unwrap().pem();
    Ca {
        issuer: Issuer::new(params, key),
        pem,
    }
}

/// A server certificate for localhost: (certificate PEM, key PEM, DER).
fn server_cert(ca: &Ca, cn: &str) -> (String, String, Vec<u8>) {
    let mut params = CertificateParams::new(vec!["localhost".to_owned(), "127.0.0.1".to_owned()]).unwrap();
    params.distinguished_name.push(DnType::CommonName, cn);
    let key = KeyPair::generate().unwrap();
    let cert = params.signed_by(&key, &ca.issuer).unwrap();
    (cert.pem(), key.serialize_pem(), cert.der().to_vec())
}

/// The certificate a new TLS connection to `port` is served (DER).
async fn served_certificate(port: u16, ca_pem: &str) -> Vec<u8> {
    use rustls::pki_types::pem::PemObject;
    let mut roots = rustls::RootCertStore::empty();
    roots
        .add(rustls::pki_types::CertificateDer::from_pem_slice(ca_pem.as_bytes()).unwrap())
        .unwrap();
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth();
    config.alpn_protocols = vec![b"h2".to_vec()];
    let connector = tokio_rustls::TlsConnector::from(Arc::new(config));
    let tcp = tokio::net::TcpStream::connect(("127.0.0.1", port)).await.unwrap();
    let name = rustls::pki_types::ServerName::try_from("localhost").unwrap();
    let tls = connector.connect(name, tcp).await.expect("handshake");
    tls.get_ref().1.peer_certificates().unwrap()[0].to_vec()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_renewed_certificate_is_served_within_seconds_with_no_dropped_calls() {
    let dir = tempfile::tempdir().unwrap();
    let ca = ca();
    let (cert1, key1, der1) = server_cert(&ca, "tidemark-1");
    let (cert2, key2, der2) = server_cert(&ca, "tidemark-2");
    let (cert3, _, der3) = server_cert(&ca, "tidemark-3");
    let files = TlsFiles {
        cert: dir.path().join("tls.crt"),
        key: dir.path().join("tls.key"),
        client_ca: None,
    };
    std::fs::write(&files.cert, &cert1).unwrap();
    std::fs::write(&files.key, &key1).unwrap();
    let config = ServerConfig {
        tls: Some(TlsSettings {
            cert_pem: cert1.into_bytes(),
            key_pem: key1.into_bytes(),
            client_ca_pem: None,
        }),
        reload: Some(ReloadSettings {
            interval: INTERVAL,
            trigger: Arc::default(),
            auth: None,
            tls: Some(files.clone()),
        }),
        ..ServerConfig::default()
    };
    let server = TestServer::start_with(Kind::Sqlite, test_policy(), config).await;
    let port = server.addr.port();
    assert_eq!(served_certificate(port, &ca.pem).await, der1);

    // One long-lived connection and a stream of new ones, all along.
    let stop = Arc::new(AtomicBool::new(false));
    let failures = Arc::new(std::sync::Mutex::new(Vec::<String>::new()));
    let calls = Arc::new(AtomicU64::new(0));
    let tls = ClientTls {
        ca_pem: Some(ca.pem.clone().into_bytes()),
        ..Default::default()
    };
    let mut tasks = Vec::new();
    for fresh_connections in [false, true] {
        let (url, tls, stop, failures, calls) = (
            server.url(),
            tls.clone(),
            Arc::clone(&stop),
            Arc::clone(&failures),
            Arc::clone(&calls),
        );
        tasks.push(tokio::spawn(async move {
            let options = ClientOptions {
                endpoint: url,
                tls: Some(tls),
                ..Default::default()
            };
            let mut client = CoordinatorClient::new(tidemark_client::connect(&options).await.unwrap());
            let mut n = 0;
            while !stop.load(Ordering::Relaxed) {
                if fresh_connections {
                    match tidemark_client::connect(&options).await {
                        Ok(channel) => client = CoordinatorClient::new(channel),
                        Err(e) => failures.lock().unwrap().push(format!("connect: {e}")),
                    }
                }
                n += 1;
                let result = client
                    .get_recovery_position(recovery_request(
                        &key("db.t", "main", &format!("tls-{fresh_connections}-{n}")),
                        range(1, 5),
                    ))
                    .await;
                calls.fetch_add(1, Ordering::Relaxed);
                if let Err(status) = result {
                    failures
                        .lock()
                        .unwrap()
                        .push(format!("{:?}: {}", status.code(), status.message()));
                }
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        }));
    }

    // Renewal: the certificate first, the key a moment later (two renames),
    // as a tool copying files one by one does. The mismatched pair in
    // between is refused; the matching pair is taken.
    replace_file(&files.cert, cert2.as_bytes());
    tokio::time::sleep(Duration::from_millis(50)).await;
    replace_file(&files.key, key2.as_bytes());
    let started = Instant::now();
    loop {
        let served = served_certificate(port, &ca.pem).await;
        if served == der2 {
            break;
        }
        assert_eq!(served, der1, "only the old or the renewed certificate is ever served");
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "renewed certificate not served after 10 s"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    eprintln!(
        "renewed certificate served {:?} after its key was written",
        started.elapsed()
    );

    // A certificate whose key is not there: refused, the renewed one stays.
    replace_file(&files.cert, cert3.as_bytes());
    tokio::time::sleep(INTERVAL * 6).await;
    let served = served_certificate(port, &ca.pem).await;
    assert_ne!(served, der3);
    assert_eq!(served, der2);

    stop.store(true, Ordering::Relaxed);
    for task in tasks {
        task.await.unwrap();
    }
    let calls = calls.load(Ordering::Relaxed);
    let failures = failures.lock().unwrap().clone();
    assert!(calls > 40, "only {calls} calls");
    assert!(
        failures.is_empty(),
        "{} of {calls} calls failed, first: {:?}",
        failures.len(),
        &failures[..failures.len().min(5)]
    );
    server.stop().await;
}
