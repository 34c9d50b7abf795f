//! `tidemark fence ...`: a branch's retention fences and what holds them.

// Printing to stdout is what these commands are for.
#![allow(clippy::print_stdout)]

use clap::Args;
use tidemark_proto::v1 as pb;

use super::render::{Table, duration, opt, show};
use super::{Connection, call_error};

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
        if response.snapshot_fence.is_none() && response.changelog_fence.is_none() && response.holders.is_empty() {
            note_unknown_table(conn, &table).await;
        }
        return show(output, &response, "tidemark.v1.ExplainRetentionResponse", |response| {
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
        });
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
    if response.snapshot_fence.is_none() && response.changelog_fence.is_none() {
        note_unknown_table(conn, &table).await;
    }
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
    })
}

/// A table without a fence may be a typo: the server answers "no fence"
/// for any name (expiration jobs ask for every table), so the CLI says
/// plainly, on stderr, when tidemark has no consumer of the table at all,
/// and names a known table spelled nearly the same (issue 34). Best effort:
/// a credential that may not list consumers or tables gets no note.
async fn note_unknown_table(conn: &Connection, table: &str) {
    let Ok(mut admin) = conn.admin().await else { return };
    let consumers_of = |name: &str| pb::ListConsumersRequest {
        table: name.to_owned(),
        page_size: 1,
        ..Default::default()
    };
    let Ok(listed) = admin.list_consumers(consumers_of(table)).await else {
        return;
    };
    if !listed.into_inner().consumers.is_empty() {
        return;
    }
    // Known names: the tables of the first page of every consumer, the
    // registered tables, and the name lower-cased and trimmed (Hive-backed
    // catalogs fold identifiers, so two spellings usually mean one table).
    let mut with_consumers = std::collections::BTreeSet::new();
    if let Ok(page) = admin
        .list_consumers(pb::ListConsumersRequest {
            page_size: 1000,
            ..Default::default()
        })
        .await
    {
        with_consumers.extend(
            page.into_inner()
                .consumers
                .into_iter()
                .filter_map(|c| Some(c.key?.table)),
        );
    }
    let mut candidates: Vec<String> = with_consumers.iter().cloned().collect();
    candidates.push(table.trim().to_lowercase());
    if let Ok(tables) = admin.list_tables(pb::ListTablesRequest {}).await {
        candidates.extend(tables.into_inner().tables.into_iter().map(|t| t.table));
    }
    candidates.retain(|c| c != table && spelling_distance(c, table) <= 2);
    candidates.sort_by_key(|c| spelling_distance(c, table));
    candidates.dedup();
    let mut closest = None;
    for candidate in candidates {
        let known = with_consumers.contains(&candidate)
            || admin
                .list_consumers(consumers_of(&candidate))
                .await
                .is_ok_and(|found| !found.into_inner().consumers.is_empty());
        if known {
            closest = Some(candidate);
            break;
        }
    }
    match closest {
        Some(name) => eprintln!("note: tidemark has no consumer of {table}; did you mean {name}?"),
        None => eprintln!("note: tidemark has no consumer of {table} (check the name: `tidemark consumers list`)"),
    }
}

/// How far apart two names are: edits (insert, delete, replace) ignoring
/// case, so `DB.Orders` and `db.orders` are 0 apart and `db.ordrs` 1.
fn spelling_distance(a: &str, b: &str) -> usize {
    let a: Vec<char> = a.trim().to_lowercase().chars().collect();
    let b: Vec<char> = b.trim().to_lowercase().chars().collect();
    let mut previous: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.iter().enumerate() {
        let mut current = vec![i + 1; b.len() + 1];
        for (j, cb) in b.iter().enumerate() {
            let replace = previous[j] + usize::from(ca != cb);
            current[j + 1] = replace.min(previous[j + 1] + 1).min(current[j] + 1);
        }
        previous = current;
    }
    previous[b.len()]
}

#[cfg(test)]
mod tests {
    use super::spelling_distance;

    #[test]
    fn spelling_distance_ignores_case_and_counts_edits() {
        assert_eq!(spelling_distance("DB.Orders", "db.orders"), 0);
        assert_eq!(spelling_distance(" db.orders ", "db.orders"), 0);
        assert_eq!(spelling_distance("db.ordrs", "db.orders"), 1);
        assert_eq!(spelling_distance("db.ord ers", "db.orders"), 1);
        assert_eq!(spelling_distance("db.nope", "db.orders"), 5);
    }
}
