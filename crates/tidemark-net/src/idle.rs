//! A connection closed once nothing moved on it for a while.

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use std::future::Future;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

use tokio::time::{Instant, Sleep};

/// Fails a read that has waited `idle` since anything was last read or
/// written: a keep-alive connection left open, or a request sent a byte at
/// a time slower than that, ends instead of holding a descriptor forever.
#[derive(Debug)]
pub struct IdleTimeout<T> {
    inner: T,
    idle: Duration,
    deadline: Pin<Box<Sleep>>,
}

impl<T> IdleTimeout<T> {
    /// `inner`, closed after `idle` without traffic.
    pub fn new(inner: T, idle: Duration) -> Self {
        Self {
            inner,
            idle,
            deadline: Box::pin(tokio::time::sleep(idle)),
        }
    }

    fn moved(&mut self) {
        let next = Instant::now() + self.idle;
        self.deadline.as_mut().reset(next);
    }
}

impl<T: AsyncRead + Unpin> AsyncRead for IdleTimeout<T> {
    fn poll_read(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        match Pin::new(&mut self.inner).poll_read(cx, buf) {
            Poll::Ready(result) => {
                if buf.filled().len() > before {
                    self.moved();
                }
                Poll::Ready(result)
            }
            Poll::Pending => match self.deadline.as_mut().poll(cx) {
                Poll::Ready(()) => Poll::Ready(Err(io::Error::new(
                    io::ErrorKind::TimedOut,
                    "nothing received or sent within the idle timeout",
                ))),
                Poll::Pending => Poll::Pending,
            },
        }
    }
}

impl<T: AsyncWrite + Unpin> AsyncWrite for IdleTimeout<T> {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        let written = Pin::new(&mut self.inner).poll_write(cx, buf);
        if matches!(written, Poll::Ready(Ok(n)) if n > 0) {
            self.moved();
        }
        written
    }
    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }
    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    #[tokio::test(start_paused = true)]
    async fn a_silent_connection_ends_after_the_idle_timeout_and_traffic_keeps_it_open() {
        let (client, server) = tokio::io::duplex(64);
        let mut server = IdleTimeout::new(server, Duration::from_secs(60));
        let mut client = client;
        let mut buf = [0u8; 8];
        // Traffic every 50 s keeps it open past 60 s.
        for _ in 0..3 {
            tokio::time::advance(Duration::from_secs(50)).await;
            client.write_all(b"x").await.unwrap();
            assert_eq!(server.read(&mut buf).await.unwrap(), 1);
        }
        // Then silence: the read fails at 60 s, not before.
        let started = Instant::now();
        let err = server.read(&mut buf).await.unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::TimedOut);
        assert_eq!(started.elapsed(), Duration::from_secs(60));
    }
}
