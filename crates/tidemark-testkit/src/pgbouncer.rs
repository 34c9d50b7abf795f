//! PgBouncer in front of a Postgres server, for tests that run tidemark
//! behind a connection pooler (`--db-pooler`).
//!
//! The binary comes from `PGBOUNCER` (scripts/lib/tools.sh's
//! `ensure_pgbouncer` unpacks Debian's package); a test that needs it fails
//! when it is not set. PgBouncer refuses to run as root: as root it runs as
//! the `postgres` user (or `nobody`). Its server pool is kept small so that
//! in transaction mode a client's consecutive transactions really land on
//! different server connections.

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use sqlx::postgres::PgConnectOptions;

use crate::cluster::{free_port, running_as_root, user_exists};

/// PgBouncer's pool mode.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PoolMode {
    /// A server connection per client connection, for its whole life.
    Session,
    /// A server connection per transaction.
    Transaction,
}

impl PoolMode {
    /// The mode's name (PgBouncer's `pool_mode`, tidemark's `--db-pooler`).
    pub fn as_str(self) -> &'static str {
        match self {
            PoolMode::Session => "session",
            PoolMode::Transaction => "transaction",
        }
    }
}

/// A running PgBouncer; stopped when dropped.
#[derive(Debug)]
pub struct PgBouncer {
    child: Child,
    dir: tempfile::TempDir,
    port: u16,
    user: String,
    password: Option<String>,
}

/// Server connections PgBouncer keeps per database and user in transaction
/// mode: fewer than tidemark's pool, so transactions of one client land on
/// different servers.
pub const POOL_SIZE: u32 = 8;

/// In session mode a client connection holds its server connection for its
/// whole life, so the pool must cover every replica's connections (as in a
/// deployment: replicas × (--db-max-connections + 2)).
pub(crate) const SESSION_POOL_SIZE: u32 = 200;

impl PgBouncer {
    /// Starts PgBouncer in `mode` in front of the server `direct_url`
    /// points at (every database name passes through).
    pub fn start(mode: PoolMode, direct_url: &str) -> Self {
        let pool_size = match mode {
            PoolMode::Session => SESSION_POOL_SIZE,
            PoolMode::Transaction => POOL_SIZE,
        };
        Self::start_with_pool_size(mode, direct_url, pool_size)
    }

    /// [`PgBouncer::start`] with `pool_size` server connections per
    /// database and user (a small pool lets a test occupy all of them).
    pub fn start_with_pool_size(mode: PoolMode, direct_url: &str, pool_size: u32) -> Self {
        let binary = std::env::var("PGBOUNCER").unwrap_or_else(|_| {
            panic!("PGBOUNCER is not set: the README's test command (scripts/test.sh) fetches PgBouncer and sets it")
        });
        let target: PgConnectOptions = direct_url.parse().expect("a Postgres URL");
        let dir = tempfile::tempdir().expect("a directory for PgBouncer");
        let owner = running_as_root().then(|| if user_exists("postgres") { "postgres" } else { "nobody" });
        let port = free_port();
        let user = target.get_username().to_owned();
        let password = password_of(direct_url);
        let host = match target.get_host() {
            "localhost" => "127.0.0.1",
            host => host,
        };
        let server_password = password
            .as_deref()
            .map(|p| format!(" password={p}"))
            .unwrap_or_default();
        let config = format!(
            "[databases]\n* = host={host} port={port}{server_password}\n\n[pgbouncer]\nlisten_addr = 127.0.0.1\n\
             listen_port = {listen}\nunix_socket_dir =\nauth_type = trust\nauth_file = {dir}/users.txt\n\
             pool_mode = {mode}\ndefault_pool_size = {pool_size}\nmax_client_conn = 2000\n\
             ignore_startup_parameters = extra_float_digits\nlogfile = {dir}/pgbouncer.log\n\
             pidfile = {dir}/pgbouncer.pid\nserver_login_retry = 1\n",
            port = target.get_port(),
            listen = port,
            dir = dir.path().display(),
            mode = mode.as_str(),
        );
        std::fs::write(dir.path().join("pgbouncer.ini"), config).expect("write pgbouncer.ini");
        std::fs::write(dir.path().join("users.txt"), format!("\"{user}\" \"\"\n")).expect("write users.txt");
        let mut command = match owner {
            Some(owner) => {
                let status = Command::new("chown")
                    .args(["-R", owner, &dir.path().display().to_string()])
                    .status()
                    .expect("chown");
                assert!(status.success(), "chown the PgBouncer directory");
                let mut command = Command::new("runuser");
                command.args(["-u", owner, "--", &binary]);
                command
            }
            None => Command::new(&binary),
        };
        let child = command
            .arg(dir.path().join("pgbouncer.ini"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start PgBouncer ({binary}): {e}"));
        let bouncer = Self {
            child,
            dir,
            port,
            user,
            password,
        };
        let deadline = Instant::now() + Duration::from_secs(20);
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(
                Instant::now() < deadline,
                "PgBouncer did not listen within 20 s:\n{}",
                bouncer.log()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        bouncer
    }

    /// Its port.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// A URL for `database` through PgBouncer.
    pub fn url(&self, database: &str) -> String {
        let password = self.password.as_deref().map(|p| format!(":{p}")).unwrap_or_default();
        format!("postgres://{}{password}@127.0.0.1:{}/{database}", self.user, self.port)
    }

    /// Its log so far (for failure messages).
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("pgbouncer.log")).unwrap_or_default()
    }
}

/// The password in a `postgres://user:password@…` URL.
fn password_of(url: &str) -> Option<String> {
    let rest = url.split_once("://")?.1;
    let credentials = rest.split_once('@')?.0;
    credentials.split_once(':').map(|(_, p)| p.to_owned())
}

impl Drop for PgBouncer {
    fn drop(&mut self) {
        // The child may be runuser: signal PgBouncer itself.
        if let Ok(pid) = std::fs::read_to_string(self.dir.path().join("pgbouncer.pid")) {
            let _ = Command::new("kill").args(["-INT", pid.trim()]).status();
        }
        let deadline = Instant::now() + Duration::from_secs(5);
        while Instant::now() < deadline {
            if matches!(self.child.try_wait(), Ok(Some(_))) {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[cfg(test)]
mod tests {
    use super::password_of;

    #[test]
    fn the_password_is_read_from_the_url() {
        assert_eq!(password_of("postgres://u:secret@h:5/db").as_deref(), Some("secret"));
        assert_eq!(password_of("postgres://u@h:5/db"), None);
        assert_eq!(password_of("postgres://h:5/db"), None);
    }
}
