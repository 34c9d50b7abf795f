//! ImportState: the upload gathered with its bounds checked, and the
//! report as the answer.

use tidemark_proto::v1 as pb;

use crate::{convert, request};

/// An ImportState call's messages, gathered with their bounds checked (the
/// parser reports a breach as INVALID_ARGUMENT, like any bad field).
pub(super) async fn gather_upload(mut stream: tonic::Streaming<pb::ImportStateRequest>) -> request::ImportUpload {
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
                return request::ImportUpload {
                    settings: Err(why.clone()),
                    lines: Err(why),
                };
            }
        };
        match (first, message.settings) {
            (true, s) => settings = Some(s.unwrap_or_default()),
            (false, Some(_)) => {
                return request::ImportUpload {
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
            return request::ImportUpload {
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
            return request::ImportUpload {
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
    request::ImportUpload {
        settings: Ok(settings.unwrap_or_default()),
        lines: Ok(lines),
    }
}

/// Most keys an import's answer lists.
const MAX_LISTED_KEYS: usize = 1000;

pub(super) fn response(
    parsed: &tidemark_service::backup::Parsed,
    report: &tidemark_service::store::ImportReport,
) -> pb::ImportStateResponse {
    use tidemark_core::restore::ConsumerOutcome;
    let mut response = pb::ImportStateResponse {
        executed: report.executed,
        exported_at: Some(convert::timestamp(parsed.exported_at)),
        exported_by_version: parsed.server_version.clone(),
        keys: report.keys.len() as i64,
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
                    ConsumerOutcome::NotInFile => &mut 0,
                };
                *count += 1;
                response.epochs_raised += i64::from(done.new_epoch > done.old_epoch);
                response.keys_written += i64::from(done.changes_anything());
                (done.changes_anything() || done.consumer == ConsumerOutcome::Kept).then(|| pb::ImportedKey {
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
