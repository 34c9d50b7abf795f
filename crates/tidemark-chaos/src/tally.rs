//! Group commit's counters over a run, scraped from the replicas' metrics.

use std::collections::BTreeMap;
use std::time::Duration;

use crate::check;
use crate::record::now_us;

/// Group commit's counters over a run.
#[derive(Debug, Clone, Default)]
pub(crate) struct GroupCommitTally(std::sync::Arc<std::sync::Mutex<Tally>>);

#[derive(Debug, Default)]
pub(crate) struct Tally {
    /// Per replica: the counters last scraped.
    last: BTreeMap<u16, check::GroupCommit>,
    total: check::GroupCommit,
}

impl GroupCommitTally {
    pub(crate) async fn scrape(self, ports: Vec<u16>, until: i64) {
        loop {
            for &port in &ports {
                if let Some(now) = scrape_group_commit(port).await {
                    let mut tally = self.0.lock().expect("not poisoned");
                    let last = tally.last.get(&port).copied().unwrap_or_default();
                    // A counter that went down: the replica restarted.
                    let since = if now.statements < last.statements {
                        now
                    } else {
                        now.minus(last)
                    };
                    tally.total = tally.total.plus(since);
                    tally.last.insert(port, now);
                }
            }
            if now_us() > until {
                return;
            }
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
    }

    pub(crate) fn totals(&self) -> check::GroupCommit {
        self.0.lock().expect("not poisoned").total
    }
}

/// A replica's group-commit counters from its metrics endpoint.
pub(crate) async fn scrape_group_commit(port: u16) -> Option<check::GroupCommit> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut stream = tokio::time::timeout(
        Duration::from_millis(500),
        tokio::net::TcpStream::connect(("127.0.0.1", port)),
    )
    .await
    .ok()?
    .ok()?;
    stream
        .write_all(b"GET /metrics HTTP/1.0\r\nHost: localhost\r\n\r\n")
        .await
        .ok()?;
    let mut body = String::new();
    tokio::time::timeout(Duration::from_secs(2), stream.read_to_string(&mut body))
        .await
        .ok()?
        .ok()?;
    let value = |name: &str| {
        body.lines()
            .find(|l| l.starts_with(name) && l[name.len()..].starts_with([' ', '{']))
            .and_then(|l| l.rsplit(' ').next())
            .and_then(|v| v.parse::<f64>().ok())
            .map_or(0, |v| v as u64)
    };
    Some(check::GroupCommit {
        statements: value("tidemark_commit_statements_total"),
        writes: value("tidemark_commit_statement_writes_total"),
        alone: value("tidemark_commit_writes_alone_total"),
    })
}
