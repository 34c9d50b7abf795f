//! Sockets and descriptors under pressure (issue: connections without
//! bounds). A container on a systemd host starts with a soft open-files
//! limit of 1024: tidemark raises it to the hard limit, so a fleet's idle
//! worker connections leave room for more; and the console, reachable
//! before sign-in, closes requests whose headers never finish and refuses
//! connections beyond its cap.

use std::io::{Read, Write};
use std::path::Path;
use std::time::{Duration, Instant};

use tidemark_testkit::load::{acquire, coordinator, snapshot_commit};
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
