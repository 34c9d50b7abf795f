//! `tidemark options ...`: a table's consumer options.

// Printing to stdout is what these commands are for.
#![allow(clippy::print_stdout)]

use std::collections::BTreeMap;

use anyhow::bail;
use clap::Subcommand;
use tidemark_proto::v1 as pb;

use super::render::{Table, plan_banner, show};
use super::{Connection, call_error};

/// `tidemark options ...`
#[derive(Debug, Subcommand)]
pub(crate) enum OptionsCommand {
    /// Show a table's consumer options.
    Get {
        /// Table identifier "database.table".
        #[arg(value_parser = crate::cli::table_arg)]
        table: String,
    },
    /// Change a table's consumer options: key=value pairs, e.g.
    /// consumer.expiration-time="1 d".
    Set {
        /// Table identifier "database.table".
        #[arg(value_parser = crate::cli::table_arg)]
        table: String,
        /// Options to set, as key=value.
        #[arg(value_parser = parse_pair)]
        options: Vec<(String, String)>,
        /// Options to remove.
        #[arg(long)]
        unset: Vec<String>,
        /// Apply (default: show the plan).
        #[arg(long)]
        execute: bool,
    },
}

fn parse_pair(s: &str) -> Result<(String, String), String> {
    s.split_once('=')
        .map(|(k, v)| (k.trim().to_owned(), v.trim().to_owned()))
        .ok_or_else(|| format!("{s:?} is not key=value"))
}

/// Runs `tidemark options ...`.
pub(crate) async fn options(conn: &Connection, command: OptionsCommand) -> anyhow::Result<()> {
    let mut admin = conn.admin().await?;
    let output = conn.output;
    match command {
        OptionsCommand::Get { table } => {
            let response = admin
                .get_table_options(pb::GetTableOptionsRequest { table })
                .await
                .map_err(call_error)?
                .into_inner();
            show(output, &response, "tidemark.v1.GetTableOptionsResponse", |response| {
                let mut t = Table::new(vec!["OPTION", "VALUE"]);
                let options: BTreeMap<_, _> = response.options.iter().collect();
                for key in tidemark_core::options::KNOWN_KEYS {
                    t.row(vec![
                        key.to_owned(),
                        options
                            .get(&key.to_owned())
                            .map_or_else(|| "(default)".to_owned(), |v| (*v).clone()),
                    ]);
                }
                t.print();
            })
        }
        OptionsCommand::Set {
            table,
            options,
            unset,
            execute,
        } => {
            if options.is_empty() && unset.is_empty() {
                bail!("nothing to change: give key=value pairs and/or --unset key");
            }
            let response = admin
                .set_table_options(pb::SetTableOptionsRequest {
                    table,
                    options: options.into_iter().collect(),
                    unset,
                    execute,
                })
                .await
                .map_err(call_error)?
                .into_inner();
            show(output, &response, "tidemark.v1.SetTableOptionsResponse", |response| {
                plan_banner(response.executed == Some(true));
                let mut t = Table::new(vec!["OPTION", "BEFORE", "AFTER"]);
                for key in tidemark_core::options::KNOWN_KEYS {
                    t.row(vec![
                        key.to_owned(),
                        response.before.get(key).cloned().unwrap_or_else(|| "-".to_owned()),
                        response.after.get(key).cloned().unwrap_or_else(|| "-".to_owned()),
                    ]);
                }
                t.print();
            })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn key_value_pairs() {
        assert_eq!(
            parse_pair("consumer.expiration-time=1 d"),
            Ok(("consumer.expiration-time".into(), "1 d".into()))
        );
        assert!(parse_pair("nope").is_err());
    }
}
