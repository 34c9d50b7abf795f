//! ExportState (SPEC §11 A7): everything tidemark holds of a table (or of
//! every table) from one snapshot, as a stream read ahead of the client
//! into a spool; a client that takes nothing for too long is cut off.

use std::time::Duration;

use tidemark_core::TableName;
use tidemark_core::validate::Violations;
use tidemark_proto::v1 as pb;
use tidemark_service::store::StoreError;
use tokio::sync::OwnedSemaphorePermit;
use tonic::{Request, Response, Status};

use crate::admin::AdminService;
use crate::request::{Parse, Scoped, Touches, checked, fields};

/// What ExportState answers with.
pub(in crate::admin) type ExportStream =
    std::pin::Pin<Box<dyn tokio_stream::Stream<Item = Result<pb::ExportStateResponse, Status>> + Send + 'static>>;

/// The export's lines, `head` first, as the client's stream; `permit` (one
/// of the replica's running exports) is held until the stream ends.
fn stream(
    mut export: tidemark_service::Export,
    head: Vec<String>,
    permit: OwnedSemaphorePermit,
    idle_timeout: Duration,
    request_id: String,
) -> ExportStream {
    // The snapshot is read to its end into the spool, ahead of
    // the client: its transaction never waits on the client.
    let spool = crate::spool::Spool::new(crate::spool::MEMORY_BOUND);
    tokio::spawn({
        let spool = std::sync::Arc::clone(&spool);
        let request_id = request_id.clone();
        async move {
            let mut next = Some(Ok(head));
            while let Some(lines) = next {
                let lines = match lines {
                    Ok(lines) => lines,
                    // No trailer: whatever the client kept is
                    // refused by an import as cut short.
                    Err(e) => return spool.finish(Err(crate::status::store_status(e, &request_id))),
                };
                match spool.push(&pb::ExportStateResponse { lines }) {
                    Ok(true) => {}
                    // The client went away or stalled: dropping
                    // the export ends the snapshot's transaction.
                    Ok(false) => return,
                    Err(e) => {
                        tracing::warn!(request_id, error = %e, "cannot spool an export");
                        spool.finish(Err(Status::unavailable(format!(
                            "the export cannot be spooled on this replica ({e}); check its temporary \
                             directory (TMPDIR) and retry"
                        ))));
                        return;
                    }
                }
                next = export.next().await;
            }
            spool.finish(Ok(()));
        }
    });
    let (sender, receiver) = tokio::sync::mpsc::channel(2);
    let stalled: std::sync::Arc<std::sync::Mutex<Option<Status>>> = std::sync::Arc::default();
    tokio::spawn({
        let stalled = std::sync::Arc::clone(&stalled);
        let request_id = request_id.clone();
        async move {
            let _permit = permit;
            while let Some(item) = spool.next().await {
                let last = item.is_err();
                match tokio::time::timeout(idle_timeout, sender.send(item)).await {
                    Ok(Ok(())) if !last => {}
                    Ok(Ok(())) => return,
                    // The client went away.
                    Ok(Err(_)) => return spool.abandon(),
                    Err(_) => {
                        tracing::warn!(request_id, ?idle_timeout, "export ended: its client took nothing");
                        *stalled.lock().unwrap_or_else(std::sync::PoisonError::into_inner) =
                            Some(crate::status::export_stalled(idle_timeout));
                        return spool.abandon();
                    }
                }
            }
        }
    });
    // After what was already queued, a stalled export ends with
    // its status (trailers reach the client once it reads).
    let tail = tokio_stream::iter(
        std::iter::once_with(move || stalled.lock().unwrap_or_else(std::sync::PoisonError::into_inner).take())
            .flatten()
            .map(Err),
    );
    Box::pin(tokio_stream::StreamExt::chain(
        tokio_stream::wrappers::ReceiverStream::new(receiver),
        tail,
    ))
}

pub(crate) struct ExportState {
    pub table: Option<TableName>,
}

impl Parse for pb::ExportStateRequest {
    type Parsed = ExportState;
    fn parse(self) -> Result<ExportState, StoreError> {
        let mut v = Violations::new();
        let table = fields::optional(&mut v, &self.table, "table", fields::table_name);
        checked(v, table.map(|table| ExportState { table }))
    }
}

impl Scoped for ExportState {
    fn touches(&self) -> Touches<'_> {
        Touches::TableOrAll(self.table.as_ref(), "export the state of")
    }
}

pub(in crate::admin) async fn handle(
    admin: &AdminService,
    request: Request<pb::ExportStateRequest>,
) -> Result<Response<ExportStream>, Status> {
    // Each export holds a permit until its stream ends, however it ends.
    let Ok(permit) = std::sync::Arc::clone(&admin.running_exports).try_acquire_owned() else {
        return Err(crate::status::too_many_exports(admin.exports.max_concurrent));
    };
    let idle_timeout = admin.exports.idle_timeout;
    admin
        .rpcs
        .handle("ExportState", request, |ctx, req| async move {
            let mut export = admin.app.export(req.table);
            // The head comes first: a database that cannot answer is an
            // error status, not a stream that breaks off.
            let head = match export.next().await {
                Some(head) => head?,
                None => {
                    return Err(StoreError::Internal("the export sent nothing".into()));
                }
            };
            Ok(stream(export, head, permit, idle_timeout, ctx.request_id.clone()))
        })
        .await
}
