//! `tidemark tables ...`: Paimon tables tidemark mirrors into.

// Printing to stdout is what these commands are for.
#![allow(clippy::print_stdout)]

use clap::Subcommand;
use tidemark_proto::v1 as pb;

use tidemark_core::TABLE_NAME_SPELLING;

use super::render::{Table, plan_banner, show, warn};
use super::{CallFailed, Connection, call_error};

/// The code of the registration warning for a location that holds no
/// Paimon table (the reason recovery on it is then refused with).
const LOCATION_HAS_NO_TABLE: &str = "TABLE_LOCATION_EMPTY:";

/// `tidemark tables ...` (SPEC §9: Paimon tables tidemark mirrors into).
#[derive(Debug, Subcommand)]
pub(crate) enum TablesCommand {
    /// Registered tables and their locations.
    List,
    /// Register a table's directory (absolute path, file:// or s3:// URL):
    /// its consumers are then mirrored into its consumer files.
    Register {
        /// Table identifier "database.table".
        #[arg(value_parser = crate::cli::table_arg)]
        table: String,
        /// The table's directory.
        location: String,
        /// Apply (default: show the plan).
        #[arg(long)]
        execute: bool,
        /// Register even when there is no Paimon table at the location yet
        /// (recovery on it is refused until one is created there).
        #[arg(long)]
        allow_missing: bool,
    },
    /// Stop mirroring a table (its consumer files stay).
    Unregister {
        /// Table identifier "database.table".
        #[arg(value_parser = crate::cli::table_arg)]
        table: String,
        /// Apply (default: show the plan).
        #[arg(long)]
        execute: bool,
    },
    /// Import the table's existing consumer files (every branch).
    Import {
        /// Table identifier "database.table".
        #[arg(value_parser = crate::cli::table_arg)]
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
            allow_missing,
        } => {
            let request = |execute| pb::RegisterTableRequest {
                table: table.clone(),
                location: location.clone(),
                execute,
            };
            // A mistyped location would register "a table with no snapshot
            // yet" and only fail later, at a worker's recovery: plan first,
            // and refuse what the plan says is not there.
            if execute && !allow_missing {
                let plan = admin
                    .register_table(request(false))
                    .await
                    .map_err(call_error)?
                    .into_inner();
                if let Some(missing) = plan.warnings.iter().find(|w| w.starts_with(LOCATION_HAS_NO_TABLE)) {
                    return Err(anyhow::Error::new(CallFailed {
                        code: tonic::Code::FailedPrecondition,
                        text: format!(
                            "FAILED_PRECONDITION {}\nhint: check the location (tidemark tables list shows what is \
                             registered), or pass --allow-missing to register it before the table is created",
                            missing.replacen(':', ", not registered:", 1)
                        ),
                        transport: false,
                    }));
                }
            }
            let response = admin
                .register_table(request(execute))
                .await
                .map_err(call_error)?
                .into_inner();
            // The table's spelling was said when the argument was read.
            for warning in response.warnings.iter().filter(|w| !w.starts_with(TABLE_NAME_SPELLING)) {
                warn(warning);
            }
            show(output, &response, "tidemark.v1.RegisterTableResponse", |response| {
                plan_banner(response.executed == Some(true));
                let registered = response.table.clone().unwrap_or_default();
                println!("{} -> {}", registered.table, registered.location);
                if !response.previous_location.is_empty() {
                    println!("moved from {}", response.previous_location);
                }
                match (response.earliest_snapshot, response.latest_snapshot) {
                    (Some(earliest), Some(latest)) => println!("snapshots {earliest}\u{2013}{latest}"),
                    _ if !response.probe_error.is_empty() => {
                        println!("cannot read the table now: {}", response.probe_error);
                    }
                    _ if response.warnings.iter().any(|w| w.starts_with(LOCATION_HAS_NO_TABLE)) => {
                        println!("no Paimon table there (see the warning)");
                    }
                    _ => println!("no snapshot yet"),
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
                plan_banner(response.executed == Some(true));
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
                plan_banner(response.executed == Some(true));
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
