//! The scenarios, each against tidemark and its peer in the same run.

use std::time::{Duration, Instant};

use anyhow::Context;
use sqlx::PgPool;
use tidemark_proto::v1 as pb;
use tidemark_proto::v1::retention_client::RetentionClient;

use crate::args::{Args, Scenario};
use crate::etcd;
use crate::procs::{self, Etcd, Tidemark, Watched};
use crate::report::{Memory, Row, measure};
use crate::work::closed_loop;
use crate::work::{self, Batches, Window};

pub(crate) struct Bench {
    pub(crate) args: Args,
    pub(crate) warmup: Duration,
    pub(crate) duration: Duration,
    pub(crate) database_url: String,
    pub(crate) tidemark: Tidemark,
    pub(crate) peer: PgPool,
    pub(crate) etcd: Option<Etcd>,
    pub(crate) watched: Watched,
    pub(crate) big_loaded: bool,
    /// `--production`: two replicas with credentials and metrics on.
    pub(crate) production: Option<Production>,
}

/// tidemark as deployed: two replicas on the one Postgres, credentials
/// required (each worker sends a bearer token), the metrics exporter on and
/// scraped, the sweeper at its default interval.
pub(crate) struct Production {
    replicas: [Tidemark; 2],
    bearer: work::Bearer,
    metrics: [std::net::SocketAddr; 2],
    _dir: tempfile::TempDir,
}

impl Production {
    pub(crate) fn start(binary: &std::path::Path, database_url: &str, db_connections: u32) -> anyhow::Result<Self> {
        use sha2::Digest;
        let dir = tempfile::tempdir()?;
        let token = format!("bench-{}", uuid::Uuid::new_v4().simple());
        let digest: String = sha2::Sha256::digest(token.as_bytes())
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        let auth = dir.path().join("auth.toml");
        std::fs::write(
            &auth,
            format!("[[token]]\nname = \"bench-worker\"\nsha256 = \"{digest}\"\nroles = [\"worker\"]\n"),
        )?;
        let auth = auth.display().to_string();
        let start = |metrics: std::net::SocketAddr| {
            let metrics = metrics.to_string();
            Tidemark::start_with(
                binary,
                database_url,
                db_connections,
                dir.path(),
                "warn,tidemark=info",
                &[
                    "--auth-file",
                    &auth,
                    "--metrics-listen",
                    &metrics,
                    "--sweep-interval",
                    "60s",
                ],
            )
        };
        let metrics = [procs::free_addr()?, procs::free_addr()?];
        let replicas = [start(metrics[0])?, start(metrics[1])?];
        Ok(Self {
            replicas,
            bearer: work::Bearer::token(&token)?,
            metrics,
            _dir: dir,
        })
    }
}

impl Bench {
    pub(crate) fn window(&self) -> Window {
        Window::starting_in(self.warmup, self.duration)
    }

    pub(crate) fn watched_with_etcd(&self) -> Watched {
        Watched {
            etcd: self.etcd.as_ref().map(Etcd::pid),
            ..self.watched.clone()
        }
    }

    /// A checkpoint between measurements, so no system pays for the WAL
    /// another one wrote (needs a superuser or pg_checkpoint; skipped with a
    /// note otherwise).
    pub(crate) async fn checkpoint(&self) {
        if let Err(e) = sqlx::query("CHECKPOINT").execute(&self.peer).await {
            println!("  (no checkpoint between points: {e})");
        }
    }

    /// One commit point: every system, in a random order, each after a
    /// checkpoint.
    pub(crate) async fn commit(&self, rows: &mut Vec<Row>, c: usize) -> anyhow::Result<()> {
        self.point(rows, c, async |system| match system {
            "tidemark" => self.commit_tidemark(c).await,
            "tidemark-prod" => self.commit_production(c).await,
            "raw-sql" => self.commit_sql(c).await,
            _ => self.commit_etcd(c).await,
        })
        .await
    }

    /// Runs `run` for every system (etcd when there is one), in a random
    /// order, each after a checkpoint.
    async fn point(
        &self,
        rows: &mut Vec<Row>,
        c: usize,
        run: impl AsyncFn(&'static str) -> anyhow::Result<Row>,
    ) -> anyhow::Result<()> {
        let mut systems = vec!["tidemark", "raw-sql"];
        if self.etcd.is_some() {
            systems.push("etcd");
        }
        if self.production.is_some() {
            systems.push("tidemark-prod");
        }
        shuffle(&mut systems);
        println!("  {c} workers, in this order: {}", systems.join(", "));
        for system in systems {
            self.checkpoint().await;
            rows.push(run(system).await?);
        }
        Ok(())
    }

    async fn commit_tidemark(&self, c: usize) -> anyhow::Result<Row> {
        let (window, workers) = self
            .committing(c, &[&self.tidemark], &work::Bearer::default(), "bench.commit")
            .await?;
        measure(Scenario::Commit, "tidemark", c, window, &self.watched, workers).await
    }

    /// `c` closed-loop committers, each with a lease on `table` taken
    /// through one of `servers` in turn, sending `bearer`.
    async fn committing(
        &self,
        c: usize,
        servers: &[&Tidemark],
        bearer: &work::Bearer,
        table: &str,
    ) -> anyhow::Result<(Window, Vec<impl Future<Output = work::Recorder> + Send + 'static>)> {
        let mut ready = Vec::new();
        for i in 0..c {
            let server = servers[i % servers.len()];
            let mut client = work::coordinator(work::channel(&server.url()).await?, bearer.clone());
            let lease = work::tidemark_lease(&mut client, work::key(table, &format!("c{c}-w{i}")), "bench").await?;
            ready.push((client, lease));
        }
        let window = self.window();
        let workers = ready
            .into_iter()
            .map(|(mut client, lease)| {
                let mut batches = Batches::new();
                async move { closed_loop!(window, work::tidemark_commit(&mut client, &lease, &mut batches).await) }
            })
            .collect();
        Ok((window, workers))
    }

    /// The commit point against the production replicas: workers spread
    /// over both, each call with its token, `/metrics` scraped every
    /// second from each replica while they work.
    async fn commit_production(&self, c: usize) -> anyhow::Result<Row> {
        let production = self.production.as_ref().context("no production replicas")?;
        let [first, second] = &production.replicas;
        let (window, workers) = self
            .committing(c, &[first, second], &production.bearer, "bench.prod")
            .await?;
        let scrapers: Vec<_> = production
            .metrics
            .iter()
            .map(|&addr| tokio::spawn(scrape_until(addr, window.until)))
            .collect();
        let watched = Watched {
            tidemark: Some(production.replicas[0].pid()),
            tidemark_replica: Some(production.replicas[1].pid()),
            ..self.watched.clone()
        };
        let row = measure(Scenario::Commit, "tidemark-prod", c, window, &watched, workers).await?;
        for scraper in scrapers {
            let scrapes = scraper.await??;
            anyhow::ensure!(scrapes > 0, "the metrics exporter was never scraped");
        }
        Ok(row)
    }

    /// `c` workers committing on their own leases, alone and then beside
    /// one client that fires [`BURST`] commits at once, twice a second, on a
    /// single lease of its own (issue 29: a batch takes one write per key, so the burst
    /// must not shrink everyone else's batches). Prints the ratio of the
    /// workers' throughput beside the burst to alone.
    pub(crate) async fn burst(&self, rows: &mut Vec<Row>, c: usize) -> anyhow::Result<()> {
        self.checkpoint().await;
        let table = format!("bench.burst{c}");
        let (window, workers) = self
            .committing(c, &[&self.tidemark], &work::Bearer::default(), &table)
            .await?;
        let alone = measure(Scenario::Burst, "tidemark", c, window, &self.watched, workers).await?;
        self.checkpoint().await;
        let table = format!("bench.burst{c}b");
        let (window, workers) = self
            .committing(c, &[&self.tidemark], &work::Bearer::default(), &table)
            .await?;
        let mut client = work::coordinator(work::channel(&self.tidemark.url()).await?, work::Bearer::default());
        let lease = work::tidemark_lease(&mut client, work::key(&table, "burst"), "burst").await?;
        let burster = tokio::spawn(burst_until(client, lease, window.until));
        let beside = measure(Scenario::Burst, "tidemark+burst", c, window, &self.watched, workers).await?;
        let sent = burster.await??;
        println!(
            "    {c} workers beside one client's {BURST}-call burst on one lease ({sent} burst calls): \
             {:.2} of their throughput alone ({:.0} vs {:.0} commits/s; p99 {:.1} vs {:.1} ms)",
            beside.throughput / alone.throughput.max(f64::MIN_POSITIVE),
            beside.throughput,
            alone.throughput,
            beside.p99_ms,
            alone.p99_ms
        );
        rows.push(alone);
        rows.push(beside);
        Ok(())
    }

    async fn commit_sql(&self, c: usize) -> anyhow::Result<Row> {
        let mut workers = Vec::new();
        for i in 0..c {
            work::peer_consumer(&self.peer, "bench.commit", &format!("c{c}-w{i}")).await?;
        }
        let window = self.window();
        for i in 0..c {
            let pool = self.peer.clone();
            let id = format!("c{c}-w{i}");
            let mut batches = Batches::new();
            workers.push(async move {
                closed_loop!(
                    window,
                    work::peer_commit(&pool, "bench.commit", &id, &mut batches).await
                )
            });
        }
        measure(Scenario::Commit, "raw-sql", c, window, &self.watched, workers).await
    }

    async fn commit_etcd(&self, c: usize) -> anyhow::Result<Row> {
        let etcd = self.etcd.as_ref().context("no etcd")?;
        let mut ready = Vec::new();
        for i in 0..c {
            let mut client = etcd::KvClient::new(work::channel(&etcd.url).await?);
            let id = format!("c{c}-w{i}");
            work::etcd_consumer(&mut client, &id).await?;
            ready.push((client, id));
        }
        let window = self.window();
        let mut workers = Vec::new();
        for (mut client, id) in ready {
            let mut batches = Batches::new();
            workers.push(async move { closed_loop!(window, work::etcd_commit(&mut client, &id, &mut batches).await) });
        }
        measure(Scenario::Commit, "etcd", c, window, &self.watched_with_etcd(), workers).await
    }

    /// One recovery point: every system, in a random order, each after a
    /// checkpoint.
    pub(crate) async fn recover(&self, rows: &mut Vec<Row>, c: usize) -> anyhow::Result<()> {
        self.point(rows, c, async |system| match system {
            "tidemark" => self.recover_tidemark(c).await,
            "raw-sql" => self.recover_sql(c).await,
            _ => self.recover_etcd(c).await,
        })
        .await
    }

    async fn recover_tidemark(&self, c: usize) -> anyhow::Result<Row> {
        let mut ready = Vec::new();
        for i in 0..c {
            let mut client = work::coordinator(work::channel(&self.tidemark.url()).await?, work::Bearer::default());
            let key = work::key("bench.recover", &format!("c{c}-w{i}"));
            let lease = work::tidemark_lease(&mut client, key.clone(), "bench").await?;
            work::tidemark_commit(&mut client, &lease, &mut Batches::new()).await?;
            ready.push((client, key));
        }
        let window = self.window();
        let workers: Vec<_> =
            ready
                .into_iter()
                .map(|(mut client, key)| async move {
                    closed_loop!(window, work::tidemark_recover(&mut client, &key).await)
                })
                .collect();
        measure(Scenario::Recover, "tidemark", c, window, &self.watched, workers).await
    }

    async fn recover_sql(&self, c: usize) -> anyhow::Result<Row> {
        for i in 0..c {
            work::peer_consumer(&self.peer, "bench.recover", &format!("c{c}-w{i}")).await?;
        }
        let window = self.window();
        let workers: Vec<_> = (0..c)
            .map(|i| {
                let pool = self.peer.clone();
                let id = format!("c{c}-w{i}");
                async move { closed_loop!(window, work::peer_recover(&pool, "bench.recover", &id).await) }
            })
            .collect();
        measure(Scenario::Recover, "raw-sql", c, window, &self.watched, workers).await
    }

    async fn recover_etcd(&self, c: usize) -> anyhow::Result<Row> {
        let etcd = self.etcd.as_ref().context("no etcd")?;
        let mut ready = Vec::new();
        for i in 0..c {
            let mut client = etcd::KvClient::new(work::channel(&etcd.url).await?);
            let id = format!("r{c}-w{i}");
            work::etcd_consumer(&mut client, &id).await?;
            work::etcd_commit(&mut client, &id, &mut Batches::new()).await?;
            ready.push((client, id));
        }
        let window = self.window();
        let workers: Vec<_> = ready
            .into_iter()
            .map(|(mut client, id)| async move { closed_loop!(window, work::etcd_recover(&mut client, &id).await) })
            .collect();
        measure(Scenario::Recover, "etcd", c, window, &self.watched_with_etcd(), workers).await
    }

    pub(crate) async fn churn(&self, rows: &mut Vec<Row>, c: usize) -> anyhow::Result<()> {
        let mut clients = Vec::new();
        for _ in 0..c {
            clients.push(work::coordinator(
                work::channel(&self.tidemark.url()).await?,
                work::Bearer::default(),
            ));
        }
        let window = self.window();
        let workers: Vec<_> = clients
            .into_iter()
            .enumerate()
            .map(|(i, mut client)| {
                let key = work::key("bench.churn", &format!("c{c}-w{i}"));
                let holder = format!("holder-{i}");
                async move { closed_loop!(window, work::tidemark_churn(&mut client, &key, &holder).await) }
            })
            .collect();
        rows.push(measure(Scenario::Churn, "tidemark", c, window, &self.watched, workers).await?);

        for i in 0..c {
            work::peer_consumer(&self.peer, "bench.churn", &format!("c{c}-w{i}")).await?;
            sqlx::query("UPDATE peer_consumers SET lease_deadline = now() WHERE table_name = 'bench.churn' AND consumer_id = $1")
                .bind(format!("c{c}-w{i}"))
                .execute(&self.peer)
                .await?;
        }
        let window = self.window();
        let workers: Vec<_> = (0..c)
            .map(|i| {
                let pool = self.peer.clone();
                let id = format!("c{c}-w{i}");
                let holder = format!("holder-{i}");
                async move { closed_loop!(window, work::peer_churn(&pool, "bench.churn", &id, &holder).await) }
            })
            .collect();
        rows.push(measure(Scenario::Churn, "raw-sql", c, window, &self.watched, workers).await?);
        Ok(())
    }

    /// Loads the big branch (tidemark's table and the peer's) once.
    pub(crate) async fn load_big(&mut self) -> anyhow::Result<()> {
        if self.big_loaded {
            return Ok(());
        }
        let n = self.args.fence_consumers;
        let started = Instant::now();
        let pool = PgPool::connect(&self.database_url).await?;
        work::seed_consumers(&pool, "bench.big", n).await?;
        // Hard fleets: 1% expired below the fence (about what one interval
        // leaves for the sweeper at this size) and 30% (a mass expiry the
        // sweeper has not drained yet), each with 1% live leases pinning
        // full scans.
        work::seed_hard_consumers(&pool, "bench.hard", n, 0.01).await?;
        work::seed_hard_consumers(&pool, "bench.backlog", n, 0.30).await?;
        sqlx::query(
            "INSERT INTO peer_consumers (table_name, branch, consumer_id, epoch, next_snapshot, updated_at) \
             SELECT 'bench.big', 'main', 'consumer-' || i, 0, 1000 + (i * 7919) % 50000, now() \
             FROM generate_series(1, $1) AS i",
        )
        .bind(n as i64)
        .execute(&pool)
        .await?;
        sqlx::query("ANALYZE").execute(&pool).await?;
        pool.close().await;
        println!(
            "  loaded {n} consumers on branch bench.big@main in {:?}",
            started.elapsed()
        );
        self.big_loaded = true;
        Ok(())
    }

    pub(crate) async fn fence(&mut self, rows: &mut Vec<Row>) -> anyhow::Result<()> {
        self.load_big().await?;
        for c in [1, 4] {
            rows.push(self.tidemark_fence(c, "tidemark", "bench.big").await?);
            let window = self.window();
            let workers: Vec<_> = (0..c)
                .map(|_| {
                    let pool = self.peer.clone();
                    async move { closed_loop!(window, work::peer_fence(&pool, "bench.big").await) }
                })
                .collect();
            rows.push(measure(Scenario::Fence, "raw-sql", c, window, &self.watched, workers).await?);
            // The same fleet size the hard ways (absolute figures).
            rows.push(self.tidemark_fence(c, "tidemark-hard", "bench.hard").await?);
            rows.push(self.tidemark_fence(c, "tidemark-backlog", "bench.backlog").await?);
        }
        Ok(())
    }

    /// `c` callers reading `table`'s fence, reported as `system`.
    async fn tidemark_fence(&self, c: usize, system: &'static str, table: &'static str) -> anyhow::Result<Row> {
        let mut clients = Vec::new();
        for _ in 0..c {
            clients.push(RetentionClient::new(work::channel(&self.tidemark.url()).await?));
        }
        let window = self.window();
        let workers: Vec<_> = clients
            .into_iter()
            .map(|mut client| async move { closed_loop!(window, work::tidemark_fence(&mut client, table).await) })
            .collect();
        measure(Scenario::Fence, system, c, window, &self.watched, workers).await
    }

    pub(crate) async fn sqlite(&self, rows: &mut Vec<Row>, binary: &std::path::Path) -> anyhow::Result<()> {
        let dir = tempfile::tempdir()?;
        let url = format!("sqlite://{}", dir.path().join("bench.db").display());
        let server = Tidemark::start(binary, &url, 1, dir.path())?;
        let watched = Watched {
            tidemark: Some(server.pid()),
            ..Watched::default()
        };
        for &c in &self.args.concurrency {
            let mut ready = Vec::new();
            for i in 0..c {
                let mut client = work::coordinator(work::channel(&server.url()).await?, work::Bearer::default());
                let lease =
                    work::tidemark_lease(&mut client, work::key("bench.commit", &format!("c{c}-w{i}")), "bench")
                        .await?;
                ready.push((client, lease));
            }
            let window = self.window();
            let workers: Vec<_> = ready
                .into_iter()
                .map(|(mut client, lease)| {
                    let mut batches = Batches::new();
                    async move { closed_loop!(window, work::tidemark_commit(&mut client, &lease, &mut batches).await) }
                })
                .collect();
            rows.push(measure(Scenario::Sqlite, "tidemark-sqlite", c, window, &watched, workers).await?);
        }
        Ok(())
    }

    pub(crate) async fn memory(&mut self) -> anyhow::Result<Memory> {
        self.load_big().await?;
        let n = self.args.live_leases.min(self.args.fence_consumers);
        let per_worker = n.div_ceil(16);
        let mut tasks = Vec::new();
        for w in 0..16 {
            let mut client = work::coordinator(work::channel(&self.tidemark.url()).await?, work::Bearer::default());
            tasks.push(tokio::spawn(async move {
                for i in (w * per_worker + 1)..=((w + 1) * per_worker).min(n) {
                    let key = work::key("bench.big", &format!("consumer-{i}"));
                    work::tidemark_lease(&mut client, key, &format!("query-{i}")).await?;
                }
                anyhow::Ok(())
            }));
        }
        for task in tasks {
            task.await??;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
        let (rss, peak) = procs::memory_kib(self.tidemark.pid()).context("tidemark's memory")?;
        let memory = Memory {
            consumers: self.args.fence_consumers,
            live_leases: n,
            rss_mib: rss as f64 / 1024.0,
            peak_rss_mib: peak as f64 / 1024.0,
        };
        println!(
            "  memory: {} consumers, {} live leases: tidemark RSS {:.1} MiB (peak {:.1} MiB)",
            memory.consumers, memory.live_leases, memory.rss_mib, memory.peak_rss_mib
        );
        Ok(memory)
    }
}

/// Shuffles `items` (Fisher–Yates, seeded by the process's random state).
fn shuffle<T>(items: &mut [T]) {
    use std::hash::{BuildHasher, RandomState};
    let random = RandomState::new();
    for i in (1..items.len()).rev() {
        let j = usize::try_from(random.hash_one(i) % (i as u64 + 1)).unwrap_or(0);
        items.swap(i, j);
    }
}

/// Scrapes `/metrics` at `addr` every second until `until`, as Prometheus
/// would (more often than its usual 15 s); how many scrapes succeeded.
async fn scrape_until(addr: std::net::SocketAddr, until: Instant) -> anyhow::Result<usize> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut scrapes = 0;
    while Instant::now() < until {
        let mut stream = tokio::net::TcpStream::connect(addr).await?;
        stream
            .write_all(format!("GET /metrics HTTP/1.0\r\nHost: {addr}\r\n\r\n").as_bytes())
            .await?;
        let mut body = Vec::new();
        stream.read_to_end(&mut body).await?;
        anyhow::ensure!(
            body.starts_with(b"HTTP/1.0 200") || body.starts_with(b"HTTP/1.1 200"),
            "metrics scrape failed: {}",
            String::from_utf8_lossy(&body[..body.len().min(200)])
        );
        scrapes += 1;
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    Ok(scrapes)
}

/// Commits one burst client keeps in flight on its single lease.
const BURST: usize = 256;

/// Fires [`BURST`] commits at once on `lease`, every 500 ms, until `until`
/// (what they answer does not matter — beyond its share of the queue a
/// burst is refused `OVERLOADED` — only the load they put on the batches and
/// the queue). Returns how many were sent.
async fn burst_until(client: work::Coordinator, lease: pb::Lease, until: Instant) -> anyhow::Result<usize> {
    let mut batches = Batches::new();
    let mut sent = 0;
    while Instant::now() < until {
        let next_wave = Instant::now() + Duration::from_millis(500);
        let wave: Vec<_> = (0..BURST)
            .map(|_| {
                let (end, _, batch) = batches.next();
                let mut client = client.clone();
                let request = pb::CommitBatchRequest {
                    lease_id: lease.lease_id.clone(),
                    epoch: lease.epoch,
                    batch_id: batch,
                    end: Some(end),
                    latest_snapshot: Some(batches.snapshot + 1),
                };
                tokio::spawn(async move { client.commit_batch(request).await.is_ok() })
            })
            .collect();
        for call in wave {
            call.await?;
            sent += 1;
        }
        tokio::time::sleep_until(next_wave.into()).await;
    }
    Ok(sent)
}
