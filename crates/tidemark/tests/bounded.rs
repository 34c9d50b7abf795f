//! Bounded under stress. Sockets and descriptors: a container on a systemd
//! host starts with a soft open-files limit of 1024; tidemark raises it to
//! the hard limit, so a fleet's idle worker connections leave room for
//! more, and the console, reachable before sign-in, closes requests whose
//! headers never finish and refuses connections beyond its cap. Shutdowns
//! that end: SIGTERM stops the process within drain + grace + 5 s while
//! background work waits on a table store that does not answer.

use std::io::{Read, Write};
use std::path::Path;
use std::time::{Duration, Instant};

use tidemark_testkit::load::{acquire, coordinator, snapshot_commit};
use tidemark_testkit::postgres::FreshDatabase;
use tidemark_testkit::process::{ServerProcess, free_port};

const BIN: &str = env!("CARGO_BIN_EXE_tidemark");
const IDLE_WORKERS: usize = 1_200;
const HALF_SENT: usize = 1_200;

/// `tidemark` started with a soft limit of 1024 open files (the hard limit
/// as it is), as a container on a systemd host starts.
fn start_with_1024_open_files(dir: &Path, args: &[&str]) -> ServerProcess {
    let wrapper = dir.join("tidemark-1024");
    std::fs::write(
        &wrapper,
        format!("#!/bin/sh\nexec prlimit --nofile=1024: -- {BIN} \"$@\"\n"),
    )
    .unwrap();
    let status = std::process::Command::new("chmod")
        .arg("+x")
        .arg(&wrapper)
        .status()
        .unwrap();
    assert!(status.success());
    let args: Vec<String> = ["--listen", "127.0.0.1:0", "--metrics-listen", "off"]
        .iter()
        .chain(args)
        .map(|a| (*a).to_owned())
        .collect();
    ServerProcess::start(&wrapper, &args, dir, "tidemark").expect("tidemark starts under prlimit (util-linux)")
}

fn open_files(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd"))
        .map(|d| d.count())
        .unwrap_or(0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_1024_open_files_idle_workers_and_a_console_slowloris_leave_room_for_a_worker() {
    // This test holds 2,400 sockets of its own.
    tidemark_net::raise_open_files_limit();
    let dir = tempfile::tempdir().unwrap();
    let console_port = free_port();
    let console = format!("127.0.0.1:{console_port}");
    let server = start_with_1024_open_files(dir.path(), &["--console-listen", &console]);

    // A fleet's idle workers: 1,200 HTTP/2 connections, each used once.
    let mut idle = Vec::with_capacity(IDLE_WORKERS);
    for _ in 0..IDLE_WORKERS {
        let channel = tonic::transport::Endpoint::from_shared(server.url())
            .unwrap()
            .connect_timeout(Duration::from_secs(10))
            .connect()
            .await
            .expect("an idle worker connects");
        idle.push(channel);
    }
    eprintln!(
        "{} idle worker connections; the server holds {} open files",
        idle.len(),
        open_files(server.pid())
    );

    // A new worker still connects, takes a lease and commits.
    let new_worker = || async {
        let mut client = coordinator(&server.url(), Duration::from_secs(10));
        let lease = acquire(&mut client, "after-the-crowd", "q").await;
        client
            .commit_batch(snapshot_commit(&lease, 0, None))
            .await
            .expect("a new worker commits");
        client
            .release_lease(tidemark_proto::v1::ReleaseLeaseRequest {
                lease_id: lease.lease_id.clone(),
                epoch: lease.epoch,
            })
            .await
            .expect("and releases");
    };
    new_worker().await;

    // A slowloris on the console: 1,200 requests whose headers never end.
    let started = Instant::now();
    let held: Vec<std::net::TcpStream> = (0..HALF_SENT)
        .map(|_| {
            let mut stream = std::net::TcpStream::connect(&console).expect("a console connection");
            stream.write_all(b"GET / HTTP/1.1\r\nHost: tidemark\r\n").unwrap();
            stream
        })
        .collect();
    // Workers are not starved of descriptors meanwhile.
    new_worker().await;
    // Every half-sent request is closed within 60 s (the header timeout is
    // 10 s; connections over the cap are refused at once).
    let (closed, still_open) = tokio::task::spawn_blocking(move || {
        // Read each until it ends, all within one overall limit (twice the
        // 60 s bound would be too long a test; 75 s tells the two apart).
        let limit = started + Duration::from_secs(75);
        let (mut slowest, mut still_open) = (Duration::ZERO, 0);
        for mut stream in held {
            let mut buf = [0u8; 512];
            loop {
                let left = limit
                    .saturating_duration_since(Instant::now())
                    .max(Duration::from_millis(1));
                stream.set_read_timeout(Some(left)).unwrap();
                match stream.read(&mut buf) {
                    Ok(0) => break,
                    Ok(_) => {} // a 408 or the like before the close
                    Err(e) if matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut) => {
                        still_open += 1;
                        break;
                    }
                    Err(_) => break, // reset: closed
                }
            }
            slowest = slowest.max(started.elapsed());
        }
        (slowest, still_open)
    })
    .await
    .unwrap();
    eprintln!("the last half-sent console request was closed after {closed:?} ({still_open} still open at 75 s)");
    assert_eq!(still_open, 0, "half-sent console requests still open after 75 s");
    assert!(
        closed < Duration::from_secs(60),
        "half-sent console requests held for {closed:?}"
    );
    drop(idle);
    assert!(
        server.logs().contains("soft_at_start=Some(1024)"),
        "the limit it started with is logged:\n{}",
        server.logs()
    );
}

/// A TCP endpoint that accepts connections and never answers (a store
/// behind a partition); its port.
fn black_hole() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        let mut held = Vec::new();
        for stream in listener.incoming() {
            held.push(stream);
        }
    });
    port
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_ends_within_drain_and_grace_while_the_table_store_does_not_answer() {
    let db = FreshDatabase::create()
        .await
        .expect("Postgres (scripts/test.sh starts one)");
    let dir = tempfile::tempdir().unwrap();
    let endpoint = format!("http://127.0.0.1:{}", black_hole());
    let env: Vec<(String, String)> = [
        ("AWS_ENDPOINT", endpoint.as_str()),
        ("AWS_ALLOW_HTTP", "true"),
        ("AWS_ACCESS_KEY_ID", "testing"),
        ("AWS_SECRET_ACCESS_KEY", "testing"),
        ("AWS_REGION", "us-east-1"),
    ]
    .iter()
    .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
    .collect();
    const DRAIN: Duration = Duration::from_millis(500);
    const GRACE: Duration = Duration::from_secs(1);
    let args: Vec<String> = [
        "--listen",
        "127.0.0.1:0",
        "--metrics-listen",
        "off",
        "--database-url",
        &db.url,
        "--mirror-interval",
        "100ms",
        "--mirror-refresh",
        "2s",
        "--gauge-interval",
        "300ms",
        "--shutdown-drain",
        "500ms",
        "--shutdown-grace",
        "1s",
    ]
    .iter()
    .map(|a| (*a).to_owned())
    .collect();
    let mut server = ServerProcess::start_with_env(Path::new(BIN), &args, &env, dir.path(), "tidemark").unwrap();
    // Registered while its store already does not answer (RegisterTable
    // would read it), with consumers: the mirror's rounds, the keeper's
    // passes and lag reads all wait on the store.
    let mut sql = <sqlx::PgConnection as sqlx::Connection>::connect(&db.url)
        .await
        .unwrap();
    sqlx::query(
        "INSERT INTO paimon_tables (table_name, location, registered_at, registered_by) \
         VALUES ('db.orders', 's3://lake/warehouse/db.db/orders', now(), 'test')",
    )
    .execute(&mut sql)
    .await
    .unwrap();
    let mut client = coordinator(&server.url(), Duration::from_secs(10));
    for id in ["a", "b", "c"] {
        let lease = acquire(&mut client, id, "q").await;
        client
            .commit_batch(snapshot_commit(&lease, 0, None))
            .await
            .expect("a commit");
    }
    tokio::time::sleep(Duration::from_secs(2)).await;
    let started = Instant::now();
    server.signal("TERM");
    let bound = DRAIN + GRACE + Duration::from_secs(5);
    while !server.exited() {
        assert!(
            started.elapsed() < bound * 2,
            "still running {:?} after SIGTERM:\n{}",
            started.elapsed(),
            server.logs()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let took = started.elapsed();
    eprintln!("exited {took:?} after SIGTERM (drain {DRAIN:?} + grace {GRACE:?} + 5 s = {bound:?})");
    assert!(took <= bound, "exited {took:?} after SIGTERM, past {bound:?}");
    drop(sql);
    db.drop_now().await;
}

/// A TCP proxy that can freeze: every byte read is held and nothing is
/// forwarded, so the connections stay open and every call on them waits
/// (a half-open connection after a failover, which TCP would take ~15
/// minutes of retransmits to notice). Its port.
fn freezable_proxy(target: std::net::SocketAddr, frozen: std::sync::Arc<std::sync::atomic::AtomicBool>) -> u16 {
    use std::sync::atomic::Ordering;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let port = listener.local_addr().unwrap().port();
    let listener = tokio::net::TcpListener::from_std(listener).unwrap();
    async fn pipe(
        mut from: tokio::net::tcp::OwnedReadHalf,
        mut to: tokio::net::tcp::OwnedWriteHalf,
        frozen: std::sync::Arc<std::sync::atomic::AtomicBool>,
    ) {
        let mut buf = vec![0u8; 16 * 1024];
        loop {
            let n = match from.read(&mut buf).await {
                Ok(0) | Err(_) => return,
                Ok(n) => n,
            };
            while frozen.load(Ordering::SeqCst) {
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            if to.write_all(&buf[..n]).await.is_err() {
                return;
            }
        }
    }
    tokio::spawn(async move {
        while let Ok((client, _)) = listener.accept().await {
            let frozen = std::sync::Arc::clone(&frozen);
            tokio::spawn(async move {
                let Ok(server) = tokio::net::TcpStream::connect(target).await else {
                    return;
                };
                let (client_read, client_write) = client.into_split();
                let (server_read, server_write) = server.into_split();
                tokio::join!(
                    pipe(client_read, server_write, std::sync::Arc::clone(&frozen)),
                    pipe(server_read, client_write, frozen),
                );
            });
        }
    });
    port
}

/// The database stops answering without closing anything (every
/// connection half-open): the background jobs' statements, the gauge
/// collector's and the sweeper's, never return. SIGTERM still ends the
/// process within drain + grace + 5 s.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_ends_within_drain_and_grace_while_the_database_does_not_answer() {
    let db = FreshDatabase::create()
        .await
        .expect("Postgres (scripts/test.sh starts one)");
    let options: sqlx::postgres::PgConnectOptions = db.url.parse().unwrap();
    let host = match options.get_host() {
        "localhost" => "127.0.0.1",
        host => host,
    };
    let target: std::net::SocketAddr = format!("{host}:{}", options.get_port()).parse().unwrap();
    let frozen = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let port = freezable_proxy(target, std::sync::Arc::clone(&frozen));
    let original = format!(":{}/", options.get_port());
    assert!(db.url.contains(&original), "{}", db.url);
    let through_proxy = db.url.replacen(&original, &format!(":{port}/"), 1);
    let dir = tempfile::tempdir().unwrap();
    const DRAIN: Duration = Duration::from_millis(500);
    const GRACE: Duration = Duration::from_secs(1);
    let args: Vec<String> = [
        "--listen",
        "127.0.0.1:0",
        "--metrics-listen",
        "off",
        "--database-url",
        &through_proxy,
        "--gauge-interval",
        "200ms",
        "--sweep-interval",
        "1s",
        "--history-retention",
        "1h",
        "--readiness-interval",
        "200ms",
        "--shutdown-drain",
        "500ms",
        "--shutdown-grace",
        "1s",
    ]
    .iter()
    .map(|a| (*a).to_owned())
    .collect();
    let mut server = ServerProcess::start(Path::new(BIN), &args, dir.path(), "tidemark").unwrap();
    let mut client = coordinator(&server.url(), Duration::from_secs(10));
    for id in ["a", "b", "c"] {
        let lease = acquire(&mut client, id, "q").await;
        client
            .commit_batch(snapshot_commit(&lease, 0, None))
            .await
            .expect("a commit");
    }
    frozen.store(true, std::sync::atomic::Ordering::SeqCst);
    // Long enough for the gauges, the sweeper and readiness to be waiting.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let started = Instant::now();
    server.signal("TERM");
    let bound = DRAIN + GRACE + Duration::from_secs(5);
    while !server.exited() {
        if started.elapsed() > bound * 2 {
            server.kill();
            panic!(
                "still running {:?} after SIGTERM:\n{}",
                started.elapsed(),
                server.logs()
            );
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let took = started.elapsed();
    eprintln!("exited {took:?} after SIGTERM with the database frozen (bound {bound:?})");
    assert!(took <= bound, "exited {took:?} after SIGTERM, past {bound:?}");
    frozen.store(false, std::sync::atomic::Ordering::SeqCst);
    db.drop_now().await;
}
