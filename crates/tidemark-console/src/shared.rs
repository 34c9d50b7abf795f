//! Reads shared between viewers: every open tab refreshes its page every
//! few seconds, so viewers of the same page (and scope) within one refresh
//! interval share one read of the database instead of each sending their
//! own. A failed read is not kept: the next viewer reads again.

use std::collections::HashMap;
use std::future::Future;
use std::hash::Hash;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::sync::OnceCell;

/// One read per key per `ttl`, however many ask at once.
#[derive(Debug)]
pub(crate) struct SharedReads<K, V> {
    ttl: Duration,
    entries: Mutex<HashMap<K, Arc<Entry<V>>>>,
}

#[derive(Debug)]
struct Entry<V> {
    /// The value and when its read finished (a slow read is fresh for the
    /// interval after it, not one counted from its start).
    value: OnceCell<(Instant, Arc<V>)>,
}

impl<V> Entry<V> {
    /// Read within `ttl`, or still being read (join it).
    fn fresh(&self, ttl: Duration) -> bool {
        self.value.get().is_none_or(|(read_at, _)| read_at.elapsed() < ttl)
    }
}

impl<K: Eq + Hash + Clone, V> SharedReads<K, V> {
    pub(crate) fn new(ttl: Duration) -> Self {
        Self {
            ttl,
            entries: Mutex::new(HashMap::new()),
        }
    }

    /// The value read for `key` within the last `ttl`, or `read`'s (those
    /// asking meanwhile wait for it rather than read too).
    pub(crate) async fn get<E, F>(&self, key: K, read: impl FnOnce() -> F) -> Result<Arc<V>, E>
    where
        F: Future<Output = Result<V, E>>,
    {
        let entry = {
            let mut entries = self.entries.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            match entries.get(&key) {
                Some(entry) if entry.fresh(self.ttl) => Arc::clone(entry),
                _ => {
                    // Forget what went stale, so the map stays the size of
                    // what is being viewed.
                    entries.retain(|_, e| e.fresh(self.ttl));
                    let entry = Arc::new(Entry { value: OnceCell::new() });
                    entries.insert(key, Arc::clone(&entry));
                    entry
                }
            }
        };
        entry
            .value
            .get_or_try_init(|| async { read().await.map(|v| (Instant::now(), Arc::new(v))) })
            .await
            .map(|(_, value)| Arc::clone(value))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    #[tokio::test]
    async fn viewers_within_one_interval_share_one_read_and_a_failure_is_not_kept() {
        let reads = AtomicUsize::new(0);
        let shared: SharedReads<&str, usize> = SharedReads::new(Duration::from_secs(60));
        let read = || async {
            tokio::time::sleep(Duration::from_millis(20)).await;
            Ok::<_, ()>(reads.fetch_add(1, Ordering::SeqCst))
        };
        let (a, b, c) = tokio::join!(shared.get("/", read), shared.get("/", read), shared.get("/", read));
        assert_eq!((*a.unwrap(), *b.unwrap(), *c.unwrap()), (0, 0, 0));
        assert_eq!(*shared.get("/", read).await.unwrap(), 0, "within the interval");
        assert_eq!(*shared.get("/other", read).await.unwrap(), 1, "another page reads");
        let failing: SharedReads<&str, usize> = SharedReads::new(Duration::from_secs(60));
        assert!(failing.get("/", || async { Err::<usize, _>("down") }).await.is_err());
        assert_eq!(*failing.get("/", || async { Ok::<_, &str>(7) }).await.unwrap(), 7);
        let expiring: SharedReads<&str, usize> = SharedReads::new(Duration::ZERO);
        assert_eq!(*expiring.get("/", || async { Ok::<_, ()>(1) }).await.unwrap(), 1);
        assert_eq!(*expiring.get("/", || async { Ok::<_, ()>(2) }).await.unwrap(), 2);
    }
}
