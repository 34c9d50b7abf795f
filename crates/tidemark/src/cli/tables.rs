//! `tidemark tables ...`: Paimon tables tidemark mirrors into.

// Printing to stdout is what these commands are for.
#![allow(clippy::print_stdout)]

use clap::Subcommand;
use tidemark_proto::v1 as pb;

use super::render::{Table, plan_banner, show};
use super::{Connection, call_error};

/// `tidemark tables ...` (SPEC §9: Paimon tables tidemark mirrors into).
#[derive(Debug, Subcommand)]
pub(crate) enum TablesCommand {
    /// Registered tables and their locations.
    List,
    /// Register a table's directory (absolute path, file:// or s3:// URL):
    /// its consumers are then mirrored into its consumer files.
    Register {
        /// Table identifier "database.table".
        table: String,
        /// The table's directory.
        location: String,
        /// Apply (default: show the plan).
        #[arg(long)]
        execute: bool,
    },
    /// Stop mirroring a table (its consumer files stay).
    Unregister {
        /// Table identifier "database.table".
        table: String,
        /// Apply (default: show the plan).
        #[arg(long)]
        execute: bool,
    },
    /// Import the table's existing consumer files (every branch).
    Import {
        /// Table identifier "database.table".
        table: String,
        /// Apply (default: show the plan).
        #[arg(long)]
        execute: bool,
    },
}

/// Runs `tidemark tables ...`.
pub(crate) async fn tables(conn: &Connection, command: TablesCommand) -> anyhow::Result<()> {
    let mut admin = conn.admin().await?;
    let output = conn.output;
    match command {
        TablesCommand::List => {
            let response = admin
                .list_tables(pb::ListTablesRequest {})
                .await
                .map_err(call_error)?
                .into_inner();
            show(output, &response, "tidemark.v1.ListTablesResponse", |response| {
                let mut t = Table::new(vec!["TABLE", "LOCATION", "REGISTERED BY"]);
                for table in &response.tables {
                    t.row(vec![
                        table.table.clone(),
                        table.location.clone(),
                        table.registered_by.clone(),
                    ]);
                }
                t.print();
            })
        }
        TablesCommand::Register {
            table,
            location,
            execute,
        } => {
            let response = admin
                .register_table(pb::RegisterTableRequest {
                    table,
                    location,
                    execute,
                })
                .await
                .map_err(call_error)?
                .into_inner();
            show(output, &response, "tidemark.v1.RegisterTableResponse", |response| {
                plan_banner(response.executed);
                let registered = response.table.clone().unwrap_or_default();
                println!("{} -> {}", registered.table, registered.location);
                if !response.previous_location.is_empty() {
                    println!("moved from {}", response.previous_location);
                }
                match (response.earliest_snapshot, response.latest_snapshot) {
                    (Some(earliest), Some(latest)) => println!("snapshots {earliest}\u{2013}{latest}"),
                    _ if response.probe_error.is_empty() => println!("no snapshot yet"),
                    _ => println!("cannot read the table now: {}", response.probe_error),
                }
            })
        }
        TablesCommand::Unregister { table, execute } => {
            let response = admin
                .unregister_table(pb::UnregisterTableRequest { table, execute })
                .await
                .map_err(call_error)?
                .into_inner();
            show(output, &response, "tidemark.v1.UnregisterTableResponse", |response| {
                plan_banner(response.executed);
                println!(
                    "{}",
                    if response.was_registered {
                        "unregistered"
                    } else {
                        "was not registered"
                    }
                );
            })
        }
        TablesCommand::Import { table, execute } => {
            let response = admin
                .import_consumers(pb::ImportConsumersRequest { table, execute })
                .await
                .map_err(call_error)?
                .into_inner();
            show(output, &response, "tidemark.v1.ImportConsumersResponse", |response| {
                plan_banner(response.executed);
                let mut t = Table::new(vec!["BRANCH", "CONSUMER", "NEXT SNAPSHOT", "RESULT"]);
                for imported in &response.imported {
                    let key = imported.consumer.clone().unwrap_or_default();
                    t.row(vec![
                        key.branch,
                        key.consumer_id,
                        imported.next_snapshot.to_string(),
                        "imported".to_owned(),
                    ]);
                }
                for skipped in &response.skipped {
                    t.row(vec![
                        skipped.branch.clone(),
                        skipped.consumer_id.clone(),
                        "-".to_owned(),
                        format!("skipped {}: {}", skipped.reason, skipped.message),
                    ]);
                }
                t.print();
            })
        }
    }
}
