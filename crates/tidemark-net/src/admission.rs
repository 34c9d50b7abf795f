//! A cap on the connections one listener holds.

use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::AtomicU64;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio_stream::wrappers::ReceiverStream;
use tokio_util::sync::CancellationToken;

/// Admits at most `max` open connections on one listener (`name`: grpc,
/// console, metrics, in logs and the refusal metric).
#[derive(Clone, Debug)]
pub struct Admission {
    name: &'static str,
    max: usize,
    permits: Arc<Semaphore>,
    logged: Arc<Logged>,
}

#[derive(Default, Debug)]
struct Logged {
    error_at: Mutex<Option<Instant>>,
    errors_missed: AtomicU64,
    refusal_at: Mutex<Option<Instant>>,
    refusals_missed: AtomicU64,
}

impl Admission {
    /// A cap of `max` connections (at least one).
    pub fn new(name: &'static str, max: usize) -> Self {
        let max = max.max(1);
        Self {
            name,
            max,
            permits: Arc::new(Semaphore::new(max)),
            logged: Arc::default(),
        }
    }

    /// Connections open now.
    pub fn open(&self) -> usize {
        self.max - self.permits.available_permits()
    }

    /// The next connection within the cap. One over it is accepted and
    /// closed at once; a failed accept (out of descriptors, say) waits a
    /// little before the next. Both are logged at most once a second.
    pub async fn accept(&self, listener: &TcpListener) -> (Admitted<TcpStream>, std::net::SocketAddr) {
        loop {
            let (stream, peer) = match listener.accept().await {
                Ok(accepted) => accepted,
                Err(e) => {
                    crate::now_and_then(
                        &self.logged.error_at,
                        |missed| tracing::warn!(listener = self.name, error = %e, more_since_last = missed, "accept failed"),
                        &self.logged.errors_missed,
                    );
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            };
            match self.permits.clone().try_acquire_owned() {
                Ok(permit) => {
                    return (
                        Admitted {
                            inner: stream,
                            _permit: permit,
                        },
                        peer,
                    );
                }
                Err(_) => {
                    metrics::counter!("tidemark_connections_refused_total", "listener" => self.name).increment(1);
                    crate::now_and_then(
                        &self.logged.refusal_at,
                        |missed| {
                            tracing::warn!(
                                listener = self.name, max = self.max, %peer, more_since_last = missed,
                                "refused a connection: the listener holds as many as it may"
                            )
                        },
                        &self.logged.refusals_missed,
                    );
                    // Closed now: the client sees the refusal at once.
                    drop(stream);
                }
            }
        }
    }
}

/// Accepted connections within `admission`, as tonic's incoming stream,
/// until `stop`.
pub fn incoming(
    listener: TcpListener,
    admission: Admission,
    stop: CancellationToken,
) -> ReceiverStream<io::Result<Admitted<TcpStream>>> {
    let (sender, receiver) = tokio::sync::mpsc::channel(64);
    tokio::spawn(async move {
        loop {
            let (stream, _) = tokio::select! {
                () = stop.cancelled() => return,
                accepted = admission.accept(&listener) => accepted,
            };
            let _ = stream.inner.set_nodelay(true);
            if sender.send(Ok(stream)).await.is_err() {
                return;
            }
        }
    });
    ReceiverStream::new(receiver)
}

/// A connection that holds its place under the cap until dropped.
#[derive(Debug)]
pub struct Admitted<T> {
    inner: T,
    _permit: OwnedSemaphorePermit,
}

impl<T> Admitted<T> {
    /// The connection itself.
    pub fn get_ref(&self) -> &T {
        &self.inner
    }
}

impl<T: AsyncRead + Unpin> AsyncRead for Admitted<T> {
    fn poll_read(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl<T: AsyncWrite + Unpin> AsyncWrite for Admitted<T> {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }
    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }
    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write_vectored(cx, bufs)
    }
    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }
}

impl<T: tonic::transport::server::Connected> tonic::transport::server::Connected for Admitted<T> {
    type ConnectInfo = T::ConnectInfo;
    fn connect_info(&self) -> Self::ConnectInfo {
        self.inner.connect_info()
    }
}
