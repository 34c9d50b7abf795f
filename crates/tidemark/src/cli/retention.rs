//! `tidemark fence ...`: a branch's retention fences and what holds them.

// Printing to stdout is what these commands are for.
#![allow(clippy::print_stdout)]

use clap::Args;
use tidemark_proto::v1 as pb;

use super::render::{Table, duration, opt, show};
use super::{Connection, call_error, check_known};

/// `tidemark fence ...`
#[derive(Debug, Args)]
pub(crate) struct FenceArgs {
    /// Table identifier "database.table".
    #[arg(value_parser = crate::cli::table_arg)]
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

fn holders_table(holders: &[pb::RetentionHolder]) -> Table {
    let mut t = Table::new(vec![
        "KIND",
        "CONSUMER",
        "SNAPSHOT",
        "LEASE",
        "IDLE",
        "EXPIRES IN",
        "LAG",
        "LEASE STATE",
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
            if h.lease_activity.is_empty() {
                "-".to_owned()
            } else {
                h.lease_activity.clone()
            },
        ]);
    }
    t
}

/// Runs `tidemark fence ...`.
pub(crate) async fn fence(conn: &Connection, args: FenceArgs) -> anyhow::Result<()> {
    let mut retention = conn.retention().await?;
    let output = conn.output;
    let table = args.table.clone();
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
        let (known, did_you_mean) = (response.known, response.did_you_mean.clone());
        show(output, &response, "tidemark.v1.ExplainRetentionResponse", |response| {
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
        })?;
        return check_known(&table, known, &did_you_mean);
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
    let (known, did_you_mean) = (response.known, response.did_you_mean.clone());
    show(output, &response, "tidemark.v1.GetRetentionFenceResponse", |response| {
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
    })?;
    check_known(&table, known, &did_you_mean)
}
