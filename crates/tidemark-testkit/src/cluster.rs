//! A private Postgres server for tests that stop and start Postgres itself
//! (the shared `DATABASE_URL` server must stay up for everyone else).
//!
//! It runs from the installed PostgreSQL binaries (`PG_BIN`, or the newest
//! `/usr/lib/postgresql/*/bin`); as root it runs as the `postgres` user,
//! because `initdb` refuses root. Durable settings (fsync and synchronous
//! commit on), so a crash loses nothing that was acknowledged.

use std::path::PathBuf;
use std::process::{Command, Stdio};

/// A Postgres server of the test's own, on a fixed loopback port.
#[derive(Debug)]
pub struct PgCluster {
    bin: PathBuf,
    dir: PathBuf,
    owner: Option<String>,
    port: u16,
    running: bool,
}

/// How to stop the server.
#[derive(Debug, Clone, Copy)]
pub enum StopMode {
    /// Disconnect clients, checkpoint, exit cleanly.
    Fast,
    /// Exit at once, as in a crash (recovery replays the WAL on start).
    Immediate,
}

impl PgCluster {
    /// Initializes and starts a new cluster; `None` (with a message) when no
    /// PostgreSQL binaries are installed.
    pub fn start() -> Option<Self> {
        let bin = pg_bin()?;
        let dir = std::env::temp_dir().join(format!("tidemark-cluster-{}", uuid::Uuid::new_v4().simple()));
        std::fs::create_dir_all(&dir).expect("cluster dir");
        let owner = running_as_root().then(|| {
            if user_exists("postgres") {
                "postgres".to_owned()
            } else {
                "nobody".to_owned()
            }
        });
        if let Some(owner) = &owner {
            run(Command::new("chown").args([owner.as_str(), &dir.display().to_string()]));
        }
        let port = free_port();
        let cluster = Self {
            bin,
            dir,
            owner,
            port,
            running: false,
        };
        let data = cluster.data_dir();
        run(cluster.command("initdb").args([
            "-D",
            &data.display().to_string(),
            "-U",
            "tidemark",
            "--auth=trust",
            "-E",
            "UTF8",
        ]));
        let mut cluster = cluster;
        cluster.start_again();
        Some(cluster)
    }

    /// A hot standby of `primary` (a base backup streaming from it), on a
    /// port of its own: read-only until [`PgCluster::promote`].
    pub fn standby_of(primary: &PgCluster) -> Self {
        let dir = std::env::temp_dir().join(format!("tidemark-standby-{}", uuid::Uuid::new_v4().simple()));
        std::fs::create_dir_all(&dir).expect("standby dir");
        if let Some(owner) = &primary.owner {
            run(Command::new("chown").args([owner.as_str(), &dir.display().to_string()]));
        }
        let mut standby = Self {
            bin: primary.bin.clone(),
            dir,
            owner: primary.owner.clone(),
            port: free_port(),
            running: false,
        };
        run(standby.command("pg_basebackup").args([
            "-D",
            &standby.data_dir().display().to_string(),
            "-h",
            "127.0.0.1",
            "-p",
            &primary.port.to_string(),
            "-U",
            "tidemark",
            "--write-recovery-conf",
            "--checkpoint=fast",
        ]));
        standby.start_again();
        standby
    }

    /// Promotes a standby to a primary and waits until it accepts writes.
    pub fn promote(&self) {
        run(self
            .command("pg_ctl")
            .args(["-D", &self.data_dir().display().to_string(), "-w", "promote"]));
    }

    /// Its loopback port.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The URL of its `postgres` database.
    pub fn url(&self) -> String {
        format!("postgres://tidemark@127.0.0.1:{}/postgres", self.port)
    }

    /// Starts the (stopped) server again on the same port and data.
    pub fn start_again(&mut self) {
        let options = format!(
            "-p {} -k {} -c listen_addresses=127.0.0.1 -c max_connections=200",
            self.port,
            self.dir.display()
        );
        // The server inherits pg_ctl's output handles: keep them off any pipe
        // that something would wait on.
        let status = self
            .command("pg_ctl")
            .args([
                "-D",
                &self.data_dir().display().to_string(),
                "-o",
                &options,
                "-l",
                &self.dir.join("server.log").display().to_string(),
                "-w",
                "start",
            ])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .expect("run pg_ctl");
        assert!(status.success(), "pg_ctl start failed:\n{}", self.log());
        self.running = true;
    }

    /// Stops the server.
    pub fn stop(&mut self, mode: StopMode) {
        let mode = match mode {
            StopMode::Fast => "fast",
            StopMode::Immediate => "immediate",
        };
        run(self
            .command("pg_ctl")
            .args(["-D", &self.data_dir().display().to_string(), "-m", mode, "-w", "stop"]));
        self.running = false;
    }

    /// Changes a server setting for every session from now on (`ALTER
    /// SYSTEM`, then a reload): for settings a reload applies.
    pub fn set(&self, name: &str, value: &str) {
        self.sql(&format!("ALTER SYSTEM SET {name} = '{value}'"));
        self.sql("SELECT pg_reload_conf()");
    }

    /// Runs `sql` as the superuser in database `postgres`, panicking on an
    /// error.
    pub fn sql(&self, sql: &str) {
        run(self
            .command("psql")
            .args([
                "-h",
                "127.0.0.1",
                "-p",
                &self.port.to_string(),
                "-U",
                "tidemark",
                "-d",
                "postgres",
            ])
            .args(["-v", "ON_ERROR_STOP=1", "-q", "-c", sql]));
    }

    /// The postmaster's process id (its children are the server's other
    /// processes), while running.
    pub fn postmaster_pid(&self) -> Option<u32> {
        let pid_file = std::fs::read_to_string(self.data_dir().join("postmaster.pid")).ok()?;
        pid_file.lines().next()?.trim().parse().ok()
    }

    /// The server's log so far (for failure messages).
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.join("server.log")).unwrap_or_default()
    }

    fn data_dir(&self) -> PathBuf {
        self.dir.join("data")
    }

    fn command(&self, program: &str) -> Command {
        let path = self.bin.join(program);
        match &self.owner {
            Some(owner) => {
                let mut command = Command::new("runuser");
                command.args(["-u", owner, "--"]).arg(path);
                command
            }
            None => Command::new(path),
        }
    }
}

impl Drop for PgCluster {
    fn drop(&mut self) {
        if self.running {
            let _ = self
                .command("pg_ctl")
                .args([
                    "-D",
                    &self.data_dir().display().to_string(),
                    "-m",
                    "immediate",
                    "-w",
                    "stop",
                ])
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status();
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn pg_bin() -> Option<PathBuf> {
    if let Ok(bin) = std::env::var("PG_BIN") {
        return Some(PathBuf::from(bin));
    }
    let mut candidates: Vec<(u32, PathBuf)> = std::fs::read_dir("/usr/lib/postgresql")
        .ok()?
        .filter_map(Result::ok)
        .filter_map(|entry| {
            let version = entry.file_name().to_str()?.parse::<u32>().ok()?;
            let bin = entry.path().join("bin");
            bin.join("pg_ctl").exists().then_some((version, bin))
        })
        .collect();
    candidates.sort();
    let found = candidates.pop().map(|(_, bin)| bin);
    if found.is_none() {
        eprintln!("no PostgreSQL binaries under /usr/lib/postgresql (set PG_BIN)");
    }
    found
}

pub(crate) fn running_as_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
}

pub(crate) fn user_exists(name: &str) -> bool {
    Command::new("id")
        .arg(name)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

pub(crate) fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port")
}

fn run(command: &mut Command) {
    let output = command.output().expect("run a PostgreSQL binary");
    assert!(
        output.status.success(),
        "{command:?} failed:\n{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
}
