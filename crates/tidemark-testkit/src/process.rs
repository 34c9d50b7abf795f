//! `tidemark serve` as a real child process, for harnesses that kill,
//! pause and restart it (benchmarks, the history checker, the fuzzer).

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// A running `tidemark serve`. Killed when dropped.
#[derive(Debug)]
pub struct ServerProcess {
    child: Child,
    /// Where it serves gRPC.
    pub addr: SocketAddr,
    log: Arc<Mutex<Vec<String>>>,
}

impl ServerProcess {
    /// Starts `binary serve` with `args` (which should include `--listen`)
    /// in `dir`, and waits until it logs that it is listening. Its log
    /// lines are kept (see [`ServerProcess::log_lines`]); lines at WARN or
    /// above are echoed to stderr prefixed with `label`.
    pub fn start(binary: &Path, args: &[String], dir: &Path, label: &str) -> std::io::Result<Self> {
        let mut child = Command::new(binary)
            .arg("serve")
            .args(args)
            .current_dir(dir)
            .env("RUST_BACKTRACE", "1")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()?;
        let stderr = child.stderr.take().expect("piped");
        let log = Arc::new(Mutex::new(Vec::new()));
        let (tx, rx) = std::sync::mpsc::channel();
        let kept = Arc::clone(&log);
        let label = label.to_owned();
        std::thread::spawn(move || {
            let mut sent = false;
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                if !sent && let Some(addr) = line.split("listening on ").nth(1) {
                    let _ = tx.send(addr.trim().to_owned());
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
                return Err(std::io::Error::other(format!(
                    "{} did not start listening",
                    binary.display()
                )));
            }
        };
        let addr = addr.parse().map_err(std::io::Error::other)?;
        Ok(Self { child, addr, log })
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

    /// Whether the process has exited.
    pub fn exited(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(Some(_)))
    }

    /// Sends `signal` (e.g. "STOP", "CONT", "TERM") with `kill(1)`.
    pub fn signal(&self, signal: &str) {
        signal_pid(self.pid(), signal);
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
