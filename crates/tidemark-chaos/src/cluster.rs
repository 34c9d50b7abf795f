//! The database under test: a private Postgres the run starts itself (and
//! may crash and restart), or an existing one given by URL, typically the
//! Patroni cluster behind HAProxy that `scripts/ha-cluster.sh` runs, whose
//! control script fails the primary over and switches it over.

use std::net::{SocketAddr, ToSocketAddrs};
use std::path::{Path, PathBuf};

use anyhow::{Context, bail};
use tidemark_testkit::PgCluster;

/// Where the replicas' database is.
pub(crate) enum Database {
    /// A private Postgres, started for the run.
    Private(PgCluster),
    /// An existing database; with a control script, a cluster that can
    /// change its primary.
    External { url: String, control: Option<PathBuf> },
}

impl Database {
    /// The address the database proxy forwards to.
    pub(crate) fn address(&self) -> anyhow::Result<SocketAddr> {
        match self {
            Self::Private(cluster) => Ok(SocketAddr::from(([127, 0, 0, 1], cluster.port()))),
            Self::External { url, .. } => {
                let (_, authority, _) = split_url(url)?;
                authority
                    .to_socket_addrs()
                    .with_context(|| format!("cannot resolve {authority}"))?
                    .next()
                    .with_context(|| format!("{authority} resolves to nothing"))
            }
        }
    }

    /// The URL the replicas use: the database's, through `proxy`.
    pub(crate) fn url_through(&self, proxy: SocketAddr) -> anyhow::Result<String> {
        match self {
            Self::Private(_) => Ok(format!("postgres://tidemark@{proxy}/postgres")),
            Self::External { url, .. } => {
                let (head, _, tail) = split_url(url)?;
                Ok(format!("{head}{proxy}{tail}"))
            }
        }
    }

    /// The private server, when the run has one (it can be crashed).
    pub(crate) fn private(&mut self) -> Option<&mut PgCluster> {
        match self {
            Self::Private(cluster) => Some(cluster),
            Self::External { .. } => None,
        }
    }

    /// The cluster's control script, when there is one.
    pub(crate) fn control(&self) -> Option<&Path> {
        match self {
            Self::External { control, .. } => control.as_deref(),
            Self::Private(_) => None,
        }
    }
}

/// `postgres://user:pass@host:port/db?x` as (`postgres://user:pass@`,
/// `host:port`, `/db?x`).
fn split_url(url: &str) -> anyhow::Result<(&str, &str, &str)> {
    let Some(scheme_end) = url.find("://").map(|i| i + 3) else {
        bail!("not a postgres:// URL");
    };
    let rest = &url[scheme_end..];
    let end = rest.find(['/', '?']).unwrap_or(rest.len());
    let start = rest[..end].rfind('@').map_or(0, |i| i + 1);
    if start == end {
        bail!("the database URL names no host");
    }
    Ok((&url[..scheme_end + start], &rest[start..end], &rest[end..]))
}

/// What one change of primary did, as the control script told it.
#[derive(Debug, Clone)]
pub(crate) struct PrimaryChange {
    /// `pg0 -> pg2`.
    pub members: String,
    /// From the fault's start until the balancer routed to a writable new
    /// primary, as the script measured it.
    pub routed_ms: i64,
    /// When the fault began (the primary killed, or the switchover
    /// asked for), µs since the epoch.
    pub t0: i64,
}

/// Runs `control failover` or `control switchover`, which returns once the
/// cluster is healthy again (the old primary back as a standby).
pub(crate) async fn change_primary(control: &Path, kind: &str) -> anyhow::Result<PrimaryChange> {
    let control = control.to_path_buf();
    let kind_owned = kind.to_owned();
    let output =
        tokio::task::spawn_blocking(move || std::process::Command::new(&control).arg(&kind_owned).output()).await??;
    let stdout = String::from_utf8_lossy(&output.stdout);
    if !output.status.success() {
        bail!("{kind} failed: {}{}", stdout, String::from_utf8_lossy(&output.stderr));
    }
    // `failover pg0 -> pg2 20331 1764557000123`
    let line = stdout
        .lines()
        .find(|l| l.starts_with(kind))
        .with_context(|| format!("{kind}: no report line in {stdout:?}"))?;
    let words: Vec<&str> = line.split_whitespace().collect();
    anyhow::ensure!(words.len() == 6, "{kind}: cannot read {line:?}");
    let number = |word: &str| {
        word.parse::<i64>()
            .with_context(|| format!("{kind}: cannot read {line:?}"))
    };
    Ok(PrimaryChange {
        members: format!("{} -> {}", words[1], words[3]),
        routed_ms: number(words[4])?,
        t0: number(words[5])? * 1000,
    })
}

/// Runs `control wait-healthy`: every member back and streaming.
pub(crate) async fn wait_healthy(control: &Path) -> anyhow::Result<()> {
    let control = control.to_path_buf();
    let output = tokio::task::spawn_blocking(move || {
        std::process::Command::new(&control)
            .args(["wait-healthy", "180"])
            .output()
    })
    .await??;
    anyhow::ensure!(
        output.status.success(),
        "the cluster did not become healthy: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::split_url;

    #[test]
    fn urls_split_around_their_authority() {
        assert_eq!(
            split_url("postgres://u:p@127.0.0.1:5432/db?sslmode=disable").unwrap(),
            ("postgres://u:p@", "127.0.0.1:5432", "/db?sslmode=disable")
        );
        assert_eq!(
            split_url("postgres://localhost:1").unwrap(),
            ("postgres://", "localhost:1", "")
        );
        assert!(split_url("127.0.0.1:5432").is_err());
        assert!(split_url("postgres://u@/db").is_err());
    }
}
