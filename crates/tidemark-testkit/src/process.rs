//! `tidemark serve` as a real child process, for harnesses that kill,
//! pause and restart it (the binary's own tests, benchmarks, the history
//! checker, the fuzzer): the one process harness.

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// A running `tidemark serve`. Killed when dropped.
#[derive(Debug)]
pub struct ServerProcess {
    child: Child,
    /// Where it serves gRPC.
    pub addr: SocketAddr,
    /// The plaintext health port, when started with `--health-listen`.
    pub health_addr: Option<SocketAddr>,
    log: Arc<Mutex<Vec<String>>>,
}

impl ServerProcess {
    /// Starts `binary serve` with `args` (which should include `--listen`)
    /// in `dir`, and waits until it logs that it is listening. Its log
    /// lines are kept (see [`ServerProcess::log_lines`]); lines at WARN or
    /// above are echoed to stderr prefixed with `label`.
    pub fn start(binary: &Path, args: &[String], dir: &Path, label: &str) -> std::io::Result<Self> {
        Self::start_with_env(binary, args, &[], dir, label)
    }

    /// [`ServerProcess::start`] with extra environment variables (say,
    /// libfaketime's).
    pub fn start_with_env(
        binary: &Path,
        args: &[String],
        env: &[(String, String)],
        dir: &Path,
        label: &str,
    ) -> std::io::Result<Self> {
        let mut child = Command::new(binary)
            .envs(env.iter().map(|(k, v)| (k, v)))
            .arg("serve")
            .args(args)
            .current_dir(dir)
            .env("RUST_BACKTRACE", "1")
            // The start-up lines below are read from the text format.
            .env("TIDEMARK_LOG_FORMAT", "text")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()?;
        let stderr = child.stderr.take().expect("piped");
        let log = Arc::new(Mutex::new(Vec::new()));
        let (tx, rx) = std::sync::mpsc::channel();
        let (health_tx, health_rx) = std::sync::mpsc::channel();
        let kept = Arc::clone(&log);
        let label = label.to_owned();
        std::thread::spawn(move || {
            let mut sent = false;
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                let address = line.split("listening on ").nth(1).map(|a| a.trim().to_owned());
                if let Some(addr) = address.clone().filter(|_| line.contains("health (plaintext)")) {
                    let _ = health_tx.send(addr);
                } else if !sent && let Some(addr) = address {
                    // The main port is logged last, once every port is bound.
                    let _ = tx.send(addr);
                    sent = true;
                } else if line.contains("ERROR") || line.contains("WARN") || line.contains("panicked") {
                    eprintln!("{label}: {line}");
                }
                kept.lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner)
                    .push(line);
            }
        });
        let addr = match rx.recv_timeout(Duration::from_secs(60)) {
            Ok(addr) => addr,
            Err(_) => {
                let _ = child.kill();
                let _ = child.wait();
                let lines = log.lock().unwrap_or_else(std::sync::PoisonError::into_inner).join("\n");
                return Err(std::io::Error::other(format!(
                    "{} did not start listening:\n{lines}",
                    binary.display()
                )));
            }
        };
        let addr = addr.parse().map_err(std::io::Error::other)?;
        let health_addr = health_rx.try_recv().ok().and_then(|a| a.parse().ok());
        Ok(Self {
            child,
            addr,
            health_addr,
            log,
        })
    }

    /// The process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// `http://addr`.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Every log line so far.
    pub fn log_lines(&self) -> Vec<String> {
        self.log
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }

    /// Every log line so far, as one text.
    pub fn logs(&self) -> String {
        self.log_lines().join("\n")
    }

    /// Whether the process has exited.
    pub fn exited(&mut self) -> bool {
        self.exit_status().is_some()
    }

    /// How the process exited, once it has.
    pub fn exit_status(&mut self) -> Option<ExitStatus> {
        self.child.try_wait().ok().flatten()
    }

    /// Sends `signal` (e.g. "STOP", "CONT", "TERM") with `kill(1)`.
    pub fn signal(&self, signal: &str) {
        signal_pid(self.pid(), signal);
    }

    /// Waits for the process to exit; returns its success and the time taken.
    /// Async, so the test's own client connections keep being driven (and
    /// can close when the server says GOAWAY).
    pub async fn wait_exit(&mut self, limit: Duration) -> (bool, Duration) {
        let started = Instant::now();
        loop {
            if let Some(status) = self.exit_status() {
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

    /// SIGKILL, and waits for the exit.
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for ServerProcess {
    fn drop(&mut self) {
        self.kill();
    }
}

/// Sends `signal` to `pid` with `kill(1)` (no libc in this crate).
pub fn signal_pid(pid: u32, signal: &str) {
    let _ = Command::new("kill")
        .args([format!("-{signal}"), pid.to_string()])
        .status();
}

/// The `tidemark` binary: `TIDEMARK_BIN`, else next to the running
/// executable (target/<profile>/ or its parent for test binaries in deps/),
/// else on PATH.
pub fn tidemark_binary() -> Option<PathBuf> {
    if let Some(path) = std::env::var_os("TIDEMARK_BIN") {
        return Some(PathBuf::from(path));
    }
    let here = std::env::current_exe().ok()?;
    for dir in here.ancestors().skip(1).take(2) {
        let candidate = dir.join("tidemark");
        if candidate.is_file() {
            return Some(candidate);
        }
    }
    std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|p| p.join("tidemark"))
            .find(|p| p.is_file())
    })
}

/// `given`, else [`tidemark_binary`], as an absolute path (servers run in
/// temporary directories).
pub fn resolve_tidemark_binary(given: Option<&Path>) -> std::io::Result<PathBuf> {
    let binary = given.map(Path::to_path_buf).or_else(tidemark_binary).ok_or_else(|| {
        std::io::Error::other("no tidemark binary: build it (cargo build -p tidemark) or pass --tidemark-bin")
    })?;
    std::path::absolute(binary)
}

/// A free loopback port (racy by nature; for processes that must restart
/// on the same address).
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port")
}

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
