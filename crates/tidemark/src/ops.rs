//! Operator subcommands: talk gRPC to a tidemark server, print readable
//! tables (or `--output json`, the proto3 JSON mapping grpcurl prints).
//! Every mutating command is a plan unless `--execute`.

// Printing to stdout is what these commands are for.
#![allow(clippy::print_stdout)]

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::time::Duration;

use anyhow::{Context, bail};
use clap::{Args, Subcommand, ValueEnum};
use prost::Message;
use tidemark_client::{AdminClient, ApiError, AuthChannel, ClientOptions, ClientTls, RetentionClient};
use tidemark_proto::v1 as pb;

/// Where the server is, how to authenticate, and how to print.
#[derive(Debug, Args)]
pub struct Connection {
    /// The tidemark server (`https://...` with TLS).
    #[arg(
        long,
        env = "TIDEMARK_SERVER",
        default_value = "http://127.0.0.1:50051",
        global = true
    )]
    server: String,
    /// Bearer token.
    #[arg(long, env = "TIDEMARK_TOKEN", hide_env_values = true, global = true)]
    token: Option<String>,
    /// CA certificate (PEM) that signed the server's certificate.
    #[arg(long, env = "TIDEMARK_TLS_CA", global = true)]
    tls_ca: Option<std::path::PathBuf>,
    /// Client certificate (PEM), for mutual TLS.
    #[arg(long, env = "TIDEMARK_CLIENT_CERT", global = true, requires = "tls_key")]
    tls_cert: Option<std::path::PathBuf>,
    /// Client private key (PEM), for mutual TLS.
    #[arg(long, env = "TIDEMARK_CLIENT_KEY", global = true, requires = "tls_cert")]
    tls_key: Option<std::path::PathBuf>,
    /// Name to verify in the server's certificate (default: the server's host).
    #[arg(long, env = "TIDEMARK_TLS_DOMAIN", global = true)]
    tls_domain: Option<String>,
    /// Output format.
    #[arg(long, short = 'o', value_enum, default_value = "table", global = true)]
    output: Output,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Output {
    Table,
    Json,
}

/// `tidemark consumers ...`
#[derive(Debug, Subcommand)]
pub enum ConsumersCommand {
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
    /// Show one consumer: record, lease, options, expiry, recent history.
    Describe {
        #[command(flatten)]
        key: KeyArgs,
        /// Recent history rows to show.
        #[arg(long, default_value_t = 10)]
        history: i32,
    },
    /// Set a consumer's next snapshot (creates it if absent).
    Reset {
        #[command(flatten)]
        key: KeyArgs,
        /// The new next snapshot.
        next_snapshot: i64,
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

/// `tidemark options ...`
#[derive(Debug, Subcommand)]
pub enum OptionsCommand {
    /// Show a table's consumer options.
    Get {
        /// Table identifier "database.table".
        table: String,
    },
    /// Change a table's consumer options: key=value pairs, e.g.
    /// consumer.expiration-time="1 d".
    Set {
        /// Table identifier "database.table".
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

/// `tidemark tables ...` (SPEC §9: Paimon tables tidemark mirrors into).
#[derive(Debug, Subcommand)]
pub enum TablesCommand {
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

/// A consumer key on the command line.
#[derive(Debug, Args)]
pub struct KeyArgs {
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

/// Options of a change to one consumer.
#[derive(Debug, Args)]
pub struct ChangeArgs {
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

/// `tidemark fence ...`
#[derive(Debug, Args)]
pub struct FenceArgs {
    /// Table identifier "database.table".
    table: String,
    /// Branch.
    #[arg(long, default_value = "main")]
    branch: String,
    /// The table's changelog lifecycle is decoupled from snapshots.
    #[arg(long)]
    changelog_decoupled: bool,
    /// List everything holding retention back, not just the fences.
    #[arg(long)]
    explain: bool,
    /// With --explain: most holders to list.
    #[arg(long, default_value_t = 100)]
    limit: i32,
}

/// `tidemark history ...`
#[derive(Debug, Args)]
pub struct HistoryArgs {
    /// Table identifier "database.table".
    table: String,
    /// Only this consumer.
    consumer_id: Option<String>,
    /// Branch (with a consumer id: default main; without: all branches).
    #[arg(long)]
    branch: Option<String>,
    /// Rows per page.
    #[arg(long, default_value_t = 50)]
    page_size: i32,
    /// Follow every page.
    #[arg(long)]
    all: bool,
}

fn parse_pair(s: &str) -> Result<(String, String), String> {
    s.split_once('=')
        .map(|(k, v)| (k.trim().to_owned(), v.trim().to_owned()))
        .ok_or_else(|| format!("{s:?} is not key=value"))
}

impl Connection {
    async fn channel(&self) -> anyhow::Result<AuthChannel> {
        let read = |path: &Option<std::path::PathBuf>| -> anyhow::Result<Option<Vec<u8>>> {
            path.as_ref()
                .map(|p| std::fs::read(p).with_context(|| format!("cannot read {}", p.display())))
                .transpose()
        };
        let tls_wanted = self.server.starts_with("https://") || self.tls_ca.is_some() || self.tls_cert.is_some();
        let tls = if tls_wanted {
            let identity = match (read(&self.tls_cert)?, read(&self.tls_key)?) {
                (Some(cert), Some(key)) => Some((cert, key)),
                _ => None,
            };
            Some(ClientTls {
                ca_pem: read(&self.tls_ca)?,
                identity,
                domain: self.tls_domain.clone(),
            })
        } else {
            None
        };
        let options = ClientOptions {
            endpoint: self.server.clone(),
            token: self.token.clone(),
            tls,
            connect_timeout: Some(Duration::from_secs(5)),
        };
        Ok(tidemark_client::connect(&options).await?)
    }

    async fn admin(&self) -> anyhow::Result<AdminClient<AuthChannel>> {
        Ok(AdminClient::new(self.channel().await?))
    }

    async fn retention(&self) -> anyhow::Result<RetentionClient<AuthChannel>> {
        Ok(RetentionClient::new(self.channel().await?))
    }
}

/// Turns a failed call into a readable error: code, reason, message, and
/// each bad field.
fn call_error(status: tonic::Status) -> anyhow::Error {
    let err = ApiError::from(status);
    let mut text = tidemark_server::status::code_name(err.code).to_owned();
    if !err.reason.is_empty() && err.reason != text {
        let _ = write!(text, " {}", err.reason);
    }
    let _ = write!(text, ": {}", err.message);
    for (field, why) in &err.field_violations {
        let _ = write!(text, "\n  {field}: {why}");
    }
    match err.reason.as_str() {
        "LEASE_HELD" => text.push_str(
            "\nhint: stop the query that holds the lease, or pass --force to revoke it (that query is then fenced)",
        ),
        "NEXT_SNAPSHOT_MISMATCH" => text.push_str("\nhint: describe the consumer and retry with the current position"),
        _ => {}
    }
    anyhow::Error::msg(text)
}

/// Prints a response as proto3 JSON (the mapping grpcurl uses).
fn print_json<M: Message + Default>(message: &M, full_name: &str) -> anyhow::Result<()> {
    let pool = prost_reflect::DescriptorPool::decode(tidemark_proto::FILE_DESCRIPTOR_SET)?;
    let descriptor = pool
        .get_message_by_name(full_name)
        .with_context(|| format!("no descriptor for {full_name}"))?;
    let dynamic = prost_reflect::DynamicMessage::decode(descriptor, message.encode_to_vec().as_slice())?;
    let mut out = Vec::new();
    let mut serializer = serde_json::Serializer::pretty(&mut out);
    dynamic.serialize_with_options(
        &mut serializer,
        &prost_reflect::SerializeOptions::new().skip_default_fields(true),
    )?;
    println!("{}", String::from_utf8(out)?);
    Ok(())
}

/// A plain-text table.
struct Table {
    header: Vec<&'static str>,
    rows: Vec<Vec<String>>,
}

impl Table {
    fn new(header: Vec<&'static str>) -> Self {
        Self {
            header,
            rows: Vec::new(),
        }
    }

    fn row(&mut self, cells: Vec<String>) {
        self.rows.push(cells);
    }

    fn print(&self) {
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

fn opt<T: ToString>(value: Option<T>) -> String {
    value.map_or_else(|| "-".to_owned(), |v| v.to_string())
}

fn duration(d: Option<&prost_types::Duration>) -> String {
    d.map_or_else(
        || "-".to_owned(),
        |d| {
            let d = Duration::new(
                u64::try_from(d.seconds).unwrap_or(0),
                u32::try_from(d.nanos).unwrap_or(0),
            );
            tidemark_core::options::Human(d).to_string()
        },
    )
}

fn timestamp(t: Option<&prost_types::Timestamp>) -> String {
    t.map(|t| {
        let secs = t.seconds;
        let (days, rem) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
        let (y, m, d) = civil_from_days(days);
        format!(
            "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z",
            rem / 3600,
            rem / 60 % 60,
            rem % 60
        )
    })
    .unwrap_or_else(|| "-".to_owned())
}

/// Days since 1970-01-01 to (year, month, day) (Howard Hinnant's algorithm).
fn civil_from_days(days: i64) -> (i64, i64, i64) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    (yoe + era * 400 + i64::from(m <= 2), m, d)
}

fn plan_banner(executed: bool) {
    if !executed {
        println!("PLAN ONLY: nothing was changed. Run again with --execute to apply.");
    }
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

fn history_table(entries: &[pb::HistoryEntry]) -> Table {
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

/// Runs `tidemark consumers ...`.
pub async fn consumers(conn: &Connection, command: ConsumersCommand) -> anyhow::Result<()> {
    let mut admin = conn.admin().await?;
    let json = conn.output == Output::Json;
    match command {
        ConsumersCommand::List {
            table,
            branch,
            prefix,
            page_size,
            all,
        } => {
            let mut request = pb::ListConsumersRequest {
                table: table.unwrap_or_default(),
                branch: branch.unwrap_or_default(),
                consumer_id_prefix: prefix.unwrap_or_default(),
                page_size,
                page_token: String::new(),
            };
            let mut consumers = Vec::new();
            let mut next_page_token;
            loop {
                let page = admin
                    .list_consumers(request.clone())
                    .await
                    .map_err(call_error)?
                    .into_inner();
                consumers.extend(page.consumers);
                next_page_token = page.next_page_token;
                if !all || next_page_token.is_empty() {
                    break;
                }
                request.page_token = next_page_token.clone();
            }
            let response = pb::ListConsumersResponse {
                consumers,
                next_page_token,
            };
            if json {
                return print_json(&response, "tidemark.v1.ListConsumersResponse");
            }
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
            for c in &response.consumers {
                t.row(consumer_row(c));
            }
            t.print();
            if !response.next_page_token.is_empty() {
                println!("(more: --all, or narrow with --table/--branch/--prefix)");
            }
        }
        ConsumersCommand::Describe { key, history } => {
            let response = admin
                .describe_consumer(pb::DescribeConsumerRequest {
                    consumer: Some(key.key()),
                    history_limit: history,
                })
                .await
                .map_err(call_error)?
                .into_inner();
            if json {
                return print_json(&response, "tidemark.v1.DescribeConsumerResponse");
            }
            let info = response.info.unwrap_or_default();
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
            let options: BTreeMap<_, _> = response.table_options.into_iter().collect();
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
        ConsumersCommand::Reset {
            key,
            next_snapshot,
            change,
        } => {
            let response = admin
                .reset_consumer(pb::ResetConsumerRequest {
                    consumer: Some(key.key()),
                    next_snapshot,
                    expected_next_snapshot: change.expected,
                    force: change.force,
                    execute: change.execute,
                })
                .await
                .map_err(call_error)?
                .into_inner();
            if json {
                return print_json(&response, "tidemark.v1.ResetConsumerResponse");
            }
            plan_banner(response.executed);
            let mut t = Table::new(vec!["CONSUMER", "OLD", "NEW", "REVOKED LEASE"]);
            t.row(change_row(&response.change.unwrap_or_default()));
            t.print();
        }
        ConsumersCommand::Delete { key, change } => {
            let response = admin
                .delete_consumer(pb::DeleteConsumerRequest {
                    consumer: Some(key.key()),
                    expected_next_snapshot: change.expected,
                    force: change.force,
                    execute: change.execute,
                })
                .await
                .map_err(call_error)?
                .into_inner();
            if json {
                return print_json(&response, "tidemark.v1.DeleteConsumerResponse");
            }
            plan_banner(response.executed);
            let mut t = Table::new(vec!["CONSUMER", "OLD", "NEW", "REVOKED LEASE"]);
            t.row(change_row(&response.change.unwrap_or_default()));
            t.print();
        }
        ConsumersCommand::Clear {
            table,
            branch,
            including,
            excluding,
            force,
            execute,
        } => {
            let response = admin
                .clear_consumers(pb::ClearConsumersRequest {
                    table,
                    branch,
                    including,
                    excluding,
                    force,
                    execute,
                })
                .await
                .map_err(call_error)?
                .into_inner();
            if json {
                return print_json(&response, "tidemark.v1.ClearConsumersResponse");
            }
            plan_banner(response.executed);
            let mut t = Table::new(vec!["CONSUMER", "OLD", "NEW", "REVOKED LEASE"]);
            for c in &response.cleared {
                t.row(change_row(c));
            }
            t.print();
            if !response.skipped.is_empty() {
                println!();
                let mut s = Table::new(vec!["SKIPPED", "REASON", "WHY"]);
                for k in &response.skipped {
                    s.row(vec![k.consumer_id.clone(), k.reason.clone(), k.message.clone()]);
                }
                s.print();
            }
        }
        ConsumersCommand::Revoke { key, reason, execute } => {
            let response = admin
                .revoke_lease(pb::RevokeLeaseRequest {
                    consumer: Some(key.key()),
                    reason,
                    execute,
                })
                .await
                .map_err(call_error)?
                .into_inner();
            if json {
                return print_json(&response, "tidemark.v1.RevokeLeaseResponse");
            }
            plan_banner(response.executed);
            match response.lease {
                Some(l) => println!(
                    "revoked lease of {} (epoch {}); the key's epoch is now {}",
                    l.holder, l.epoch, response.epoch
                ),
                None => println!("no live lease to revoke (epoch {})", response.epoch),
            }
        }
        ConsumersCommand::Expire {
            table,
            branch,
            limit,
            execute,
        } => {
            let response = admin
                .expire_consumers(pb::ExpireConsumersRequest {
                    table: table.unwrap_or_default(),
                    branch: branch.unwrap_or_default(),
                    limit,
                    execute,
                })
                .await
                .map_err(call_error)?
                .into_inner();
            if json {
                return print_json(&response, "tidemark.v1.ExpireConsumersResponse");
            }
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
    }
    Ok(())
}

/// Runs `tidemark options ...`.
pub async fn options(conn: &Connection, command: OptionsCommand) -> anyhow::Result<()> {
    let mut admin = conn.admin().await?;
    let json = conn.output == Output::Json;
    match command {
        OptionsCommand::Get { table } => {
            let response = admin
                .get_table_options(pb::GetTableOptionsRequest { table })
                .await
                .map_err(call_error)?
                .into_inner();
            if json {
                return print_json(&response, "tidemark.v1.GetTableOptionsResponse");
            }
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
            if json {
                return print_json(&response, "tidemark.v1.SetTableOptionsResponse");
            }
            plan_banner(response.executed);
            let mut t = Table::new(vec!["OPTION", "BEFORE", "AFTER"]);
            for key in tidemark_core::options::KNOWN_KEYS {
                t.row(vec![
                    key.to_owned(),
                    response.before.get(key).cloned().unwrap_or_else(|| "-".to_owned()),
                    response.after.get(key).cloned().unwrap_or_else(|| "-".to_owned()),
                ]);
            }
            t.print();
        }
    }
    Ok(())
}

fn holders_table(holders: &[pb::RetentionHolder]) -> Table {
    let mut t = Table::new(vec![
        "KIND",
        "CONSUMER",
        "SNAPSHOT",
        "LEASE",
        "IDLE",
        "EXPIRES IN",
        "LAG",
    ]);
    for h in holders {
        t.row(vec![
            match h.kind() {
                pb::HolderKind::FullScanPin => "full-scan pin".to_owned(),
                _ => "consumer".to_owned(),
            },
            h.consumer_id.clone(),
            h.snapshot.to_string(),
            if h.lease_holder.is_empty() {
                "-".to_owned()
            } else {
                format!("{} (epoch {})", h.lease_holder, h.lease_epoch)
            },
            duration(h.idle.as_ref()),
            duration(h.expires_in.as_ref()),
            opt(h.lag),
        ]);
    }
    t
}

/// Runs `tidemark fence ...`.
pub async fn fence(conn: &Connection, args: FenceArgs) -> anyhow::Result<()> {
    let mut retention = conn.retention().await?;
    let json = conn.output == Output::Json;
    if args.explain {
        let response = retention
            .explain_retention(pb::ExplainRetentionRequest {
                table: args.table,
                branch: args.branch,
                changelog_decoupled: args.changelog_decoupled,
                limit: args.limit,
            })
            .await
            .map_err(call_error)?
            .into_inner();
        if json {
            return print_json(&response, "tidemark.v1.ExplainRetentionResponse");
        }
        println!("snapshot fence  {}", opt(response.snapshot_fence));
        println!("changelog fence {}", opt(response.changelog_fence));
        if response.changelog_only {
            println!("consumer.changelog-only is in effect: consumers do not fence snapshots");
        }
        println!();
        holders_table(&response.holders).print();
        if response.truncated {
            println!("(more holders: raise --limit)");
        }
        return Ok(());
    }
    let response = retention
        .get_retention_fence(pb::GetRetentionFenceRequest {
            table: args.table,
            branch: args.branch,
            changelog_decoupled: args.changelog_decoupled,
        })
        .await
        .map_err(call_error)?
        .into_inner();
    if json {
        return print_json(&response, "tidemark.v1.GetRetentionFenceResponse");
    }
    let mut t = Table::new(vec!["FENCE", "POSITION", "SET BY"]);
    let set_by = |holders: &[pb::RetentionHolder]| -> String {
        if holders.is_empty() {
            return "-".to_owned();
        }
        holders
            .iter()
            .map(|h| h.consumer_id.clone())
            .collect::<Vec<_>>()
            .join(", ")
    };
    t.row(vec![
        "snapshot".into(),
        opt(response.snapshot_fence),
        set_by(&response.snapshot_fence_holders),
    ]);
    t.row(vec![
        "changelog".into(),
        opt(response.changelog_fence),
        set_by(&response.changelog_fence_holders),
    ]);
    t.print();
    Ok(())
}

/// Runs `tidemark history ...`.
pub async fn history(conn: &Connection, args: HistoryArgs) -> anyhow::Result<()> {
    let mut admin = conn.admin().await?;
    let mut request = match &args.consumer_id {
        Some(id) => pb::ListHistoryRequest {
            consumer: Some(pb::ConsumerKey {
                table: args.table.clone(),
                branch: args.branch.clone().unwrap_or_else(|| "main".to_owned()),
                consumer_id: id.clone(),
            }),
            page_size: args.page_size,
            ..Default::default()
        },
        None => pb::ListHistoryRequest {
            table: args.table.clone(),
            branch: args.branch.clone().unwrap_or_default(),
            page_size: args.page_size,
            ..Default::default()
        },
    };
    let mut entries = Vec::new();
    let mut next_page_token;
    loop {
        let page = admin
            .list_history(request.clone())
            .await
            .map_err(call_error)?
            .into_inner();
        entries.extend(page.entries);
        next_page_token = page.next_page_token;
        if !args.all || next_page_token.is_empty() {
            break;
        }
        request.page_token = next_page_token.clone();
    }
    let response = pb::ListHistoryResponse {
        entries,
        next_page_token,
    };
    if conn.output == Output::Json {
        return print_json(&response, "tidemark.v1.ListHistoryResponse");
    }
    history_table(&response.entries).print();
    if !response.next_page_token.is_empty() {
        println!("(more: --all)");
    }
    Ok(())
}

pub async fn tables(conn: &Connection, command: TablesCommand) -> anyhow::Result<()> {
    let mut admin = conn.admin().await?;
    let json = conn.output == Output::Json;
    match command {
        TablesCommand::List => {
            let response = admin
                .list_tables(pb::ListTablesRequest {})
                .await
                .map_err(call_error)?
                .into_inner();
            if json {
                return print_json(&response, "tidemark.v1.ListTablesResponse");
            }
            let mut t = Table::new(vec!["TABLE", "LOCATION", "REGISTERED BY"]);
            for table in response.tables {
                t.row(vec![table.table, table.location, table.registered_by]);
            }
            t.print();
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
            if json {
                return print_json(&response, "tidemark.v1.RegisterTableResponse");
            }
            plan_banner(response.executed);
            let registered = response.table.unwrap_or_default();
            println!("{} -> {}", registered.table, registered.location);
            if !response.previous_location.is_empty() {
                println!("moved from {}", response.previous_location);
            }
            match (response.earliest_snapshot, response.latest_snapshot) {
                (Some(earliest), Some(latest)) => println!("snapshots {earliest}..={latest}"),
                _ if response.probe_error.is_empty() => println!("no snapshot yet"),
                _ => println!("cannot read the table now: {}", response.probe_error),
            }
        }
        TablesCommand::Unregister { table, execute } => {
            let response = admin
                .unregister_table(pb::UnregisterTableRequest { table, execute })
                .await
                .map_err(call_error)?
                .into_inner();
            if json {
                return print_json(&response, "tidemark.v1.UnregisterTableResponse");
            }
            plan_banner(response.executed);
            println!(
                "{}",
                if response.was_registered {
                    "unregistered"
                } else {
                    "was not registered"
                }
            );
        }
        TablesCommand::Import { table, execute } => {
            let response = admin
                .import_consumers(pb::ImportConsumersRequest { table, execute })
                .await
                .map_err(call_error)?
                .into_inner();
            if json {
                return print_json(&response, "tidemark.v1.ImportConsumersResponse");
            }
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
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn civil_dates() {
        assert_eq!(civil_from_days(0), (1970, 1, 1));
        assert_eq!(civil_from_days(20_454), (2026, 1, 1));
        assert_eq!(civil_from_days(-1), (1969, 12, 31));
        assert_eq!(
            timestamp(Some(&prost_types::Timestamp {
                seconds: 1_795_000_000,
                nanos: 0
            })),
            "2026-11-18T11:06:40Z"
        );
    }

    #[test]
    fn key_value_pairs() {
        assert_eq!(
            parse_pair("consumer.expiration-time=1 d"),
            Ok(("consumer.expiration-time".into(), "1 d".into()))
        );
        assert!(parse_pair("nope").is_err());
    }
}
