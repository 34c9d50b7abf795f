//! Printing answers: plain-text tables, or proto3 JSON (`--output json`).

// Printing to stdout is what these commands are for.
#![allow(clippy::print_stdout)]

use std::fmt::Write as _;

use anyhow::Context;
use prost::Message;
use tidemark_proto::v1 as pb;

use super::Output;

/// Prints a response as proto3 JSON (the mapping grpcurl uses).
fn print_json<M: Message + Default>(message: &M, full_name: &str) -> anyhow::Result<()> {
    let pool = prost_reflect::DescriptorPool::decode(tidemark_proto::FILE_DESCRIPTOR_SET)?;
    let descriptor = pool
        .get_message_by_name(full_name)
        .with_context(|| format!("no descriptor for {full_name}"))?;
    let plan_or_change = descriptor.get_field_by_name("executed").is_some();
    let dynamic = prost_reflect::DynamicMessage::decode(descriptor, message.encode_to_vec().as_slice())?;
    let mut json = dynamic.serialize_with_options(
        serde_json::value::Serializer,
        &prost_reflect::SerializeOptions::new().skip_default_fields(true),
    )?;
    // Defaults are left out, as grpcurl prints them, except `executed`: a
    // script reading a plan must see that it was not executed.
    if plan_or_change && let Some(fields) = json.as_object_mut() {
        fields.entry("executed").or_insert(serde_json::Value::Bool(false));
    }
    println!("{}", serde_json::to_string_pretty(&json)?);
    Ok(())
}

/// Prints `response` as proto3 JSON (`full_name` is its message type) with
/// `--output json`, else as `render` draws it.
pub(crate) fn show<M: Message + Default>(
    output: Output,
    response: &M,
    full_name: &str,
    render: impl FnOnce(&M),
) -> anyhow::Result<()> {
    match output {
        Output::Json => print_json(response, full_name),
        Output::Table => {
            render(response);
            Ok(())
        }
    }
}

/// A warning for the operator, on stderr so `--output json` stays clean.
#[allow(clippy::print_stderr)] // saying it is the point
pub(crate) fn warn(text: &str) {
    eprintln!("warning: {text}");
}

/// A plain-text table.
pub(crate) struct Table {
    header: Vec<&'static str>,
    rows: Vec<Vec<String>>,
}

impl Table {
    pub(crate) fn new(header: Vec<&'static str>) -> Self {
        Self {
            header,
            rows: Vec::new(),
        }
    }

    pub(crate) fn row(&mut self, cells: Vec<String>) {
        self.rows.push(cells);
    }

    pub(crate) fn print(&self) {
        let mut widths: Vec<usize> = self.header.iter().map(|h| h.len()).collect();
        for row in &self.rows {
            for (w, cell) in widths.iter_mut().zip(row) {
                *w = (*w).max(cell.chars().count());
            }
        }
        let line = |cells: Vec<&str>| {
            let mut out = String::new();
            for (i, (cell, w)) in cells.iter().zip(&widths).enumerate() {
                if i + 1 == cells.len() {
                    out.push_str(cell);
                } else {
                    let _ = write!(out, "{cell:<w$}  ");
                }
            }
            println!("{}", out.trim_end());
        };
        line(self.header.clone());
        for row in &self.rows {
            line(row.iter().map(String::as_str).collect());
        }
        if self.rows.is_empty() {
            println!("(none)");
        }
    }
}

pub(crate) fn opt<T: ToString>(value: Option<T>) -> String {
    value.map_or_else(|| "-".to_owned(), |v| v.to_string())
}

pub(crate) fn duration(d: Option<&prost_types::Duration>) -> String {
    d.map_or_else(
        || "-".to_owned(),
        |d| tidemark_core::options::Human(tidemark_proto::duration::from_pb(d)).to_string(),
    )
}

/// A time as RFC 3339 in UTC, to the second.
pub(crate) fn timestamp(t: Option<&prost_types::Timestamp>) -> String {
    t.map(|t| {
        prost_types::Timestamp {
            seconds: t.seconds,
            nanos: 0,
        }
        .to_string()
    })
    .unwrap_or_else(|| "-".to_owned())
}

pub(crate) fn plan_banner(executed: bool) {
    if !executed {
        println!("PLAN ONLY: nothing was changed. Run again with --execute to apply.");
    }
}

pub(crate) fn history_table(entries: &[pb::HistoryEntry]) -> Table {
    let mut t = Table::new(vec![
        "ID",
        "AT",
        "CONSUMER",
        "EVENT",
        "OLD",
        "NEW",
        "EPOCH",
        "BATCH",
        "PRINCIPAL",
        "REQUEST",
        "DETAIL",
    ]);
    for h in entries {
        let key = h.consumer.clone().unwrap_or_default();
        t.row(vec![
            h.id.to_string(),
            timestamp(h.at.as_ref()),
            format!("{}/{}", key.branch, key.consumer_id),
            h.event.clone(),
            opt(h.old_next_snapshot),
            opt(h.new_next_snapshot),
            opt(h.epoch),
            opt(h.batch_id),
            h.principal.clone(),
            h.request_id.clone(),
            h.detail.clone(),
        ]);
    }
    t
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_print_as_utc_seconds() {
        let at = |seconds| timestamp(Some(&prost_types::Timestamp { seconds, nanos: 0 }));
        assert_eq!(at(0), "1970-01-01T00:00:00Z");
        assert_eq!(at(20_454 * 86_400), "2026-01-01T00:00:00Z");
        assert_eq!(at(-1), "1969-12-31T23:59:59Z");
        assert_eq!(at(1_795_000_000), "2026-11-18T11:06:40Z");
        let with_nanos = prost_types::Timestamp {
            seconds: 1_795_000_000,
            nanos: 123_456_789,
        };
        assert_eq!(timestamp(Some(&with_nanos)), "2026-11-18T11:06:40Z");
        assert_eq!(timestamp(None), "-");
    }
}
