//! `tidemark state ...`: export and import tidemark's own state (SPEC §11
//! A7), for backups and moves between clusters.

// Printing to stdout is what these commands are for.
#![allow(clippy::print_stdout)]

use std::io::{BufRead, Write};

use anyhow::Context;
use clap::Subcommand;
use tidemark_proto::v1 as pb;

use super::render::{Table, plan_banner, show};
use super::{Connection, call_error};

/// Lines per upload message.
const LINES_PER_MESSAGE: usize = 2000;

/// `tidemark state ...`.
#[derive(Debug, Subcommand)]
pub(crate) enum StateCommand {
    /// Write every consumer, epoch high-water mark, table option and
    /// registration (of one table, or all) as JSON lines, read from one
    /// consistent snapshot.
    Export {
        /// Only this table.
        #[arg(long, value_parser = crate::cli::table_arg)]
        table: Option<String>,
        /// Write to this file (default: standard output). Written to a
        /// temporary file beside it and renamed once whole.
        #[arg(long)]
        file: Option<std::path::PathBuf>,
    },
    /// Import an export: plan first (the default), then --execute. Epochs
    /// never go down; what the target has differently is kept unless
    /// --replace-existing; keys with live leases are refused unless --force.
    Import {
        /// The export ("-": standard input).
        file: std::path::PathBuf,
        /// Apply (default: show the plan).
        #[arg(long)]
        execute: bool,
        /// Revoke live leases on the keys the import changes (their queries
        /// are fenced) instead of refusing those keys.
        #[arg(long)]
        force: bool,
        /// Move consumers, options and registrations the target has
        /// differently to what the file says.
        #[arg(long)]
        replace_existing: bool,
        /// Leave the file's registrations out (register the tables where
        /// they live now afterwards).
        #[arg(long)]
        skip_registrations: bool,
        /// Re-create consumers the target deleted (or expired) since the
        /// export; without it an older backup never brings them back. An
        /// empty database is restored whole either way.
        #[arg(long)]
        restore_deleted: bool,
    },
}

/// Runs `tidemark state ...`.
pub(crate) async fn state(conn: &Connection, command: StateCommand) -> anyhow::Result<()> {
    let mut admin = conn.admin().await?;
    match command {
        StateCommand::Export { table, file } => {
            let mut stream = admin
                .export_state(pb::ExportStateRequest {
                    table: table.unwrap_or_default(),
                })
                .await
                .map_err(call_error)?
                .into_inner();
            let (mut out, partial): (Box<dyn Write>, _) = match &file {
                Some(path) => {
                    let partial = path.with_extension("partial");
                    let created = std::fs::File::create(&partial)
                        .with_context(|| format!("cannot create {}", partial.display()))?;
                    (Box::new(std::io::BufWriter::new(created)), Some(partial))
                }
                None => (Box::new(std::io::BufWriter::new(std::io::stdout().lock())), None),
            };
            let mut lines = 0usize;
            while let Some(message) = stream.message().await.map_err(call_error)? {
                for line in message.lines {
                    out.write_all(line.as_bytes())?;
                    out.write_all(b"\n")?;
                    lines += 1;
                }
            }
            out.flush()?;
            drop(out);
            if let (Some(partial), Some(path)) = (partial, &file) {
                std::fs::rename(&partial, path).with_context(|| format!("cannot write {}", path.display()))?;
                eprintln!("wrote {lines} lines to {}", path.display());
            }
            Ok(())
        }
        StateCommand::Import {
            file,
            execute,
            force,
            replace_existing,
            skip_registrations,
            restore_deleted,
        } => {
            let lines = read_lines(&file)?;
            let settings = pb::ImportSettings {
                execute,
                force,
                replace_existing,
                skip_registrations,
                restore_deleted,
            };
            let mut messages: Vec<pb::ImportStateRequest> = lines
                .chunks(LINES_PER_MESSAGE)
                .map(|chunk| pb::ImportStateRequest {
                    settings: None,
                    lines: chunk.to_vec(),
                })
                .collect();
            match messages.first_mut() {
                Some(first) => first.settings = Some(settings),
                None => messages.push(pb::ImportStateRequest {
                    settings: Some(settings),
                    lines: Vec::new(),
                }),
            }
            let response = admin
                .import_state(tokio_stream::iter(messages))
                .await
                .map_err(call_error)?
                .into_inner();
            show(conn.output, &response, "tidemark.v1.ImportStateResponse", render_import)
        }
    }
}

fn read_lines(file: &std::path::Path) -> anyhow::Result<Vec<String>> {
    let reader: Box<dyn BufRead> = if file.as_os_str() == "-" {
        Box::new(std::io::stdin().lock())
    } else {
        Box::new(std::io::BufReader::new(
            std::fs::File::open(file).with_context(|| format!("cannot read {}", file.display()))?,
        ))
    };
    let mut lines = Vec::new();
    for line in reader.lines() {
        let line = line.with_context(|| format!("cannot read {}", file.display()))?;
        if !line.trim().is_empty() {
            lines.push(line);
        }
    }
    Ok(lines)
}

fn render_import(response: &pb::ImportStateResponse) {
    plan_banner(response.executed == Some(true));
    // Every key counted once (the parts add up to the keys).
    let executed = response.executed == Some(true);
    // A plan's counts are what executing it would do.
    println!(
        "{} keys: {} consumers {}, {} replaced, {} already there, {} kept at another position, \
         {} epoch only, {} deleted since the export, {} refused; {} epochs raised; {} keys {}",
        response.keys,
        response.consumers_created,
        if executed { "created" } else { "to create" },
        response.consumers_replaced,
        response.consumers_same,
        response.consumers_kept,
        response.consumers_epoch_only,
        response.consumers_deleted_since_export,
        response.keys_refused,
        response.epochs_raised,
        response.keys_written,
        if executed { "written" } else { "to write" },
    );
    if !response.tables.is_empty() {
        let mut t = Table::new(vec!["TABLE", "SETTING", "RESULT", "BEFORE", "FILE"]);
        for s in &response.tables {
            t.row(vec![
                s.table.clone(),
                s.setting.clone(),
                s.outcome.clone(),
                if s.before.is_empty() {
                    "-".into()
                } else {
                    s.before.clone()
                },
                s.file.clone(),
            ]);
        }
        t.print();
    }
    if !response.changes.is_empty() {
        let position = |p: Option<i64>| p.map_or_else(|| "-".to_owned(), |p| p.to_string());
        let mut t = Table::new(vec![
            "TABLE", "BRANCH", "CONSUMER", "RESULT", "OLD", "NEW", "FILE", "EPOCH",
        ]);
        for c in &response.changes {
            let key = c.consumer.clone().unwrap_or_default();
            let refused = !c.refused_reason.is_empty();
            let result = if refused {
                format!("refused {}: {}", c.refused_reason, refusal_note(&c.refused_reason))
            } else {
                let revoked = c.revoked_lease.as_ref().map(|l| format!(", revoked {}", l.holder));
                format!("{}{}", c.consumer_outcome, revoked.unwrap_or_default())
            };
            t.row(vec![
                key.table,
                key.branch,
                key.consumer_id,
                result,
                position(c.old_next_snapshot),
                position(c.new_next_snapshot),
                position(c.file_next_snapshot),
                if refused {
                    "-".to_owned()
                } else if c.new_epoch == c.old_epoch {
                    format!("{} (unchanged)", c.old_epoch)
                } else {
                    format!("{} -> {}", c.old_epoch, c.new_epoch)
                },
            ]);
        }
        t.print();
        if response.changes_truncated {
            println!("(the first {} keys are listed)", response.changes.len());
        }
    }
    if response.epochs_raised > 0 && response.epoch_margin > 0 {
        println!(
            "EPOCH: where this database knew an earlier epoch than the file, the key's epoch becomes the file's \
             plus {} (2^20): the exporting server may have granted epochs after the export, and none of them is \
             granted again",
            response.epoch_margin
        );
    }
    if response.consumers_deleted_since_export > 0 {
        println!(
            "deleted_since_export: this database deleted (or expired) the consumer after the export; it stays \
             deleted (--restore-deleted brings it back)"
        );
    }
}

/// A refusal in a word or two: the reason code says the rest, and the
/// server's message is in the JSON output.
fn refusal_note(reason: &str) -> &'static str {
    match reason {
        "LEASE_HELD" => "a live lease (--force fences its query)",
        "EPOCH_EXHAUSTED" => "no epoch left to raise",
        _ => "see -o json for the message",
    }
}
