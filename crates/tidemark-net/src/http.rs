//! HTTP/1 serving within bounds: a cap on connections, a deadline for a
//! request's headers (and a TLS handshake), and an idle timeout.

use std::sync::Arc;
use std::time::Duration;

use hyper::body::{Body, Incoming};
use hyper::{Request, Response};
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use crate::{Admission, IdleTimeout};

/// The current TLS configuration (re-read for each handshake, so a reload
/// takes effect for the next connection).
pub type TlsSource = Arc<dyn Fn() -> Arc<tokio_rustls::rustls::ServerConfig> + Send + Sync>;

/// What one HTTP/1 listener allows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HttpLimits {
    /// Connections held at once; more are refused.
    pub max_connections: usize,
    /// How long a request's headers (and a TLS handshake) may take to
    /// arrive.
    pub header_timeout: Duration,
    /// How long a connection may stay open with nothing sent either way.
    pub idle_timeout: Duration,
}

/// Serves `service` over HTTP/1 on `listener` (HTTPS with `tls`) within
/// `limits` until `stop`. `name` labels its logs and refusals.
pub async fn serve_http1<S, B>(
    name: &'static str,
    listener: TcpListener,
    service: S,
    tls: Option<TlsSource>,
    limits: HttpLimits,
    stop: CancellationToken,
) where
    S: hyper::service::Service<Request<Incoming>, Response = Response<B>> + Clone + Send + 'static,
    S::Future: Send + 'static,
    S::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
    B: Body + Send + 'static,
    B::Data: Send,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let admission = Admission::new(name, limits.max_connections);
    loop {
        let (stream, peer) = tokio::select! {
            () = stop.cancelled() => return,
            accepted = admission.accept(&listener) => accepted,
        };
        let (service, tls, stop) = (service.clone(), tls.clone(), stop.clone());
        tokio::spawn(async move {
            let mut builder = hyper::server::conn::http1::Builder::new();
            builder
                .timer(TokioTimer::new())
                .header_read_timeout(limits.header_timeout);
            let stream = IdleTimeout::new(stream, limits.idle_timeout);
            let served = match tls {
                Some(tls) => {
                    let acceptor = tokio_rustls::TlsAcceptor::from(tls());
                    match tokio::time::timeout(limits.header_timeout, acceptor.accept(stream)).await {
                        Ok(Ok(stream)) => {
                            let connection = builder.serve_connection(TokioIo::new(stream), service);
                            tokio::select! {
                                r = connection => r,
                                () = stop.cancelled() => Ok(()),
                            }
                        }
                        _ => {
                            tracing::debug!(listener = name, %peer, "TLS handshake failed or timed out");
                            return;
                        }
                    }
                }
                None => {
                    let connection = builder.serve_connection(TokioIo::new(stream), service);
                    tokio::select! {
                        r = connection => r,
                        () = stop.cancelled() => Ok(()),
                    }
                }
            };
            if let Err(e) = served {
                tracing::debug!(listener = name, %peer, "connection ended: {e}");
            }
        });
    }
}
