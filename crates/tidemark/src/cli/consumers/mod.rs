//! `tidemark consumers ...`: list, describe, reset, delete, clear, revoke,
//! expire.

// Printing to stdout is what these commands are for.
#![allow(clippy::print_stdout)]

use clap::{Args, Subcommand};
use tidemark_proto::v1 as pb;

mod change;
mod plan_file;
mod read;

use super::Connection;

/// `tidemark consumers ...`
#[derive(Debug, Subcommand)]
pub(crate) enum ConsumersCommand {
    /// List consumers (and keys with a live lease), with lease and idle info.
    List {
        /// Only this table.
        #[arg(long, value_parser = crate::cli::table_arg)]
        table: Option<String>,
        /// Only this branch.
        #[arg(long)]
        branch: Option<String>,
        /// Only consumer ids starting with this.
        #[arg(long)]
        prefix: Option<String>,
        /// Rows per page.
        #[arg(long, default_value_t = 100)]
        page_size: i32,
        /// Follow every page (default: the first page only).
        #[arg(long)]
        all: bool,
    },
    /// Consumers by lag, worst first: snapshots left to read and, for
    /// registered tables, how long the oldest of them has waited.
    Lag {
        /// Only this table.
        #[arg(long, value_parser = crate::cli::table_arg)]
        table: Option<String>,
        /// Only this branch.
        #[arg(long)]
        branch: Option<String>,
        /// Show at most this many.
        #[arg(long, default_value_t = 50)]
        top: usize,
        /// Refresh every this often until interrupted (e.g. "5s").
        #[arg(long)]
        watch: Option<crate::flags::HumanDuration>,
    },
    /// Show one consumer: record, lease, options, expiry, recent history.
    Describe {
        #[command(flatten)]
        key: KeyArgs,
        /// Recent history rows to show.
        #[arg(long, default_value_t = 10)]
        history: i32,
    },
    /// Set a consumer's next snapshot (creates it if absent): `reset <table>
    /// <id> <next_snapshot>`. Or, with a target, many at once as Kafka's
    /// --reset-offsets does: `reset <table> [<id>] --to-earliest`, with
    /// --including/--excluding selecting ids (a plan first; --execute applies
    /// it with the plan's positions as preconditions).
    Reset {
        /// Table identifier "database.table" (not with --from-file).
        #[arg(value_parser = crate::cli::table_arg, required_unless_present = "from_file")]
        table: Option<String>,
        /// Consumer id (with a target: this consumer only).
        consumer_id: Option<String>,
        /// The new next snapshot (one consumer).
        next_snapshot: Option<i64>,
        /// Branch.
        #[arg(long, default_value = "main")]
        branch: String,
        #[command(flatten)]
        bulk: BulkTarget,
        #[command(flatten)]
        change: ChangeArgs,
        /// Create the consumer when it has none (one consumer): without
        /// it, executing a reset that would create one is refused (exit 2),
        /// so a mistyped id never starts a new consumer that holds the
        /// fence.
        #[arg(long)]
        create: bool,
        /// Write the plan — every selected consumer's old and new position,
        /// skipped ones included — to this CSV file instead of executing it
        /// (columns table,branch,consumer_id,old_next_snapshot,
        /// new_next_snapshot), as Kafka's --export.
        #[arg(long, conflicts_with_all = ["execute", "from_file"])]
        export: Option<std::path::PathBuf>,
        /// Reset the consumers a plan file lists (as --export writes it),
        /// each only if it is still at the file's old position; a plan
        /// unless --execute. Exits 4 if any row is refused.
        #[arg(long, conflicts_with_all = ["table", "consumer_id", "next_snapshot"])]
        from_file: Option<std::path::PathBuf>,
    },
    /// Delete a consumer.
    Delete {
        #[command(flatten)]
        key: KeyArgs,
        #[command(flatten)]
        change: ChangeArgs,
    },
    /// Delete every consumer of a branch whose id fully matches --including
    /// and not --excluding.
    Clear {
        /// Table identifier "database.table".
        #[arg(value_parser = crate::cli::table_arg)]
        table: String,
        /// Branch.
        #[arg(long, default_value = "main")]
        branch: String,
        /// Regex (full match) of ids to clear; default all.
        #[arg(long, default_value = "")]
        including: String,
        /// Regex (full match) of ids to keep.
        #[arg(long, default_value = "")]
        excluding: String,
        /// Revoke live leases of selected consumers instead of skipping them.
        #[arg(long)]
        force: bool,
        /// Apply (default: show the plan).
        #[arg(long)]
        execute: bool,
    },
    /// Revoke a consumer's live lease (its query is fenced).
    Revoke {
        #[command(flatten)]
        key: KeyArgs,
        /// Why (kept in history).
        #[arg(long, default_value = "")]
        reason: String,
        /// Apply (default: show the plan).
        #[arg(long)]
        execute: bool,
    },
    /// Revoke every live lease of a table (or of every table) whose id
    /// matches: every running query there is fenced (before a restore, a
    /// move between clusters).
    RevokeLeases {
        /// Only this table (default: every table).
        #[arg(long, value_parser = crate::cli::table_arg)]
        table: Option<String>,
        /// Only this branch (default: every branch).
        #[arg(long)]
        branch: Option<String>,
        /// Regex (full match) of ids; default all.
        #[arg(long, default_value = "")]
        including: String,
        /// Regex (full match) of ids to leave alone.
        #[arg(long, default_value = "")]
        excluding: String,
        /// Why (kept in history).
        #[arg(long, default_value = "")]
        reason: String,
        /// Apply (default: show the plan).
        #[arg(long)]
        execute: bool,
    },
    /// Delete expired consumers now (what the sweeper does).
    Expire {
        /// Only this table.
        #[arg(long, value_parser = crate::cli::table_arg)]
        table: Option<String>,
        /// Only this branch.
        #[arg(long)]
        branch: Option<String>,
        /// Most consumers to expire.
        #[arg(long, default_value_t = 1000)]
        limit: i32,
        /// Apply (default: show the plan).
        #[arg(long)]
        execute: bool,
    },
}

/// A consumer key on the command line.
#[derive(Debug, Args)]
pub(crate) struct KeyArgs {
    /// Table identifier "database.table".
    #[arg(value_parser = crate::cli::table_arg)]
    table: String,
    /// Consumer id.
    consumer_id: String,
    /// Branch.
    #[arg(long, default_value = "main")]
    branch: String,
}

impl KeyArgs {
    fn key(&self) -> pb::ConsumerKey {
        pb::ConsumerKey {
            table: self.table.clone(),
            branch: self.branch.clone(),
            consumer_id: self.consumer_id.clone(),
        }
    }
}

/// A bulk reset's selection and target (Kafka's vocabulary).
#[derive(Debug, Args)]
#[group(skip)]
pub(crate) struct BulkTarget {
    /// Regex (full match) of ids to reset; default all.
    #[arg(long)]
    including: Option<String>,
    /// Regex (full match) of ids to leave alone.
    #[arg(long)]
    excluding: Option<String>,
    /// Move to this snapshot.
    #[arg(long, group = "to")]
    to_snapshot: Option<i64>,
    /// Move to the earliest live snapshot (registered tables).
    #[arg(long, group = "to")]
    to_earliest: bool,
    /// Move past the latest snapshot: skip everything (registered tables).
    #[arg(long, group = "to")]
    to_latest: bool,
    /// Move to the first snapshot committed at or after this time (RFC 3339,
    /// e.g. 2026-12-01T06:00:00Z; registered tables).
    #[arg(long, group = "to")]
    to_datetime: Option<String>,
    /// Move each consumer by this many snapshots (negative: back), within
    /// the table's snapshots (registered tables).
    #[arg(long, group = "to", allow_hyphen_values = true)]
    shift_by: Option<i64>,
}

impl BulkTarget {
    fn target(&self) -> anyhow::Result<Option<pb::reset_target::Target>> {
        use pb::reset_target::Target;
        Ok(if let Some(id) = self.to_snapshot {
            Some(Target::Snapshot(id))
        } else if self.to_earliest {
            Some(Target::Earliest(true))
        } else if self.to_latest {
            Some(Target::Latest(true))
        } else if let Some(at) = &self.to_datetime {
            let time = humantime::parse_rfc3339_weak(at)
                .map_err(|e| super::UsageError(format!("--to-datetime {at:?}: {e} (e.g. 2026-12-01T06:00:00Z)")))?;
            Some(Target::Time(prost_types::Timestamp::from(time)))
        } else {
            self.shift_by.map(Target::ShiftBy)
        })
    }
}

/// Options of a change to one consumer.
#[derive(Debug, Args)]
pub(crate) struct ChangeArgs {
    /// Only change it if it is at this next snapshot now.
    #[arg(long)]
    expected: Option<i64>,
    /// Revoke a live lease (fencing its query) instead of refusing.
    #[arg(long)]
    force: bool,
    /// Apply (default: show the plan).
    #[arg(long)]
    execute: bool,
    /// Why (kept in the change's history row with your principal).
    #[arg(long, default_value = "")]
    reason: String,
}

/// Runs `tidemark consumers ...`.
pub(crate) async fn consumers(conn: &Connection, command: ConsumersCommand) -> anyhow::Result<()> {
    let mut admin = conn.admin().await?;
    let output = conn.output;
    match command {
        ConsumersCommand::List {
            table,
            branch,
            prefix,
            page_size,
            all,
        } => {
            let request = pb::ListConsumersRequest {
                table: table.unwrap_or_default(),
                branch: branch.unwrap_or_default(),
                consumer_id_prefix: prefix.unwrap_or_default(),
                page_size,
                page_token: String::new(),
            };
            read::list(&mut admin, output, request, all).await
        }
        ConsumersCommand::Lag {
            table,
            branch,
            top,
            watch,
        } => {
            let request = pb::ListConsumersRequest {
                table: table.unwrap_or_default(),
                branch: branch.unwrap_or_default(),
                consumer_id_prefix: String::new(),
                page_size: 1000,
                page_token: String::new(),
            };
            read::lag(&mut admin, output, request, top, watch).await
        }
        ConsumersCommand::Describe { key, history } => {
            let request = pb::DescribeConsumerRequest {
                consumer: Some(key.key()),
                history_limit: history,
            };
            read::describe(&mut admin, output, request).await
        }
        ConsumersCommand::Reset {
            table,
            consumer_id,
            next_snapshot,
            branch,
            bulk,
            change,
            create,
            export,
            from_file,
        } => {
            if let Some(path) = from_file {
                let rows = plan_file::read(&path)?;
                return plan_file::execute_rows(&mut admin, &rows, change.force, change.execute, create).await;
            }
            let key = pb::ConsumerKey {
                table: table.expect("clap: a table unless --from-file"),
                branch,
                consumer_id: String::new(),
            };
            let single = change::Single {
                consumer_id,
                next_snapshot,
                create,
                export,
            };
            change::reset(&mut admin, output, key, single, &bulk, &change).await
        }
        ConsumersCommand::Delete { key, change } => {
            let request = pb::DeleteConsumerRequest {
                consumer: Some(key.key()),
                expected_next_snapshot: change.expected,
                force: change.force,
                execute: change.execute,
                expected_lease_id: None,
                reason: change.reason.clone(),
            };
            change::delete(&mut admin, output, request).await
        }
        ConsumersCommand::Clear {
            table,
            branch,
            including,
            excluding,
            force,
            execute,
        } => {
            let request = pb::ClearConsumersRequest {
                table,
                branch,
                including,
                excluding,
                force,
                execute,
            };
            change::clear(&mut admin, output, request).await
        }
        ConsumersCommand::RevokeLeases {
            table,
            branch,
            including,
            excluding,
            reason,
            execute,
        } => {
            let request = pb::RevokeLeasesRequest {
                table: table.unwrap_or_default(),
                branch: branch.unwrap_or_default(),
                including,
                excluding,
                reason,
                execute,
            };
            change::revoke_leases(&mut admin, output, request).await
        }
        ConsumersCommand::Revoke { key, reason, execute } => {
            let request = pb::RevokeLeaseRequest {
                consumer: Some(key.key()),
                reason,
                execute,
                expected_lease_id: None,
            };
            change::revoke(&mut admin, output, request).await
        }
        ConsumersCommand::Expire {
            table,
            branch,
            limit,
            execute,
        } => {
            let request = pb::ExpireConsumersRequest {
                table: table.unwrap_or_default(),
                branch: branch.unwrap_or_default(),
                limit,
                execute,
            };
            change::expire(&mut admin, output, request).await
        }
    }
}
