//! ImportState (SPEC §11 A7): the upload gathered with its bounds checked,
//! parsed, planned or applied, and the report as the answer.

use tidemark_core::validate::Violations;
use tidemark_proto::v1 as pb;
use tidemark_service::store::StoreError;
use tonic::{Request, Response, Status};

use crate::admin::AdminService;
use crate::convert;
use crate::request::{Parse, Scoped, Touches, checked};

/// An ImportState call's messages, gathered with their bounds checked (the
/// parser reports a breach as INVALID_ARGUMENT, like any bad field).
async fn gather_upload(mut stream: tonic::Streaming<pb::ImportStateRequest>) -> ImportUpload {
    use tidemark_core::validate::FieldViolation;
    let mut settings = None;
    let mut lines = Vec::new();
    let mut first = true;
    loop {
        let message = match stream.message().await {
            Ok(Some(message)) => message,
            Ok(None) => break,
            Err(status) => {
                let why = FieldViolation::new("lines", format!("the upload failed: {}", status.message()));
                return ImportUpload {
                    settings: Err(why.clone()),
                    lines: Err(why),
                };
            }
        };
        match (first, message.settings) {
            (true, s) => settings = Some(s.unwrap_or_default()),
            (false, Some(_)) => {
                return ImportUpload {
                    settings: Err(FieldViolation::new(
                        "settings",
                        "only the first message may carry settings",
                    )),
                    lines: Ok(Vec::new()),
                };
            }
            (false, None) => {}
        }
        first = false;
        if let Some(long) = message
            .lines
            .iter()
            .position(|l| l.len() > tidemark_service::backup::MAX_LINE)
        {
            return ImportUpload {
                settings: Ok(settings.unwrap_or_default()),
                lines: Err(FieldViolation::new(
                    "lines",
                    format!(
                        "line {} is longer than {} bytes",
                        lines.len() + long + 1,
                        tidemark_service::backup::MAX_LINE
                    ),
                )),
            };
        }
        lines.extend(message.lines);
        if lines.len() > tidemark_service::backup::MAX_LINES {
            return ImportUpload {
                settings: Ok(settings.unwrap_or_default()),
                lines: Err(FieldViolation::new(
                    "lines",
                    format!(
                        "more than {} lines; split the export by table",
                        tidemark_service::backup::MAX_LINES
                    ),
                )),
            };
        }
    }
    ImportUpload {
        settings: Ok(settings.unwrap_or_default()),
        lines: Ok(lines),
    }
}

/// Most keys an import's answer lists.
const MAX_LISTED_KEYS: usize = 1000;

fn response(
    parsed: &tidemark_service::backup::Parsed,
    report: &tidemark_service::store::ImportReport,
) -> pb::ImportStateResponse {
    use tidemark_core::restore::ConsumerOutcome;
    let mut response = pb::ImportStateResponse {
        executed: Some(report.executed),
        exported_at: Some(convert::timestamp(parsed.exported_at)),
        exported_by_version: parsed.server_version.clone(),
        keys: report.keys.len() as i64,
        epoch_margin: tidemark_core::restore::RESTORE_EPOCH_MARGIN,
        ..Default::default()
    };
    for (outcome, exported) in report.keys.iter().zip(&parsed.file.keys) {
        let file_next_snapshot = exported.consumer.map(|c| c.next_snapshot);
        let listed = match &outcome.result {
            Ok(done) => {
                let count = match done.consumer {
                    ConsumerOutcome::Created => &mut response.consumers_created,
                    ConsumerOutcome::Replaced => &mut response.consumers_replaced,
                    ConsumerOutcome::Same => &mut response.consumers_same,
                    ConsumerOutcome::Kept => &mut response.consumers_kept,
                    ConsumerOutcome::EpochOnly => &mut response.consumers_epoch_only,
                    ConsumerOutcome::DeletedSinceExport => &mut response.consumers_deleted_since_export,
                };
                *count += 1;
                response.epochs_raised += i64::from(done.new_epoch > done.old_epoch);
                response.keys_written += i64::from(done.changes_anything());
                let worth_listing = matches!(
                    done.consumer,
                    ConsumerOutcome::Kept | ConsumerOutcome::DeletedSinceExport
                );
                (done.changes_anything() || worth_listing).then(|| pb::ImportedKey {
                    consumer: Some(convert::key_to_pb(&outcome.key)),
                    consumer_outcome: done.consumer.as_str().to_owned(),
                    old_next_snapshot: done.old_next,
                    new_next_snapshot: done.new_next,
                    old_epoch: done.old_epoch,
                    new_epoch: done.new_epoch,
                    revoked_lease: done.revoked.as_ref().map(|l| pb::RevokedLease {
                        lease_id: l.lease_id.to_string(),
                        epoch: l.epoch,
                        holder: l.holder.clone(),
                    }),
                    refused_reason: String::new(),
                    refused_message: String::new(),
                    file_next_snapshot,
                })
            }
            Err(why) => {
                response.keys_refused += 1;
                Some(pb::ImportedKey {
                    consumer: Some(convert::key_to_pb(&outcome.key)),
                    refused_reason: why.reason().to_owned(),
                    refused_message: why.to_string(),
                    file_next_snapshot,
                    ..Default::default()
                })
            }
        };
        if let Some(listed) = listed {
            if response.changes.len() < MAX_LISTED_KEYS {
                response.changes.push(listed);
            } else {
                response.changes_truncated = true;
            }
        }
    }
    let options_text = |o: &tidemark_core::TableOptions| {
        o.to_map()
            .into_iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect::<Vec<_>>()
            .join(",")
    };
    for o in &report.options {
        response.tables.push(pb::ImportedTableSetting {
            table: o.table.as_str().to_owned(),
            setting: "options".into(),
            outcome: o.outcome.as_str().to_owned(),
            before: o.before.as_ref().map(options_text).unwrap_or_default(),
            file: options_text(&o.file),
        });
    }
    for r in &report.registrations {
        response.tables.push(pb::ImportedTableSetting {
            table: r.table.as_str().to_owned(),
            setting: "registration".into(),
            outcome: r.outcome.as_str().to_owned(),
            before: r.before.clone().unwrap_or_default(),
            file: r.location.clone(),
        });
    }
    response
}

/// An ImportState call's messages, gathered: the first one's settings and
/// every line, or why the upload itself is refused.
pub(crate) struct ImportUpload {
    pub settings: Result<pb::ImportSettings, tidemark_core::validate::FieldViolation>,
    pub lines: Result<Vec<String>, tidemark_core::validate::FieldViolation>,
}

pub(crate) struct ImportState {
    pub parsed: tidemark_service::backup::Parsed,
    pub settings: tidemark_service::ImportSettings,
}

impl Parse for ImportUpload {
    type Parsed = ImportState;
    fn parse(self) -> Result<ImportState, StoreError> {
        let mut v = Violations::new();
        let settings = self.settings.map_err(|e| v.extend(vec![e])).ok();
        let lines = self.lines.map_err(|e| v.extend(vec![e])).ok();
        let parsed = match (settings, lines) {
            (Some(settings), Some(lines)) if v.is_empty() => Some(ImportState {
                parsed: tidemark_service::backup::parse(&lines)?,
                settings: convert::import_settings(&settings),
            }),
            _ => None,
        };
        checked(v, parsed)
    }
}
impl Scoped for ImportState {
    fn touches(&self) -> Touches<'_> {
        // Every table of the file is checked by the handler.
        Touches::Filtered
    }
}

pub(in crate::admin) async fn handle(
    admin: &AdminService,
    request: Request<tonic::Streaming<pb::ImportStateRequest>>,
) -> Result<Response<pb::ImportStateResponse>, Status> {
    let (metadata, extensions, stream) = request.into_parts();
    let upload = gather_upload(stream).await;
    let request = Request::from_parts(metadata, extensions, upload);
    admin
        .rpcs
        .handle("ImportState", request, |ctx, req| async move {
            let ImportState { parsed, settings } = req;
            let report = admin.app.import_state(&ctx, &parsed, settings).await?;
            Ok(response(&parsed, &report))
        })
        .await
}
