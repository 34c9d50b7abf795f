//! The processes under test (tidemark, Postgres, etcd) and their CPU time.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use tidemark_testkit::process::ServerProcess;

/// Clock ticks per second in /proc (USER_HZ; 100 on Linux).
const TICKS_PER_SECOND: f64 = 100.0;

/// CPU seconds (user + system) a process has used, from /proc.
pub(crate) fn cpu_seconds(pid: u32) -> Option<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // Fields after the command name, which is in parentheses.
    let rest = &stat[stat.rfind(')')? + 2..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let utime: f64 = fields.get(11)?.parse().ok()?;
    let stime: f64 = fields.get(12)?.parse().ok()?;
    Some((utime + stime) / TICKS_PER_SECOND)
}

/// CPU seconds of a process and all its direct children (Postgres: the
/// postmaster and its backends and workers).
pub(crate) fn cpu_seconds_with_children(pid: u32) -> Option<f64> {
    let total = cpu_seconds(pid)?;
    Some(total + children(pid).into_iter().filter_map(cpu_seconds).sum::<f64>())
}

/// The processes whose parent is `pid`.
pub(crate) fn children(pid: u32) -> Vec<u32> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|&p| parent_of(p) == Some(pid))
        .collect()
}

fn parent_of(pid: u32) -> Option<u32> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = &stat[stat.rfind(')')? + 2..];
    rest.split_whitespace().nth(1)?.parse().ok()
}

/// Resident and peak resident memory (KiB) of a process.
pub(crate) fn memory_kib(pid: u32) -> Option<(u64, u64)> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let field = |name: &str| {
        status
            .lines()
            .find(|l| l.starts_with(name))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|v| v.parse::<u64>().ok())
    };
    Some((field("VmRSS:")?, field("VmHWM:")?))
}

/// The environment deploy/Dockerfile gives the server: mimalloc returns
/// freed pages to the kernel at once rather than 10 ms later, about 1 MiB
/// less resident at 1,000 connections for no measurable CPU
/// (docs/bench/HISTORY.md, "Step 6").
const IMAGE_ENV: &[(&str, &str)] = &[("MIMALLOC_PURGE_DELAY", "0")];

/// A `tidemark serve` process for the benchmark: sweeper off, long leases,
/// no metrics port.
#[derive(Debug)]
pub(crate) struct Tidemark(ServerProcess);

impl Tidemark {
    pub(crate) fn start(binary: &Path, database_url: &str, db_connections: u32, dir: &Path) -> anyhow::Result<Self> {
        Self::start_with(binary, database_url, db_connections, dir, "warn,tidemark=info", &[])
    }

    /// The same, with another log filter and more flags.
    pub(crate) fn start_with(
        binary: &Path,
        database_url: &str,
        db_connections: u32,
        dir: &Path,
        log: &str,
        extra: &[&str],
    ) -> anyhow::Result<Self> {
        let mut args: Vec<String> = [
            "--listen",
            "127.0.0.1:0",
            "--database-url",
            database_url,
            "--db-max-connections",
            &db_connections.to_string(),
            "--max-lease-ttl",
            "1h",
            "--log",
            log,
        ]
        .map(String::from)
        .to_vec();
        // No metrics port unless asked for.
        if !extra.contains(&"--metrics-listen") {
            args.extend(["--metrics-listen".to_owned(), "off".to_owned()]);
        }
        // No sweeper unless asked for: it would compete with the measured work.
        if !extra.contains(&"--sweep-interval") {
            args.extend(["--sweep-interval".to_owned(), "0s".to_owned()]);
        }
        args.extend(extra.iter().map(|a| (*a).to_owned()));
        // The server runs as the image runs it (deploy/Dockerfile's ENV)
        // unless the bench's own environment says otherwise.
        let env: Vec<(String, String)> = IMAGE_ENV
            .iter()
            .filter(|(key, _)| std::env::var_os(key).is_none())
            .map(|(key, value)| ((*key).to_owned(), (*value).to_owned()))
            .collect();
        let process = ServerProcess::start_with_env(binary, &args, &env, dir, "tidemark")
            .with_context(|| format!("cannot start {}", binary.display()))?;
        Ok(Self(process))
    }

    pub(crate) fn pid(&self) -> u32 {
        self.0.pid()
    }

    pub(crate) fn url(&self) -> String {
        self.0.url()
    }

    /// Every log line so far.
    pub(crate) fn log_lines(&self) -> Vec<String> {
        self.0.log_lines()
    }
}

/// An etcd server (single member, data on disk with etcd's default fsync).
#[derive(Debug)]
pub(crate) struct Etcd {
    child: Child,
    pub url: String,
    _dir: tempfile::TempDir,
}

impl Etcd {
    pub(crate) fn start(binary: &Path) -> anyhow::Result<Self> {
        let dir = tempfile::tempdir()?;
        let client = free_port()?;
        let peer = free_port()?;
        let url = format!("http://127.0.0.1:{client}");
        let peer_url = format!("http://127.0.0.1:{peer}");
        let child = Command::new(binary)
            .args(["--name", "bench", "--data-dir"])
            .arg(dir.path().join("data"))
            .args(["--listen-client-urls", &url, "--advertise-client-urls", &url])
            .args([
                "--listen-peer-urls",
                &peer_url,
                "--initial-advertise-peer-urls",
                &peer_url,
            ])
            .args(["--initial-cluster", &format!("bench={peer_url}")])
            .args(["--log-level", "error", "--logger", "zap"])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .with_context(|| format!("cannot start {}", binary.display()))?;
        let started = Instant::now();
        while std::net::TcpStream::connect(("127.0.0.1", client)).is_err() {
            if started.elapsed() > Duration::from_secs(30) {
                bail!("etcd did not start");
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        Ok(Self { child, url, _dir: dir })
    }

    pub(crate) fn pid(&self) -> u32 {
        self.child.id()
    }
}

impl Drop for Etcd {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A loopback address with a port free right now.
pub(crate) fn free_addr() -> anyhow::Result<std::net::SocketAddr> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?.local_addr()?)
}

fn free_port() -> anyhow::Result<u16> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?.local_addr()?.port())
}

/// A binary next to this one (target/<profile>/), or on PATH.
pub(crate) fn sibling_binary(name: &str) -> Option<PathBuf> {
    let here = std::env::current_exe().ok()?;
    let sibling = here.parent()?.join(name);
    if sibling.exists() {
        return Some(sibling);
    }
    which(name)
}

pub(crate) fn which(name: &str) -> Option<PathBuf> {
    std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|p| p.join(name))
            .find(|p| p.is_file())
    })
}

/// The processes whose CPU is measured.
#[derive(Debug, Clone, Default)]
pub(crate) struct Watched {
    pub(crate) tidemark: Option<u32>,
    /// A second replica, counted with the first as `tidemark`.
    pub(crate) tidemark_replica: Option<u32>,
    pub(crate) postgres: Option<u32>,
    /// With `--db-cpu`: Postgres's CPU from its cgroup (exact, backends
    /// that exited included) instead of its process tree.
    pub(crate) postgres_cgroup: Option<crate::cgroup::CpuUsage>,
    pub(crate) etcd: Option<u32>,
    /// A pool on the bench's Postgres to read its WAL position from.
    pub(crate) wal: Option<sqlx::PgPool>,
}

impl Watched {
    pub(crate) fn sample(&self) -> BTreeMap<String, f64> {
        let mut cpu = BTreeMap::new();
        let replicas: Vec<f64> = [self.tidemark, self.tidemark_replica]
            .into_iter()
            .flatten()
            .filter_map(cpu_seconds)
            .collect();
        if !replicas.is_empty() {
            cpu.insert("tidemark".to_owned(), replicas.iter().sum());
        }
        if let Some(s) = self.postgres_cgroup.as_ref().and_then(crate::cgroup::CpuUsage::seconds) {
            cpu.insert("postgres".to_owned(), s);
        } else if let Some(pid) = self.postgres
            && let Some(s) = cpu_seconds_with_children(pid)
        {
            cpu.insert("postgres".to_owned(), s);
        }
        if let Some(pid) = self.etcd
            && let Some(s) = cpu_seconds(pid)
        {
            cpu.insert("etcd".to_owned(), s);
        }
        if let Some(s) = cpu_seconds(std::process::id()) {
            cpu.insert("client".to_owned(), s);
        }
        cpu
    }

    /// Postgres's counters so far (cluster-wide): WAL bytes inserted and
    /// transaction ids assigned (one per transaction that wrote). Read from
    /// the insert LSN and the next transaction id rather than `pg_stat_wal`
    /// and `pg_stat_database`, whose counters busy backends flush at most
    /// once a second, so a short window reads little or nothing.
    pub(crate) async fn database_counters(&self) -> Option<DatabaseCounters> {
        let pool = self.wal.as_ref()?;
        let (wal_bytes, write_transactions): (f64, f64) = sqlx::query_as(
            "SELECT pg_wal_lsn_diff(pg_current_wal_insert_lsn(), '0/0')::float8,
                    pg_snapshot_xmax(pg_current_snapshot())::text::float8",
        )
        .fetch_one(pool)
        .await
        .ok()?;
        Some(DatabaseCounters {
            wal_bytes,
            write_transactions,
        })
    }
}

/// See [`Watched::database_counters`].
#[derive(Debug, Clone, Copy)]
pub(crate) struct DatabaseCounters {
    pub(crate) wal_bytes: f64,
    pub(crate) write_transactions: f64,
}
