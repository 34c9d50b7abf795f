//! Every object-store call inside a budget. On the RPC path the budget is
//! what is left of the call's deadline (less a margin, so the call answers
//! `TABLE_LOCATION_UNREADABLE` itself rather than time out); elsewhere (the
//! mirror, the keeper, the gauges) it is [`BACKGROUND_CALL_LIMIT`]. The S3
//! client's own retries and timeouts sit inside it (see `PaimonTable::open`).

use std::fmt;
use std::future::Future;
use std::ops::Range;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use bytes::Bytes;
use futures::StreamExt;
use futures::stream::BoxStream;
use object_store::path::Path;
use object_store::{
    GetOptions, GetResult, GetResultPayload, ListResult, MultipartUpload, ObjectMeta, ObjectStore, PutMultipartOptions,
    PutOptions, PutPayload, PutResult,
};
use tokio::time::Instant;

/// The longest any object-store call takes outside an RPC (retries
/// included): a black-holed store costs a background pass this, not the
/// ~15 minutes of TCP retransmits a half-open connection would.
pub const BACKGROUND_CALL_LIMIT: Duration = Duration::from_secs(30);

tokio::task_local! {
    static CALL_DEADLINE: Instant;
}

/// Runs `call` with object-store calls bounded by `deadline` (the RPC's).
pub async fn within_deadline<F: Future>(deadline: Instant, call: F) -> F::Output {
    CALL_DEADLINE.scope(deadline, call).await
}

/// How long the next object-store call may take, and what bounds it.
fn limit() -> (Duration, &'static str) {
    match CALL_DEADLINE.try_with(|deadline| deadline.saturating_duration_since(Instant::now())) {
        // A tenth of what is left (at least 50 ms) stays for answering.
        Ok(left) => (
            left.saturating_sub((left / 10).max(Duration::from_millis(50))),
            "what was left of the call's deadline",
        ),
        Err(_) => (BACKGROUND_CALL_LIMIT, "the limit for background work"),
    }
}

async fn bounded<T>(
    what: &'static str,
    location: &Path,
    call: impl Future<Output = object_store::Result<T>>,
) -> object_store::Result<T> {
    let (limit, bound) = limit();
    match tokio::time::timeout(limit, call).await {
        Ok(answer) => answer,
        Err(_) => Err(object_store::Error::Generic {
            store: "table store",
            source: format!("{what} {location}: no answer within {limit:?} ({bound})").into(),
        }),
    }
}

/// An object store whose every call is bounded (see the module).
#[derive(Debug)]
pub(crate) struct Bounded {
    inner: Arc<dyn ObjectStore>,
}

impl Bounded {
    pub(crate) fn new(inner: Arc<dyn ObjectStore>) -> Self {
        Self { inner }
    }
}

impl fmt::Display for Bounded {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Bounded({})", self.inner)
    }
}

#[async_trait]
impl ObjectStore for Bounded {
    async fn put_opts(
        &self,
        location: &Path,
        payload: PutPayload,
        opts: PutOptions,
    ) -> object_store::Result<PutResult> {
        bounded("PUT", location, self.inner.put_opts(location, payload, opts)).await
    }

    async fn put_multipart_opts(
        &self,
        location: &Path,
        opts: PutMultipartOptions,
    ) -> object_store::Result<Box<dyn MultipartUpload>> {
        bounded("PUT", location, self.inner.put_multipart_opts(location, opts)).await
    }

    /// Read whole inside the bound: table metadata files are small, and a
    /// body that stalls half-way is as unanswered as a request.
    async fn get_opts(&self, location: &Path, options: GetOptions) -> object_store::Result<GetResult> {
        let head = options.head;
        bounded("GET", location, async {
            let result = self.inner.get_opts(location, options).await?;
            if head {
                return Ok(result);
            }
            let GetResult {
                payload,
                meta,
                range,
                attributes,
            } = result;
            let bytes = GetResult {
                payload,
                meta: meta.clone(),
                range: range.clone(),
                attributes: attributes.clone(),
            }
            .bytes()
            .await?;
            Ok(GetResult {
                payload: GetResultPayload::Stream(futures::stream::once(async move { Ok(bytes) }).boxed()),
                meta,
                range,
                attributes,
            })
        })
        .await
    }

    async fn get_ranges(&self, location: &Path, ranges: &[Range<u64>]) -> object_store::Result<Vec<Bytes>> {
        bounded("GET", location, self.inner.get_ranges(location, ranges)).await
    }

    async fn head(&self, location: &Path) -> object_store::Result<ObjectMeta> {
        bounded("HEAD", location, self.inner.head(location)).await
    }

    async fn delete(&self, location: &Path) -> object_store::Result<()> {
        bounded("DELETE", location, self.inner.delete(location)).await
    }

    /// A stream is not bounded here: used only by tests and diagnostics.
    fn list(&self, prefix: Option<&Path>) -> BoxStream<'static, object_store::Result<ObjectMeta>> {
        self.inner.list(prefix)
    }

    async fn list_with_delimiter(&self, prefix: Option<&Path>) -> object_store::Result<ListResult> {
        let location = prefix.cloned().unwrap_or_default();
        bounded("LIST", &location, self.inner.list_with_delimiter(prefix)).await
    }

    async fn copy(&self, from: &Path, to: &Path) -> object_store::Result<()> {
        bounded("COPY", to, self.inner.copy(from, to)).await
    }

    async fn copy_if_not_exists(&self, from: &Path, to: &Path) -> object_store::Result<()> {
        bounded("COPY", to, self.inner.copy_if_not_exists(from, to)).await
    }

    async fn rename(&self, from: &Path, to: &Path) -> object_store::Result<()> {
        bounded("RENAME", to, self.inner.rename(from, to)).await
    }

    async fn rename_if_not_exists(&self, from: &Path, to: &Path) -> object_store::Result<()> {
        bounded("RENAME", to, self.inner.rename_if_not_exists(from, to)).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn a_call_is_bounded_by_what_is_left_of_its_deadline_and_background_work_by_the_limit() {
        let never = || std::future::pending::<object_store::Result<()>>();
        let path = Path::from("t/snapshot/LATEST");
        let started = Instant::now();
        let err = within_deadline(started + Duration::from_secs(4), bounded("GET", &path, never()))
            .await
            .unwrap_err();
        // 4 s less a tenth of it.
        assert_eq!(started.elapsed(), Duration::from_millis(3600));
        assert!(err.to_string().contains("the call's deadline"), "{err}");
        let started = Instant::now();
        let err = bounded("GET", &path, never()).await.unwrap_err();
        assert_eq!(started.elapsed(), BACKGROUND_CALL_LIMIT);
        assert!(err.to_string().contains("background"), "{err}");
    }
}
