//! A loopback TCP proxy in front of a replica that can cut every open
//! connection at once (clients see their in-flight calls fail mid-RPC, with
//! no way to know whether the server applied them) or delay every chunk.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;

/// A running proxy.
#[derive(Debug)]
pub(crate) struct Proxy {
    /// Where clients connect.
    pub addr: SocketAddr,
    cuts: watch::Sender<u64>,
    delay_ms: Arc<AtomicU64>,
    /// Whether it listens: closed, a connection is refused, as a Service
    /// with no ready endpoint refuses it (connections already open stay).
    open: watch::Sender<bool>,
}

impl Proxy {
    /// Listens on a free loopback port and forwards to `target`.
    pub(crate) async fn start(target: SocketAddr) -> std::io::Result<Self> {
        Self::start_as(target, true).await
    }

    /// [`Proxy::start`], listening only once [`Proxy::set_open`] says so
    /// when `open` is false.
    pub(crate) async fn start_as(target: SocketAddr, open: bool) -> std::io::Result<Self> {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        let (cuts, _) = watch::channel(0u64);
        let (opened, mut open_rx) = watch::channel(open);
        let delay_ms = Arc::new(AtomicU64::new(0));
        let (cut_rx, delay) = (cuts.subscribe(), Arc::clone(&delay_ms));
        let mut listener = open.then_some(listener);
        tokio::spawn(async move {
            loop {
                let Some(listening) = &listener else {
                    // Closed: wait to be opened, then listen on the same port.
                    if open_rx.wait_for(|open| *open).await.is_err() {
                        return;
                    }
                    listener = rebind(addr).await;
                    continue;
                };
                tokio::select! {
                    accepted = listening.accept() => {
                        let Ok((client, _)) = accepted else { continue };
                        let (cut_rx, delay) = (cut_rx.clone(), Arc::clone(&delay));
                        tokio::spawn(async move {
                            // A replica that is down refuses: drop the client too.
                            if let Ok(server) = TcpStream::connect(target).await {
                                forward(client, server, cut_rx, delay).await;
                            }
                        });
                    }
                    changed = open_rx.changed() => {
                        if changed.is_err() {
                            return;
                        }
                        if !*open_rx.borrow_and_update() {
                            listener = None;
                        }
                    }
                }
            }
        });
        Ok(Self {
            addr,
            cuts,
            delay_ms,
            open: opened,
        })
    }

    /// Opens or closes the listener (see [`Proxy::open`]).
    pub(crate) fn set_open(&self, open: bool) {
        self.open.send_replace(open);
    }

    /// `http://addr`.
    pub(crate) fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Drops every open connection now.
    pub(crate) fn cut(&self) {
        self.cuts.send_modify(|n| *n += 1);
    }

    /// Delays every chunk in both directions by `delay` (zero: off).
    pub(crate) fn set_delay(&self, delay: Duration) {
        self.delay_ms
            .store(u64::try_from(delay.as_millis()).unwrap_or(u64::MAX), Ordering::SeqCst);
    }
}

/// The listener on `addr` again (the port was just released).
async fn rebind(addr: SocketAddr) -> Option<TcpListener> {
    for _ in 0..100 {
        if let Ok(listener) = TcpListener::bind(addr).await {
            return Some(listener);
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    None
}

async fn forward(client: TcpStream, server: TcpStream, mut cuts: watch::Receiver<u64>, delay: Arc<AtomicU64>) {
    let _ = client.set_nodelay(true);
    let _ = server.set_nodelay(true);
    let (client_read, client_write) = client.into_split();
    let (server_read, server_write) = server.into_split();
    let up = pump(client_read, server_write, Arc::clone(&delay));
    let down = pump(server_read, client_write, delay);
    cuts.mark_unchanged();
    tokio::select! {
        _ = up => {}
        _ = down => {}
        _ = cuts.changed() => {}
    }
    // Dropping both halves closes both sockets.
}

async fn pump(
    mut from: tokio::net::tcp::OwnedReadHalf,
    mut to: tokio::net::tcp::OwnedWriteHalf,
    delay: Arc<AtomicU64>,
) {
    let mut buf = vec![0u8; 16 * 1024];
    loop {
        let n = match from.read(&mut buf).await {
            Ok(0) | Err(_) => return,
            Ok(n) => n,
        };
        let ms = delay.load(Ordering::SeqCst);
        if ms > 0 {
            tokio::time::sleep(Duration::from_millis(ms)).await;
        }
        if to.write_all(&buf[..n]).await.is_err() {
            return;
        }
    }
}
