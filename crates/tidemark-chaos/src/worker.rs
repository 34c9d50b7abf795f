//! A simulated streaming query, run as its own process (so it can be
//! SIGSTOPped): it takes a consumer's lease, asks where to resume, commits
//! micro-batch ends through snapshots of three splits, renews, and releases
//! or abandons the lease; it retries ambiguous commits with the same batch
//! id, as an engine does. Every request is appended to a JSON-lines file.

use std::io::Write;
use std::path::PathBuf;
use std::time::Duration;

use tidemark_proto::v1 as pb;
use tidemark_proto::v1::coordinator_client::CoordinatorClient;
use tonic::transport::Channel;
use tonic_types::StatusExt;

use crate::record::{Record, now_us};

/// The table every worker reads.
pub(crate) const TABLE: &str = "db.chaos";
/// Splits per snapshot.
const SPLITS: i64 = 3;

/// A worker's settings.
#[derive(Debug, Clone, clap::Args)]
pub(crate) struct WorkerArgs {
    /// The worker's number (its holder is "w<id>").
    #[arg(long)]
    pub id: u32,
    /// gRPC endpoints to use (comma-separated URLs).
    #[arg(long, value_delimiter = ',')]
    pub endpoints: Vec<String>,
    /// Consumer ids to compete for.
    #[arg(long, value_delimiter = ',')]
    pub keys: Vec<String>,
    /// A consumer id only this worker uses (a quarter of its streams): a
    /// lease there lapses without anyone taking it over.
    #[arg(long)]
    pub own_key: Option<String>,
    /// Lease ttl.
    #[arg(long, value_parser = humantime::parse_duration)]
    pub ttl: Duration,
    /// Stop at this time (µs since the epoch).
    #[arg(long)]
    pub until_us: i64,
    /// Stop also once this file exists (a rollout's end is not known in
    /// advance).
    #[arg(long)]
    pub stop_file: Option<PathBuf>,
    /// Where to append records.
    #[arg(long)]
    pub out: PathBuf,
    /// PRNG seed.
    #[arg(long)]
    pub seed: u64,
}

/// splitmix64.
#[derive(Debug)]
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

struct Worker {
    args: WorkerArgs,
    clients: Vec<CoordinatorClient<Channel>>,
    endpoint: usize,
    out: std::io::BufWriter<std::fs::File>,
    rng: Rng,
    /// Answers in a row that said nothing (the service or its database
    /// away): the backoff grows with them, as the SDKs' retry policy does.
    failures: u32,
}

fn duration_us(d: Option<&prost_types::Duration>) -> i64 {
    d.map_or(0, |d| d.seconds * 1_000_000 + i64::from(d.nanos) / 1_000)
}

/// The record's code, reason and message for an answer.
fn verdict<T>(answer: &Result<T, tonic::Status>) -> (String, String, String) {
    match answer {
        Ok(_) => ("Ok".into(), String::new(), String::new()),
        Err(status) => (
            format!("{:?}", status.code()),
            status.get_details_error_info().map(|i| i.reason).unwrap_or_default(),
            status.message().chars().take(200).collect(),
        ),
    }
}

/// Whether an error says nothing about whether the call took effect (the
/// server may or may not have applied it).
pub(crate) fn ambiguous(code: &str) -> bool {
    matches!(
        code,
        "Unavailable" | "Unknown" | "Internal" | "Cancelled" | "DeadlineExceeded" | "Aborted"
    )
}

impl Worker {
    fn key(&self, id: &str) -> Option<pb::ConsumerKey> {
        Some(pb::ConsumerKey {
            table: TABLE.into(),
            branch: "main".into(),
            consumer_id: id.into(),
        })
    }

    fn client(&mut self) -> CoordinatorClient<Channel> {
        self.clients[self.endpoint].clone()
    }

    /// After a transport-level failure, try another replica.
    fn switch_endpoint(&mut self) {
        self.endpoint = (self.endpoint + 1) % self.clients.len();
    }

    fn write(&mut self, record: &Record) {
        let line = serde_json::to_string(record).expect("a record serializes");
        // Flushed per line: the file is read after the worker exits, and a
        // SIGSTOP must not hold records back.
        let _ = writeln!(self.out, "{line}");
        let _ = self.out.flush();
        if ambiguous(&record.code) {
            self.failures += 1;
        } else {
            self.failures = 0;
        }
    }

    /// Waits before retrying after an ambiguous answer: jittered and
    /// exponential, 50 ms doubling to 1 s (the SDKs' default policy), so
    /// workers ride out a database failover without hammering it.
    async fn back_off(&mut self) {
        let cap_ms = (50u64 << self.failures.saturating_sub(1).min(5)).min(1_000);
        tokio::time::sleep(Duration::from_millis(1 + self.rng.below(cap_ms))).await;
    }

    /// A record of `op` on a lease, sent now.
    fn started(&self, op: &str, key: &str, lease_id: &str, epoch: i64) -> Record {
        Record {
            worker: self.args.id,
            op: op.into(),
            key: key.into(),
            lease: lease_id.into(),
            epoch,
            t0: now_us(),
            ..Record::default()
        }
    }

    fn done(&self) -> bool {
        now_us() >= self.args.until_us || self.args.stop_file.as_ref().is_some_and(|f| f.exists())
    }

    async fn run(&mut self) {
        let ttl = prost_types::Duration {
            seconds: i64::try_from(self.args.ttl.as_secs()).unwrap_or(60),
            nanos: i32::try_from(self.args.ttl.subsec_nanos()).unwrap_or(0),
        };
        while !self.done() {
            let key = match &self.args.own_key {
                Some(own) if self.rng.below(4) == 0 => own.clone(),
                _ => self.args.keys[self.rng.below(self.args.keys.len() as u64) as usize].clone(),
            };
            let Some((lease_id, epoch)) = self.acquire(&key, ttl).await else {
                if self.failures > 0 {
                    self.back_off().await;
                } else {
                    tokio::time::sleep(Duration::from_millis(20 + self.rng.below(150))).await;
                }
                continue;
            };
            let Some(start) = self.recover(&key, &lease_id, epoch).await else {
                continue;
            };
            self.stream(&key, &lease_id, epoch, start, ttl).await;
        }
    }

    async fn acquire(&mut self, key: &str, ttl: prost_types::Duration) -> Option<(String, i64)> {
        let mut record = Record {
            worker: self.args.id,
            op: "acquire".into(),
            key: key.into(),
            t0: now_us(),
            ..Record::default()
        };
        let answer = self
            .client()
            .acquire_lease(pb::AcquireLeaseRequest {
                consumer: self.key(key),
                holder: format!("w{}", self.args.id),
                ttl: Some(ttl),
            })
            .await;
        record.t1 = now_us();
        (record.code, record.reason, record.message) = verdict(&answer);
        let granted = answer.ok().and_then(|r| r.into_inner().lease);
        if let Some(lease) = &granted {
            record.lease.clone_from(&lease.lease_id);
            record.epoch = lease.epoch;
            record.ttl_us = duration_us(lease.ttl.as_ref());
        }
        if ambiguous(&record.code) {
            self.switch_endpoint();
        }
        self.write(&record);
        granted.map(|l| (l.lease_id, l.epoch))
    }

    /// Where to resume: the snapshot to read next (from its first split).
    async fn recover(&mut self, key: &str, lease_id: &str, epoch: i64) -> Option<i64> {
        let mut record = self.started("recover", key, lease_id, epoch);
        let answer = self
            .client()
            .get_recovery_position(pb::GetRecoveryPositionRequest {
                consumer: self.key(key),
                startup: Some(pb::StartupOptions {
                    mode: pb::StartupMode::FromSnapshot.into(),
                    snapshot_id: 1,
                }),
                table: Some(pb::SnapshotRange {
                    earliest_snapshot: 1,
                    latest_snapshot: 1_000_000_000,
                    earliest_changelog: None,
                    changelog_decoupled: false,
                }),
                lease_id: Some(lease_id.into()),
                ..Default::default()
            })
            .await;
        record.t1 = now_us();
        (record.code, record.reason, record.message) = verdict(&answer);
        let start = answer.ok().map(|r| r.into_inner()).and_then(|r| {
            let source = pb::RecoverySource::try_from(r.source).map_or("?", |s| s.as_str_name());
            let start = r.start?;
            Some((source.to_owned(), start))
        });
        if let Some((source, start)) = &start {
            record.outcome.clone_from(source);
            record.next = Some(start.snapshot_id);
        }
        if ambiguous(&record.code) {
            self.switch_endpoint();
        }
        self.write(&record);
        start.map(|(_, s)| s.snapshot_id)
    }

    /// Commits batches from `start`, renewing on the way; then releases or
    /// abandons the lease.
    async fn stream(&mut self, key: &str, lease_id: &str, epoch: i64, start: i64, ttl: prost_types::Duration) {
        let (mut snapshot, mut index) = (start, -1i64);
        let batches = 5 + self.rng.below(60);
        let mut last_renew = now_us();
        let renew_every = i64::try_from(self.args.ttl.as_micros() / 3).unwrap_or(1_000_000);
        // Some streams stall once past their ttl (a long GC pause, a stuck
        // task) and then carry on as if nothing happened: the next commit
        // must be refused, whether or not someone took the lease meanwhile.
        let stall_at = (self.rng.below(8) == 0).then(|| self.rng.below(batches) as i64);
        for batch in 0..batches as i64 {
            if self.done() {
                break;
            }
            if stall_at == Some(batch) {
                tokio::time::sleep(self.args.ttl + Duration::from_millis(200)).await;
            }
            index += 1;
            if index == SPLITS {
                (snapshot, index) = (snapshot + 1, 0);
            }
            if !self
                .commit(key, lease_id, epoch, batch, (snapshot, index, SPLITS))
                .await
            {
                return;
            }
            if now_us() - last_renew > renew_every {
                if !self.renew(key, lease_id, epoch, ttl).await {
                    return;
                }
                last_renew = now_us();
            }
            tokio::time::sleep(Duration::from_millis(2 + self.rng.below(12))).await;
        }
        // Most queries stop cleanly; some vanish and leave the lease to
        // expire (or to be taken over by the same holder).
        if self.rng.below(10) < 7 {
            self.release(key, lease_id, epoch).await;
        }
    }

    /// One micro-batch commit, retried with the same batch id while the
    /// answer is ambiguous. `false` when the lease is lost or the commit
    /// was refused.
    async fn commit(&mut self, key: &str, lease_id: &str, epoch: i64, batch: i64, end: (i64, i64, i64)) -> bool {
        // Enough attempts to ride out a failover (Patroni's ttl is 20 s at least).
        for _ in 0..120 {
            let mut record = Record {
                batch,
                end,
                ..self.started("commit", key, lease_id, epoch)
            };
            let answer = self
                .client()
                .commit_batch(pb::CommitBatchRequest {
                    lease_id: lease_id.into(),
                    epoch,
                    batch_id: batch,
                    end: Some(pb::Offset {
                        snapshot_id: end.0,
                        index: end.1,
                        scan_snapshot: false,
                        total_splits: Some(end.2),
                    }),
                    latest_snapshot: Some(end.0 + 3),
                })
                .await;
            record.t1 = now_us();
            (record.code, record.reason, record.message) = verdict(&answer);
            if let Ok(response) = &answer {
                let response = response.get_ref();
                record.outcome = pb::CommitOutcome::try_from(response.outcome)
                    .map_or("?", |o| o.as_str_name())
                    .to_owned();
                record.next = response.next_snapshot;
                record.ttl_us = duration_us(response.lease_ttl.as_ref());
            }
            let code = record.code.clone();
            self.write(&record);
            if code == "Ok" {
                return true;
            }
            if !ambiguous(&code) || self.done() {
                return false;
            }
            self.switch_endpoint();
            self.back_off().await;
        }
        false
    }

    async fn renew(&mut self, key: &str, lease_id: &str, epoch: i64, ttl: prost_types::Duration) -> bool {
        let mut record = self.started("renew", key, lease_id, epoch);
        let answer = self
            .client()
            .renew_lease(pb::RenewLeaseRequest {
                lease_id: lease_id.into(),
                epoch,
                ttl: Some(ttl),
            })
            .await;
        record.t1 = now_us();
        (record.code, record.reason, record.message) = verdict(&answer);
        if let Ok(response) = &answer {
            record.ttl_us = duration_us(response.get_ref().ttl.as_ref());
        }
        let code = record.code.clone();
        self.write(&record);
        if ambiguous(&code) {
            self.switch_endpoint();
            return true; // the next commit finds out
        }
        code == "Ok"
    }

    async fn release(&mut self, key: &str, lease_id: &str, epoch: i64) {
        let mut record = self.started("release", key, lease_id, epoch);
        let answer = self
            .client()
            .release_lease(pb::ReleaseLeaseRequest {
                lease_id: lease_id.into(),
                epoch,
            })
            .await;
        record.t1 = now_us();
        (record.code, record.reason, record.message) = verdict(&answer);
        if let Ok(response) = &answer {
            // Release is idempotent: OK either way, and says whether the
            // lease was still live.
            record.outcome = if response.get_ref().released {
                "RELEASED"
            } else {
                "NOT_HELD"
            }
            .into();
        }
        if ambiguous(&record.code) {
            self.switch_endpoint();
        }
        self.write(&record);
    }
}

/// Runs one worker until `until_us`.
pub(crate) async fn run(args: WorkerArgs) -> anyhow::Result<()> {
    let mut clients = Vec::new();
    for url in &args.endpoints {
        let channel = Channel::from_shared(url.clone())?
            .connect_timeout(Duration::from_millis(500))
            .timeout(Duration::from_secs(3))
            .connect_lazy();
        clients.push(CoordinatorClient::new(channel));
    }
    let out = std::io::BufWriter::new(std::fs::OpenOptions::new().create(true).append(true).open(&args.out)?);
    let mut worker = Worker {
        endpoint: args.id as usize % clients.len(),
        rng: Rng(args.seed),
        failures: 0,
        clients,
        out,
        args,
    };
    worker.run().await;
    Ok(())
}
