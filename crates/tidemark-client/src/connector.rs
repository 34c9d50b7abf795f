//! Balancing by connection: every new connection resolves the endpoint's
//! host again and picks one of its addresses at random (trying the others if
//! it cannot connect). With a headless Service the host resolves to every
//! ready replica, so clients spread over replicas; when a server ends a
//! connection (its max connection age, a rolling restart), the reconnection
//! picks again among the replicas there are now. Every call on a connection
//! goes to the same replica, which keeps the server's remembered lease state
//! and group commit effective.

use std::collections::hash_map::RandomState;
use std::future::Future;
use std::hash::{BuildHasher, Hasher};
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;

use hyper_util::rt::TokioIo;
use tokio::net::TcpStream;
use tonic::transport::Uri;

/// Resolves a host and port to addresses for one new connection.
pub type Resolve =
    Arc<dyn Fn(String, u16) -> Pin<Box<dyn Future<Output = std::io::Result<Vec<SocketAddr>>> + Send>> + Send + Sync>;

/// The system resolver (DNS, /etc/hosts), asked afresh for every connection.
pub fn system_resolver() -> Resolve {
    Arc::new(|host, port| Box::pin(async move { Ok(tokio::net::lookup_host((host.as_str(), port)).await?.collect()) }))
}

/// A random number from the standard library's per-instance random keys.
fn random() -> u64 {
    RandomState::new().build_hasher().finish()
}

/// Shuffles `items` (Fisher–Yates).
fn shuffle<T>(items: &mut [T]) {
    for i in (1..items.len()).rev() {
        let j = (random() % (i as u64 + 1)) as usize;
        items.swap(i, j);
    }
}

/// Connects to one of the addresses `resolve` gives for the URI's host.
pub(crate) async fn connect(resolve: Resolve, uri: Uri) -> std::io::Result<TokioIo<TcpStream>> {
    let host = uri
        .host()
        .ok_or_else(|| std::io::Error::new(std::io::ErrorKind::InvalidInput, "the endpoint has no host"))?
        .trim_start_matches('[')
        .trim_end_matches(']')
        .to_owned();
    let port = uri
        .port_u16()
        .unwrap_or(if uri.scheme_str() == Some("https") { 443 } else { 80 });
    let mut addresses = resolve(host.clone(), port).await?;
    if addresses.is_empty() {
        return Err(std::io::Error::new(
            std::io::ErrorKind::NotFound,
            format!("{host} resolves to no address"),
        ));
    }
    shuffle(&mut addresses);
    let mut last_error = None;
    for address in addresses {
        match TcpStream::connect(address).await {
            Ok(stream) => {
                let _ = stream.set_nodelay(true);
                tracing::debug!(%host, %address, "connected");
                return Ok(TokioIo::new(stream));
            }
            Err(e) => {
                tracing::debug!(%host, %address, "cannot connect: {e}");
                last_error = Some(e);
            }
        }
    }
    Err(last_error.unwrap_or_else(|| std::io::Error::other("no address")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shuffling_reaches_every_order() {
        let mut firsts = [0usize; 3];
        for _ in 0..3000 {
            let mut items = [0, 1, 2];
            shuffle(&mut items);
            let mut sorted = items;
            sorted.sort_unstable();
            assert_eq!(sorted, [0, 1, 2]);
            firsts[items[0]] += 1;
        }
        for (item, count) in firsts.iter().enumerate() {
            assert!((700..1300).contains(count), "{item} came first {count} times of 3000");
        }
    }
}
