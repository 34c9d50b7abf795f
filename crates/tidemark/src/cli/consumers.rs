//! `tidemark consumers ...`: list, describe, reset, delete, clear, revoke,
//! expire.

// Printing to stdout is what these commands are for.
#![allow(clippy::print_stdout)]

use std::collections::BTreeMap;

use clap::{Args, Subcommand};
use tidemark_client::{AdminClient, AuthChannel};
use tidemark_proto::v1 as pb;

use super::render::{Table, duration, history_table, opt, plan_banner, show, timestamp};
use super::{Connection, Output, call_error};

/// `tidemark consumers ...`
#[derive(Debug, Subcommand)]
pub(crate) enum ConsumersCommand {
    /// List consumers (and keys with a live lease), with lease and idle info.
    List {
        /// Only this table.
        #[arg(long)]
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
        #[arg(long)]
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
        /// Table identifier "database.table".
        table: String,
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
        #[arg(long)]
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
        #[arg(long)]
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
}

fn consumer_row(c: &pb::ConsumerInfo) -> Vec<String> {
    let key = c.key.clone().unwrap_or_default();
    let lease = c.lease.as_ref();
    let live = lease.filter(|l| l.state == "active");
    vec![
        key.table,
        key.branch,
        key.consumer_id,
        opt(c.consumer.as_ref().map(|c| c.next_snapshot)),
        opt(c.consumer.as_ref().and_then(|c| c.lag)),
        duration(c.idle.as_ref()),
        if c.expired {
            "expired".to_owned()
        } else {
            duration(c.expires_in.as_ref())
        },
        live.map_or_else(|| "-".to_owned(), |l| format!("{} (epoch {})", l.holder, l.epoch)),
    ]
}

/// The consumers of the first page, or of every page (`all`), and the next
/// page's token.
async fn pages(
    admin: &mut AdminClient<AuthChannel>,
    mut request: pb::ListConsumersRequest,
    all: bool,
) -> anyhow::Result<(Vec<pb::ConsumerInfo>, String)> {
    let mut consumers = Vec::new();
    loop {
        let page = admin
            .list_consumers(request.clone())
            .await
            .map_err(call_error)?
            .into_inner();
        consumers.extend(page.consumers);
        if !all || page.next_page_token.is_empty() {
            return Ok((consumers, page.next_page_token));
        }
        request.page_token = page.next_page_token;
    }
}

/// Every consumer the request selects, most lagging first (in time where
/// known, then in snapshots), at most `top`.
async fn worst_first(
    admin: &mut AdminClient<AuthChannel>,
    request: pb::ListConsumersRequest,
    top: usize,
) -> anyhow::Result<pb::ListConsumersResponse> {
    let (mut consumers, _) = pages(admin, request, true).await?;
    consumers.retain(|c| c.consumer.is_some());
    let waited = |c: &pb::ConsumerInfo| c.lag_time.as_ref().map(|d| (d.seconds, d.nanos));
    let snapshots = |c: &pb::ConsumerInfo| c.consumer.as_ref().and_then(|r| r.lag);
    consumers.sort_by(|a, b| {
        waited(b)
            .cmp(&waited(a))
            .then_with(|| snapshots(b).cmp(&snapshots(a)))
            .then_with(|| {
                a.key
                    .as_ref()
                    .map(|k| (&k.table, &k.branch, &k.consumer_id))
                    .cmp(&b.key.as_ref().map(|k| (&k.table, &k.branch, &k.consumer_id)))
            })
    });
    consumers.truncate(top);
    Ok(pb::ListConsumersResponse {
        consumers,
        next_page_token: String::new(),
    })
}

fn print_lag(response: &pb::ListConsumersResponse) {
    let mut t = Table::new(vec![
        "TABLE", "BRANCH", "CONSUMER", "NEXT", "LATEST", "LAG", "LAG TIME", "IDLE", "LEASE",
    ]);
    for c in &response.consumers {
        let key = c.key.clone().unwrap_or_default();
        let record = c.consumer.clone().unwrap_or_default();
        let live = c.lease.as_ref().filter(|l| l.state == "active");
        t.row(vec![
            key.table,
            key.branch,
            key.consumer_id,
            record.next_snapshot.to_string(),
            opt(record.latest_snapshot),
            opt(record.lag),
            duration(c.lag_time.as_ref()),
            duration(c.idle.as_ref()),
            live.map_or_else(|| "-".to_owned(), |l| format!("{} (epoch {})", l.holder, l.epoch)),
        ]);
    }
    t.print();
}

fn change_row(c: &pb::ConsumerChange) -> Vec<String> {
    let key = c.consumer.clone().unwrap_or_default();
    vec![
        key.consumer_id,
        opt(c.old_next_snapshot),
        opt(c.new_next_snapshot),
        c.revoked_lease
            .as_ref()
            .map_or_else(|| "-".to_owned(), |l| format!("{} (epoch {})", l.holder, l.epoch)),
    ]
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
            list(&mut admin, output, request, all).await
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
            loop {
                let response = worst_first(&mut admin, request.clone(), top).await?;
                if watch.is_some() && output == Output::Table {
                    // Clear the screen and go home, as `watch` does.
                    print!("\x1b[2J\x1b[H");
                }
                show(output, &response, "tidemark.v1.ListConsumersResponse", print_lag)?;
                match &watch {
                    Some(every) => tokio::time::sleep(every.0).await,
                    None => return Ok(()),
                }
            }
        }
        ConsumersCommand::Describe { key, history } => {
            let request = pb::DescribeConsumerRequest {
                consumer: Some(key.key()),
                history_limit: history,
            };
            let response = admin.describe_consumer(request).await.map_err(call_error)?.into_inner();
            show(
                output,
                &response,
                "tidemark.v1.DescribeConsumerResponse",
                print_described,
            )
        }
        ConsumersCommand::Reset {
            table,
            consumer_id,
            next_snapshot,
            branch,
            bulk,
            change,
        } => {
            let target = bulk.target()?;
            match (next_snapshot, target) {
                (Some(next_snapshot), None) if bulk.including.is_none() && bulk.excluding.is_none() => {
                    let consumer_id = consumer_id.expect("clap: the id comes before the position");
                    let request = pb::ResetConsumerRequest {
                        consumer: Some(pb::ConsumerKey {
                            table,
                            branch,
                            consumer_id,
                        }),
                        next_snapshot,
                        expected_next_snapshot: change.expected,
                        force: change.force,
                        execute: change.execute,
                    };
                    let response = admin.reset_consumer(request).await.map_err(call_error)?.into_inner();
                    show(output, &response, "tidemark.v1.ResetConsumerResponse", |r| {
                        print_changes(r.executed, &[r.change.clone().unwrap_or_default()]);
                    })
                }
                (None, Some(target)) => {
                    if change.expected.is_some() {
                        return Err(super::UsageError(
                            "--expected is for one consumer; a bulk reset takes its preconditions from its plan".into(),
                        )
                        .into());
                    }
                    // One consumer named: exactly that id.
                    let including = match (&consumer_id, &bulk.including) {
                        (Some(_), Some(_)) => {
                            return Err(super::UsageError("give a consumer id or --including, not both".into()).into());
                        }
                        (Some(id), None) => regex::escape(id),
                        (None, including) => including.clone().unwrap_or_default(),
                    };
                    let mut request = pb::ResetConsumersRequest {
                        table,
                        branch,
                        including,
                        excluding: bulk.excluding.clone().unwrap_or_default(),
                        target: Some(pb::ResetTarget { target: Some(target) }),
                        force: change.force,
                        execute: false,
                        expected_next_snapshots: Default::default(),
                    };
                    let mut response = admin
                        .reset_consumers(request.clone())
                        .await
                        .map_err(call_error)?
                        .into_inner();
                    if change.execute {
                        // Apply exactly the plan: each consumer only if it is
                        // still where the plan saw it.
                        request.execute = true;
                        request.expected_next_snapshots = response
                            .reset
                            .iter()
                            .filter_map(|c| Some((c.consumer.as_ref()?.consumer_id.clone(), c.old_next_snapshot?)))
                            .collect();
                        if request.expected_next_snapshots.is_empty() {
                            response.executed = true;
                        } else {
                            response = admin.reset_consumers(request).await.map_err(call_error)?.into_inner();
                        }
                    }
                    show(output, &response, "tidemark.v1.ResetConsumersResponse", |r| {
                        print_changes(r.executed, &r.reset);
                        print_skipped(&r.skipped);
                    })
                }
                _ => Err(super::UsageError(
                    "give either <consumer_id> <next_snapshot> (one consumer), or one target: --to-snapshot, \
                     --to-earliest, --to-latest, --to-datetime or --shift-by (with --including/--excluding or a \
                     consumer id)"
                        .into(),
                )
                .into()),
            }
        }
        ConsumersCommand::Delete { key, change } => {
            let request = pb::DeleteConsumerRequest {
                consumer: Some(key.key()),
                expected_next_snapshot: change.expected,
                force: change.force,
                execute: change.execute,
            };
            let response = admin.delete_consumer(request).await.map_err(call_error)?.into_inner();
            show(output, &response, "tidemark.v1.DeleteConsumerResponse", |r| {
                print_changes(r.executed, &[r.change.clone().unwrap_or_default()]);
            })
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
            let response = admin.clear_consumers(request).await.map_err(call_error)?.into_inner();
            show(output, &response, "tidemark.v1.ClearConsumersResponse", print_cleared)
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
            let response = admin.revoke_leases(request).await.map_err(call_error)?.into_inner();
            show(output, &response, "tidemark.v1.RevokeLeasesResponse", |r| {
                plan_banner(r.executed);
                let mut t = Table::new(vec![
                    "TABLE",
                    "BRANCH",
                    "CONSUMER",
                    "HOLDER",
                    "LEASE EPOCH",
                    "KEY EPOCH NOW",
                ]);
                for e in &r.revoked {
                    let k = e.consumer.clone().unwrap_or_default();
                    let lease = e.lease.clone().unwrap_or_default();
                    t.row(vec![
                        k.table,
                        k.branch,
                        k.consumer_id,
                        lease.holder,
                        lease.epoch.to_string(),
                        e.epoch.to_string(),
                    ]);
                }
                t.print();
                if !r.not_reached.is_empty() {
                    println!(
                        "{} leased consumers not reached before the call's time ran out (left alone): run again",
                        r.not_reached.len()
                    );
                }
            })
        }
        ConsumersCommand::Revoke { key, reason, execute } => {
            let request = pb::RevokeLeaseRequest {
                consumer: Some(key.key()),
                reason,
                execute,
            };
            let response = admin.revoke_lease(request).await.map_err(call_error)?.into_inner();
            show(output, &response, "tidemark.v1.RevokeLeaseResponse", |r| {
                plan_banner(r.executed);
                match &r.lease {
                    Some(l) => println!(
                        "revoked lease of {} (epoch {}); the key's epoch is now {}",
                        l.holder, l.epoch, r.epoch
                    ),
                    None => println!("no live lease to revoke (epoch {})", r.epoch),
                }
            })
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
            let response = admin.expire_consumers(request).await.map_err(call_error)?.into_inner();
            show(output, &response, "tidemark.v1.ExpireConsumersResponse", print_expired)
        }
    }
}

/// Lists consumers: the first page, or with `all` every page.
async fn list(
    admin: &mut AdminClient<AuthChannel>,
    output: Output,
    request: pb::ListConsumersRequest,
    all: bool,
) -> anyhow::Result<()> {
    let (consumers, next_page_token) = pages(admin, request, all).await?;
    let response = pb::ListConsumersResponse {
        consumers,
        next_page_token,
    };
    show(output, &response, "tidemark.v1.ListConsumersResponse", |r| {
        let mut t = Table::new(vec![
            "TABLE",
            "BRANCH",
            "CONSUMER",
            "NEXT",
            "LAG",
            "IDLE",
            "EXPIRES IN",
            "LEASE",
        ]);
        for c in &r.consumers {
            t.row(consumer_row(c));
        }
        t.print();
        if !r.next_page_token.is_empty() {
            println!("(more: --all, or narrow with --table/--branch/--prefix)");
        }
    })
}

fn print_described(response: &pb::DescribeConsumerResponse) {
    let info = response.info.clone().unwrap_or_default();
    let k = info.key.clone().unwrap_or_default();
    println!("consumer      {}@{}/{}", k.table, k.branch, k.consumer_id);
    match &info.consumer {
        Some(c) => {
            println!("next snapshot {}", c.next_snapshot);
            println!("lag           {}", opt(c.lag));
            println!("created       {}", timestamp(c.created_at.as_ref()));
            println!("updated       {}", timestamp(c.updated_at.as_ref()));
        }
        None => println!("next snapshot - (no consumer record)"),
    }
    println!("idle          {}", duration(info.idle.as_ref()));
    println!(
        "expires in    {}",
        if info.expired {
            "expired".to_owned()
        } else {
            duration(info.expires_in.as_ref())
        }
    );
    println!("epoch         {}", info.epoch);
    match &info.lease {
        Some(l) => println!(
            "lease         {} holder {} epoch {} (remaining {}){}",
            l.state,
            l.holder,
            l.epoch,
            duration(l.remaining.as_ref()),
            l.full_scan_pin
                .map(|p| format!(", pins snapshot {p}"))
                .unwrap_or_default()
        ),
        None => println!("lease         -"),
    }
    let options: BTreeMap<_, _> = response.table_options.iter().collect();
    println!(
        "table options {}",
        if options.is_empty() {
            "-".to_owned()
        } else {
            format!("{options:?}")
        }
    );
    if let Some(m) = &response.mirror {
        // The file as read from storage for this answer.
        let file = match m.file_state.as_str() {
            "PRESENT" => format!("shows {}", opt(m.file_next_snapshot)),
            "MISSING" => "is missing".to_owned(),
            "UNREADABLE" => format!("is unreadable ({})", m.file_error),
            "BRANCH_MISSING" => "cannot exist: the branch's directory is gone".to_owned(),
            "STORAGE_ERROR" => format!("cannot be read now ({})", m.file_error),
            other => format!("is in state {other}"),
        };
        println!(
            "paimon file   {} {} ({}; tidemark last wrote {}){}",
            m.path,
            file,
            if m.in_sync { "in sync" } else { "not in sync" },
            opt(m.mirrored_next_snapshot),
            if m.failures > 0 {
                format!(", {} failed attempts: {}", m.failures, m.last_error)
            } else {
                String::new()
            }
        );
    }
    println!();
    history_table(&response.recent_history).print();
}

/// The plan banner and the consumers a change touched.
fn print_changes(executed: bool, changes: &[pb::ConsumerChange]) {
    plan_banner(executed);
    let mut t = Table::new(vec!["CONSUMER", "OLD", "NEW", "REVOKED LEASE"]);
    for c in changes {
        t.row(change_row(c));
    }
    t.print();
}

fn print_cleared(response: &pb::ClearConsumersResponse) {
    print_changes(response.executed, &response.cleared);
    print_skipped(&response.skipped);
}

fn print_skipped(skipped: &[pb::SkippedConsumer]) {
    if !skipped.is_empty() {
        println!();
        let mut s = Table::new(vec!["SKIPPED", "REASON", "WHY"]);
        for k in skipped {
            s.row(vec![k.consumer_id.clone(), k.reason.clone(), k.message.clone()]);
        }
        s.print();
    }
}

fn print_expired(response: &pb::ExpireConsumersResponse) {
    plan_banner(response.executed);
    let mut t = Table::new(vec!["TABLE", "BRANCH", "CONSUMER", "LAST NEXT", "IDLE"]);
    for e in &response.expired {
        let k = e.consumer.clone().unwrap_or_default();
        t.row(vec![
            k.table,
            k.branch,
            k.consumer_id,
            e.next_snapshot.to_string(),
            duration(e.idle.as_ref()),
        ]);
    }
    t.print();
}
