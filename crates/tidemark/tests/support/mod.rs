//! Shared helpers for the binary's tests: a running `tidemark serve` and a
//! fresh Postgres database.

#![allow(dead_code)]

pub mod load;

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

pub const BIN: &str = env!("CARGO_BIN_EXE_tidemark");

/// A health check against `url` (`None` when the server does not answer).
pub async fn health(url: String, service: &str) -> Option<tonic_health::pb::health_check_response::ServingStatus> {
    let channel = tonic::transport::Endpoint::from_shared(url)
        .ok()?
        .connect_timeout(Duration::from_secs(1))
        .timeout(Duration::from_secs(2))
        .connect()
        .await
        .ok()?;
    let mut client = tonic_health::pb::health_client::HealthClient::new(channel);
    let response = client
        .check(tonic_health::pb::HealthCheckRequest {
            service: service.into(),
        })
        .await
        .ok()?;
    Some(response.into_inner().status())
}

/// A running `tidemark serve` whose stderr is collected.
pub struct Served {
    pub child: Child,
    pub addr: SocketAddr,
    /// The plaintext health port, when started with --health-listen.
    pub health_addr: Option<SocketAddr>,
    log: Arc<Mutex<Vec<String>>>,
}

impl Served {
    pub fn start(args: &[&str], cwd: &Path) -> Self {
        // Tests run in parallel: no metrics port unless the test asks for one.
        let metrics_off: &[&str] = if args.contains(&"--metrics-listen") {
            &[]
        } else {
            &["--metrics-listen", "off"]
        };
        let mut child = Command::new(BIN)
            .arg("serve")
            .args(["--listen", "127.0.0.1:0"])
            .args(metrics_off)
            .args(args)
            .current_dir(cwd)
            .env("TIDEMARK_LOG_FORMAT", "text")
            .stderr(Stdio::piped())
            .stdout(Stdio::null())
            .spawn()
            .expect("spawn tidemark");
        let log = Arc::new(Mutex::new(Vec::new()));
        let (addr_tx, addr_rx) = std::sync::mpsc::channel();
        let (health_tx, health_rx) = std::sync::mpsc::channel();
        let stderr = child.stderr.take().unwrap();
        let lines = Arc::clone(&log);
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                if let Some(addr) = line.split("listening on ").nth(1) {
                    let addr = addr.trim().parse::<SocketAddr>().expect("address");
                    let _ = if line.contains("health (plaintext)") {
                        health_tx.send(addr)
                    } else {
                        addr_tx.send(addr)
                    };
                }
                lines.lock().unwrap().push(line);
            }
        });
        // The main port is logged last, once every port is bound.
        let addr = addr_rx
            .recv_timeout(Duration::from_secs(30))
            .unwrap_or_else(|_| panic!("tidemark did not start:\n{}", log.lock().unwrap().join("\n")));
        let health_addr = health_rx.try_recv().ok();
        Self {
            child,
            addr,
            health_addr,
            log,
        }
    }

    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    pub fn signal(&self, signal: &str) {
        let status = Command::new("kill")
            .args([format!("-{signal}"), self.child.id().to_string()])
            .status()
            .expect("kill");
        assert!(status.success());
    }

    /// Waits for the process to exit; returns its success and the time taken.
    /// Async, so the test's own client connections keep being driven (and
    /// can close when the server says GOAWAY).
    pub async fn wait(&mut self, limit: Duration) -> (bool, Duration) {
        let started = Instant::now();
        loop {
            if let Some(status) = self.child.try_wait().expect("wait") {
                return (status.success(), started.elapsed());
            }
            assert!(
                started.elapsed() < limit,
                "did not exit within {limit:?}:\n{}",
                self.logs()
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    pub fn logs(&self) -> String {
        self.log.lock().unwrap().join("\n")
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A fresh Postgres database (not just a schema: the binary takes a plain
/// URL), dropped afterwards.
pub struct FreshDatabase {
    admin_url: String,
    name: String,
    pub url: String,
}

impl FreshDatabase {
    pub async fn create() -> Option<Self> {
        let admin_url = tidemark_testkit::postgres_url()?;
        let name = format!("tidemark_cli_{}", uuid_like());
        let pool = sqlx::PgPool::connect(&admin_url).await.unwrap();
        sqlx::query(sqlx::AssertSqlSafe(format!("CREATE DATABASE {name}")))
            .execute(&pool)
            .await
            .unwrap();
        pool.close().await;
        let base = admin_url.rsplit_once('/').map(|(b, _)| b.to_owned()).unwrap();
        Some(Self {
            url: format!("{base}/{name}"),
            admin_url,
            name,
        })
    }

    pub async fn drop_now(self) {
        let pool = sqlx::PgPool::connect(&self.admin_url).await.unwrap();
        let _ = sqlx::query(sqlx::AssertSqlSafe(format!(
            "DROP DATABASE IF EXISTS {} WITH (FORCE)",
            self.name
        )))
        .execute(&pool)
        .await;
        pool.close().await;
    }
}

fn uuid_like() -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    format!("{:x}{:x}", nanos, std::process::id())
}
