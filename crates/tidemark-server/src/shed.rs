//! Counting calls shed by the global concurrency limit: `load_shed` answers
//! them RESOURCE_EXHAUSTED at once (through tonic), before any handler, so
//! they are counted here, around it.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use tower::BoxError;

/// Wraps the shedding service; see the module docs.
#[derive(Debug, Clone, Copy)]
pub(crate) struct CountShedLayer;

impl<S> tower::Layer<S> for CountShedLayer {
    type Service = CountShed<S>;

    fn layer(&self, inner: S) -> Self::Service {
        CountShed { inner }
    }
}

#[derive(Debug, Clone)]
pub(crate) struct CountShed<S> {
    inner: S,
}

impl<S, B> tower::Service<http::Request<B>> for CountShed<S>
where
    S: tower::Service<http::Request<B>, Error = BoxError>,
    S::Future: Send + 'static,
{
    type Response = S::Response;
    type Error = BoxError;
    type Future = Pin<Box<dyn Future<Output = Result<S::Response, BoxError>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: http::Request<B>) -> Self::Future {
        let method = crate::metrics::method_of(request.uri().path());
        let call = self.inner.call(request);
        Box::pin(async move {
            let result = call.await;
            if let Err(e) = &result
                && e.is::<tower::load_shed::error::Overloaded>()
            {
                crate::metrics::shed(method);
            }
            result
        })
    }
}
