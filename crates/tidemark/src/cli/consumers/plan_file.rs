//! `consumers reset --export plan.csv` and `--from-file plan.csv`, as
//! Kafka's `kafka-consumer-groups --reset-offsets --export` / `--from-file`:
//! a reset planned once, reviewed (or edited) as a file, and executed row by
//! row, each row compared-and-set on the position its plan saw, so a
//! consumer that moved since is refused, never overwritten.

use std::fmt::Write as _;
use std::path::Path;

use anyhow::Context;
use tidemark_client::{AdminClient, AuthChannel};
use tidemark_proto::v1 as pb;

use crate::cli::UsageError;
use crate::cli::render::{Table, plan_banner};
use tidemark_client::ApiError;

/// The file's header: its columns, in order.
pub(super) const HEADER: &str = "table,branch,consumer_id,old_next_snapshot,new_next_snapshot";

/// One planned move.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Row {
    pub(super) table: String,
    pub(super) branch: String,
    pub(super) consumer_id: String,
    /// The position the plan saw (`None`: the consumer did not exist).
    pub(super) old: Option<i64>,
    pub(super) new: i64,
}

/// A field as CSV writes it: quoted when it holds a comma, a quote or a
/// line break (names are validated, but a file must round-trip anything).
fn field(text: &str) -> String {
    if text.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", text.replace('"', "\"\""))
    } else {
        text.to_owned()
    }
}

/// The file for `rows`.
pub(super) fn render(rows: &[Row]) -> String {
    let mut out = format!("{HEADER}\n");
    for r in rows {
        let _ = writeln!(
            out,
            "{},{},{},{},{}",
            field(&r.table),
            field(&r.branch),
            field(&r.consumer_id),
            r.old.map(|o| o.to_string()).unwrap_or_default(),
            r.new
        );
    }
    out
}

/// Splits one CSV line into its fields (RFC 4180 quoting).
fn split(line: &str) -> Result<Vec<String>, String> {
    let mut fields = vec![String::new()];
    let mut quoted = false;
    let mut chars = line.chars().peekable();
    while let Some(c) = chars.next() {
        match (c, quoted) {
            ('"', true) if chars.peek() == Some(&'"') => {
                chars.next();
                fields.last_mut().expect("one field").push('"');
            }
            ('"', true) => quoted = false,
            ('"', false) if fields.last().is_some_and(String::is_empty) => quoted = true,
            (',', false) => fields.push(String::new()),
            (c, _) => fields.last_mut().expect("one field").push(c),
        }
    }
    if quoted {
        return Err("an unclosed quote".into());
    }
    Ok(fields)
}

/// Reads a plan file: the header, then one row per consumer. Anything else
/// is refused naming the line, before a single reset is sent.
pub(super) fn parse(text: &str) -> Result<Vec<Row>, String> {
    let mut lines = text.lines().enumerate().filter(|(_, l)| !l.trim().is_empty());
    match lines.next() {
        Some((_, header)) if header.trim() == HEADER => {}
        Some((_, header)) => return Err(format!("line 1 must be the header {HEADER:?}, not {header:?}")),
        None => return Err("the file is empty".into()),
    }
    let mut rows = Vec::new();
    for (n, line) in lines {
        let at = |why: String| format!("line {}: {why}", n + 1);
        let fields = split(line).map_err(at)?;
        let [table, branch, consumer_id, old, new] =
            <[String; 5]>::try_from(fields).map_err(|f| at(format!("{} fields, expected 5 ({HEADER})", f.len())))?;
        let number = |name: &str, text: &str| {
            text.trim()
                .parse::<i64>()
                .ok()
                .filter(|n| *n >= 1)
                .ok_or_else(|| at(format!("{name} must be a snapshot id (>= 1), not {text:?}")))
        };
        rows.push(Row {
            old: match old.trim() {
                "" => None,
                text => Some(number("old_next_snapshot", text)?),
            },
            new: number("new_next_snapshot", &new)?,
            table,
            branch,
            consumer_id,
        });
    }
    Ok(rows)
}

/// Writes `rows` to `path` (beside it first, then renamed, so a reader
/// never sees half a plan).
pub(super) fn write(path: &Path, rows: &[Row]) -> anyhow::Result<()> {
    let partial = path.with_extension("partial");
    std::fs::write(&partial, render(rows)).with_context(|| format!("cannot write {}", partial.display()))?;
    std::fs::rename(&partial, path).with_context(|| format!("cannot write {}", path.display()))?;
    eprintln!("wrote {} planned resets to {}", rows.len(), path.display());
    Ok(())
}

/// Every selected consumer of a bulk plan, moved or left alone, as rows.
pub(super) fn rows_of(table: &str, branch: &str, plan: &pb::ResetConsumersResponse) -> Vec<Row> {
    let row = |id: &str, old: Option<i64>, new: Option<i64>| {
        new.map(|new| Row {
            table: table.to_owned(),
            branch: branch.to_owned(),
            consumer_id: id.to_owned(),
            old,
            new,
        })
    };
    let mut rows: Vec<Row> = plan
        .reset
        .iter()
        .filter_map(|c| {
            let id = c.consumer.as_ref().map(|k| k.consumer_id.as_str()).unwrap_or_default();
            row(id, c.old_next_snapshot, c.new_next_snapshot)
        })
        .chain(
            plan.skipped
                .iter()
                .filter_map(|s| row(&s.consumer_id, s.old_next_snapshot, s.new_next_snapshot)),
        )
        .collect();
    rows.sort_by(|a, b| a.consumer_id.cmp(&b.consumer_id));
    rows
}

/// Resets each row's consumer to its new position if it is still at the
/// old one (a plan unless `execute`); a row whose consumer did not exist
/// needs `create`. Every row is tried; any refused one makes the command
/// exit 4.
pub(super) async fn execute_rows(
    admin: &mut AdminClient<AuthChannel>,
    rows: &[Row],
    force: bool,
    execute: bool,
    create: bool,
) -> anyhow::Result<()> {
    plan_banner(execute);
    let mut t = Table::new(vec!["TABLE", "BRANCH", "CONSUMER", "OLD", "NEW", "RESULT"]);
    let mut refused = 0;
    for r in rows {
        let result = if r.old.is_none() && !create {
            refused += 1;
            "not done: creates the consumer (add --create)".to_owned()
        } else {
            let request = pb::ResetConsumerRequest {
                consumer: Some(pb::ConsumerKey {
                    table: r.table.clone(),
                    branch: r.branch.clone(),
                    consumer_id: r.consumer_id.clone(),
                }),
                next_snapshot: r.new,
                expected_next_snapshot: r.old,
                force,
                execute,
                expected_lease_id: None,
                reason: String::new(),
            };
            match admin.reset_consumer(request).await {
                Ok(_) if execute => "reset".to_owned(),
                Ok(_) => "would reset".to_owned(),
                Err(status) => {
                    refused += 1;
                    let err = ApiError::from(status);
                    format!("refused {}: {}", err.reason, err.message)
                }
            }
        };
        t.row(vec![
            r.table.clone(),
            r.branch.clone(),
            r.consumer_id.clone(),
            r.old.map_or_else(|| "-".to_owned(), |o| o.to_string()),
            r.new.to_string(),
            result,
        ]);
    }
    t.print();
    if refused > 0 {
        return Err(crate::cli::Skipped(format!(
            "{refused} of {} rows {}: see RESULT above",
            rows.len(),
            if execute { "not done" } else { "would not be done" }
        ))
        .into());
    }
    Ok(())
}

/// Reads a plan file.
pub(super) fn read(path: &Path) -> anyhow::Result<Vec<Row>> {
    let text = std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))?;
    parse(&text).map_err(|why| UsageError(format!("{}: {why}", path.display())).into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_plan_round_trips_and_bad_files_name_the_line() {
        let rows = vec![
            Row {
                table: "db.events".into(),
                branch: "main".into(),
                consumer_id: "a,\"b\"".into(),
                old: Some(52),
                new: 40,
            },
            Row {
                table: "db.events".into(),
                branch: "main".into(),
                consumer_id: "new".into(),
                old: None,
                new: 7,
            },
        ];
        assert_eq!(parse(&render(&rows)).unwrap(), rows);
        assert!(parse("").unwrap_err().contains("empty"));
        assert!(parse("a,b\n").unwrap_err().contains("line 1"));
        let bad = format!("{HEADER}\ndb.events,main,x,52\n");
        assert!(parse(&bad).unwrap_err().contains("line 2: 4 fields"));
        let bad = format!("{HEADER}\ndb.events,main,x,52,zero\n");
        assert!(parse(&bad).unwrap_err().contains("new_next_snapshot"));
        let bad = format!("{HEADER}\ndb.events,main,\"x,52,3\n");
        assert!(parse(&bad).unwrap_err().contains("unclosed quote"));
    }
}
