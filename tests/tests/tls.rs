//! TLS and mutual TLS with certificates generated at test time (no private
//! key is ever committed): a client without the CA fails, with it succeeds;
//! with mTLS a client without a certificate (or with a foreign one) is
//! refused, and the certificate's common name is the principal; the health
//! port answers in plaintext.

use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair};
use tidemark_client::{ClientOptions, ClientTls, CoordinatorClient};
use tidemark_e2e::{Kind, TestServer, key, test_policy};
use tidemark_proto::v1 as pb;
use tidemark_server::auth::AuthConfig;
use tidemark_server::{ServerConfig, TlsSettings};

struct Pki {
    ca_pem: String,
    server: (String, String),
    client: (String, String),
    foreign_client: (String, String),
}

fn ca(name: &str) -> (CertificateParams, KeyPair, String) {
    let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params.distinguished_name.push(DnType::CommonName, name);
    let key = KeyPair::generate().unwrap();
    let pem = params.self_signed(&key).unwrap().pem();
    (params, key, pem)
}

fn leaf(names: &[&str], cn: &str, issuer: &Issuer<'_, KeyPair>) -> (String, String) {
    let mut params = CertificateParams::new(names.iter().map(|n| (*n).to_owned()).collect::<Vec<_>>()).unwrap();
    params.distinguished_name.push(DnType::CommonName, cn);
    let key = KeyPair::generate().unwrap();
    let cert = params.signed_by(&key, issuer).unwrap();
    (cert.pem(), key.serialize_pem())
}

fn pki() -> Pki {
    let (ca_params, ca_key, ca_pem) = ca("tidemark test CA");
    let issuer = Issuer::new(ca_params, ca_key);
    let (other_params, other_key, _) = ca("someone else's CA");
    let other = Issuer::new(other_params, other_key);
    Pki {
        ca_pem,
        server: leaf(&["localhost", "127.0.0.1"], "tidemark", &issuer),
        client: leaf(&["spark-etl"], "spark-etl", &issuer),
        foreign_client: leaf(&["spark-etl"], "spark-etl", &other),
    }
}

async fn server(pki: &Pki, mutual: bool) -> TestServer {
    let auth = if mutual {
        AuthConfig::parse(
            "[[certificate]]\ncommon_name = \"spark-*\"\nroles = [\"worker\"]\ntables = [\"db.*\"]\n",
            "test",
        )
        .unwrap()
    } else {
        AuthConfig::default()
    };
    let config = ServerConfig {
        tls: Some(TlsSettings {
            cert_pem: pki.server.0.clone().into_bytes(),
            key_pem: pki.server.1.clone().into_bytes(),
            client_ca_pem: mutual.then(|| pki.ca_pem.clone().into_bytes()),
        }),
        auth: tidemark_server::auth::SharedAuth::new(auth),
        ..ServerConfig::default()
    };
    TestServer::start_full(Kind::Sqlite, test_policy(), config, true).await
}

async fn acquire(url: String, tls: ClientTls) -> Result<pb::Lease, String> {
    let channel = tidemark_client::connect(&ClientOptions {
        endpoint: url,
        tls: Some(tls),
        ..Default::default()
    })
    .await
    .map_err(|e| e.to_string())?;
    CoordinatorClient::new(channel)
        .acquire_lease(pb::AcquireLeaseRequest {
            consumer: Some(key("db.t", "main", "tls")),
            holder: "q".into(),
            ttl: None,
        })
        .await
        .map(|r| r.into_inner().lease.unwrap())
        .map_err(|s| format!("{s:?}"))
}

#[tokio::test]
async fn tls_needs_the_ca_and_works_with_it() {
    let pki = pki();
    let server = server(&pki, false).await;
    let without_ca = acquire(server.url(), ClientTls::default()).await;
    assert!(without_ca.is_err(), "a client that does not trust the CA must fail");
    let with_ca = acquire(
        server.url(),
        ClientTls {
            ca_pem: Some(pki.ca_pem.clone().into_bytes()),
            ..Default::default()
        },
    )
    .await
    .expect("a client trusting the CA succeeds");
    assert_eq!(with_ca.epoch, 1);
    // Plaintext to the TLS port fails.
    let plaintext = tidemark_client::connect_coordinator(format!("http://{}", server.addr)).await;
    match plaintext {
        Err(_) => {}
        Ok(mut client) => assert!(
            client
                .acquire_lease(pb::AcquireLeaseRequest {
                    consumer: Some(key("db.t", "main", "plain")),
                    holder: "q".into(),
                    ttl: None
                })
                .await
                .is_err()
        ),
    }
}

#[tokio::test]
async fn mutual_tls_requires_a_certificate_from_the_ca_and_names_the_principal() {
    let pki = pki();
    let server = server(&pki, true).await;
    let ca_only = ClientTls {
        ca_pem: Some(pki.ca_pem.clone().into_bytes()),
        ..Default::default()
    };
    assert!(
        acquire(server.url(), ca_only.clone()).await.is_err(),
        "no client certificate: refused"
    );
    let foreign = ClientTls {
        identity: Some((
            pki.foreign_client.0.clone().into_bytes(),
            pki.foreign_client.1.clone().into_bytes(),
        )),
        ..ca_only.clone()
    };
    assert!(
        acquire(server.url(), foreign).await.is_err(),
        "a certificate from another CA: refused"
    );
    let mine = ClientTls {
        identity: Some((pki.client.0.clone().into_bytes(), pki.client.1.clone().into_bytes())),
        ..ca_only
    };
    let lease = acquire(server.url(), mine)
        .await
        .expect("a certificate from the CA is accepted");
    assert_eq!(lease.epoch, 1);
    let (_, history) = server.stored(&key("db.t", "main", "tls")).await;
    assert_eq!(history[0].principal, "cert:spark-etl");
}

#[tokio::test]
async fn the_health_port_answers_in_plaintext() {
    let pki = pki();
    let server = server(&pki, true).await;
    let addr = server.health_addr.expect("a health port");
    let channel = tonic::transport::Endpoint::from_shared(format!("http://{addr}"))
        .unwrap()
        .connect()
        .await
        .expect("plaintext connection to the health port");
    let mut health = tonic_health::pb::health_client::HealthClient::new(channel);
    let answer = health
        .check(tonic_health::pb::HealthCheckRequest {
            service: "tidemark.v1.Coordinator".into(),
        })
        .await
        .expect("health answers without TLS or credentials")
        .into_inner();
    assert_eq!(
        answer.status(),
        tonic_health::pb::health_check_response::ServingStatus::Serving
    );
    // Only health is there.
    let mut coordinator = CoordinatorClient::new(
        tonic::transport::Endpoint::from_shared(format!("http://{addr}"))
            .unwrap()
            .connect()
            .await
            .unwrap(),
    );
    let status = coordinator
        .acquire_lease(pb::AcquireLeaseRequest {
            consumer: Some(key("db.t", "main", "x")),
            holder: "q".into(),
            ttl: None,
        })
        .await
        .unwrap_err();
    assert_eq!(status.code(), tonic::Code::Unimplemented);
}

/// A client certificate signed by `issuer` with common name `cn` and the
/// given subject alternative names.
fn client_with(issuer: &Issuer<'_, KeyPair>, cn: &str, sans: Vec<rcgen::SanType>) -> (String, String) {
    let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
    params.distinguished_name.push(DnType::CommonName, cn);
    params.subject_alt_names = sans;
    let key = KeyPair::generate().unwrap();
    let cert = params.signed_by(&key, issuer).unwrap();
    (cert.pem(), key.serialize_pem())
}

#[tokio::test]
async fn certificates_match_by_uri_then_dns_name_then_common_name() {
    use rcgen::SanType;
    let (ca_params, ca_key, ca_pem) = ca("tidemark SAN CA");
    let issuer = Issuer::new(ca_params, ca_key);
    let server_cert = leaf(&["localhost", "127.0.0.1"], "tidemark", &issuer);
    let auth = AuthConfig::parse(
        r#"
        [[certificate]]
        common_name = "spark-*"
        roles = ["viewer"]

        [[certificate]]
        dns_name = "*.jobs.example.org"
        roles = ["worker"]
        tables = ["db.*"]

        [[certificate]]
        uri = "spiffe://example.org/ns/etl/*"
        roles = ["worker"]
        tables = ["db.*"]
        "#,
        "test",
    )
    .unwrap();
    let config = ServerConfig {
        tls: Some(TlsSettings {
            cert_pem: server_cert.0.into_bytes(),
            key_pem: server_cert.1.into_bytes(),
            client_ca_pem: Some(ca_pem.clone().into_bytes()),
        }),
        auth: tidemark_server::auth::SharedAuth::new(auth),
        ..ServerConfig::default()
    };
    let server = TestServer::start_full(Kind::Sqlite, test_policy(), config, false).await;
    let spiffe = "spiffe://example.org/ns/etl/sa/spark";
    let cases = [
        // A SPIFFE ID: the URI rule decides, though the CN matches the
        // viewer rule (URI rules come first).
        (
            "uri",
            client_with(&issuer, "spark-a", vec![SanType::URI(spiffe.try_into().unwrap())]),
            Ok(format!("cert:{spiffe}")),
        ),
        (
            "dns",
            client_with(
                &issuer,
                "spark-b",
                vec![SanType::DnsName("q1.jobs.example.org".try_into().unwrap())],
            ),
            Ok("cert:q1.jobs.example.org".to_owned()),
        ),
        // Only the CN matches: the viewer rule, which may not take leases.
        (
            "cn",
            client_with(
                &issuer,
                "spark-c",
                vec![SanType::DnsName("other.example.com".try_into().unwrap())],
            ),
            Err(tonic::Code::PermissionDenied),
        ),
        // Trusted CA, no rule: refused.
        (
            "none",
            client_with(&issuer, "nobody", vec![]),
            Err(tonic::Code::Unauthenticated),
        ),
    ];
    for (id, (cert, key_pem), want) in cases {
        let tls = ClientTls {
            ca_pem: Some(ca_pem.clone().into_bytes()),
            identity: Some((cert.into_bytes(), key_pem.into_bytes())),
            ..Default::default()
        };
        let channel = tidemark_client::connect(&ClientOptions {
            endpoint: server.url(),
            tls: Some(tls),
            ..Default::default()
        })
        .await
        .unwrap();
        let answer = CoordinatorClient::new(channel)
            .acquire_lease(pb::AcquireLeaseRequest {
                consumer: Some(key("db.t", "main", &format!("san-{id}"))),
                holder: "q".into(),
                ttl: None,
            })
            .await;
        match want {
            Ok(principal) => {
                answer.unwrap_or_else(|e| panic!("{id}: {e:?}"));
                let (_, history) = server.stored(&key("db.t", "main", &format!("san-{id}"))).await;
                assert_eq!(history[0].principal, principal, "{id}");
            }
            Err(code) => assert_eq!(answer.unwrap_err().code(), code, "{id}"),
        }
    }
}

#[test]
fn a_certificate_rule_names_exactly_one_field_and_needs_mutual_tls() {
    let two = AuthConfig::parse(
        "[[certificate]]\nuri = \"spiffe://x/*\"\ncommon_name = \"a\"\nroles = [\"worker\"]\n",
        "f",
    )
    .unwrap_err();
    assert!(two.contains("exactly one"), "{two}");
    let none = AuthConfig::parse("[[certificate]]\nroles = [\"worker\"]\n", "f").unwrap_err();
    assert!(none.contains("exactly one"), "{none}");
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("auth.toml");
    std::fs::write(
        &file,
        "[[certificate]]\ncommon_name = \"spark-*\"\nroles = [\"worker\"]\n",
    )
    .unwrap();
    let without_mtls = tidemark_server::reload::AuthSource {
        file: Some(file.clone()),
        ..Default::default()
    };
    assert!(without_mtls.load().unwrap_err().contains("--tls-client-ca"));
    let with_mtls = tidemark_server::reload::AuthSource {
        file: Some(file),
        mutual_tls: true,
        ..Default::default()
    };
    assert!(with_mtls.load().is_ok());
}
