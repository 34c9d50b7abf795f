//! `consumers reset`, `delete`, `clear`, `revoke`, `revoke-leases` and
//! `expire`: changes, each a plan unless `--execute`.

use tidemark_client::{AdminClient, AuthChannel};
use tidemark_proto::v1 as pb;

use super::{BulkTarget, ChangeArgs};
use crate::cli::render::{Table, duration, opt, plan_banner, show};
use crate::cli::{Output, call_error};

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

/// The plan banner and the consumers a change touched.
pub(super) fn print_changes(executed: bool, changes: &[pb::ConsumerChange]) {
    plan_banner(executed);
    let mut t = Table::new(vec!["CONSUMER", "OLD", "NEW", "REVOKED LEASE"]);
    for c in changes {
        t.row(change_row(c));
    }
    t.print();
}

fn print_cleared(response: &pb::ClearConsumersResponse) {
    print_changes(response.executed == Some(true), &response.cleared);
    print_skipped(&response.skipped);
}

fn print_skipped(skipped: &[pb::SkippedConsumer]) {
    if !skipped.is_empty() {
        println!();
        let position = |p: Option<i64>| p.map_or_else(|| "-".to_owned(), |p| p.to_string());
        let mut s = Table::new(vec!["SKIPPED", "OLD", "WOULD BE", "REASON", "WHY"]);
        for k in skipped {
            s.row(vec![
                k.consumer_id.clone(),
                position(k.old_next_snapshot),
                position(k.new_next_snapshot),
                k.reason.clone(),
                k.message.clone(),
            ]);
        }
        s.print();
    }
}

/// A bulk change that left a selected consumer alone exits 4, as the
/// single form refused by the same precondition does (issue 55: a bulk
/// reset that changed nothing because of LEASE_HELD exited 0).
fn check_skipped(skipped: &[pb::SkippedConsumer]) -> anyhow::Result<()> {
    if skipped.is_empty() {
        return Ok(());
    }
    let reasons: std::collections::BTreeSet<&str> = skipped.iter().map(|k| k.reason.as_str()).collect();
    Err(crate::cli::Skipped(format!(
        "{} selected consumer(s) left alone ({}): see SKIPPED above",
        skipped.len(),
        reasons.into_iter().collect::<Vec<_>>().join(", ")
    ))
    .into())
}

fn print_expired(response: &pb::ExpireConsumersResponse) {
    plan_banner(response.executed == Some(true));
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

/// The one-consumer form of `consumers reset`.
pub(super) struct Single {
    /// The consumer (with a target: this consumer only).
    pub(super) consumer_id: Option<String>,
    /// The new next snapshot.
    pub(super) next_snapshot: Option<i64>,
    /// Whether executing may create the consumer.
    pub(super) create: bool,
    /// Write the plan to this CSV file (never executes).
    pub(super) export: Option<std::path::PathBuf>,
}

/// The lease a planned change would revoke, as `expected_lease_id(s)`
/// names it ("": none live).
fn planned_lease(change: Option<&pb::ConsumerChange>) -> String {
    change
        .and_then(|c| c.revoked_lease.as_ref())
        .map(|l| l.lease_id.clone())
        .unwrap_or_default()
}

/// What a reset that creates a consumer says (the plan and the refusal).
fn creation_note(request: &pb::ResetConsumerRequest, response: &pb::ResetConsumerResponse) -> String {
    let key = request.consumer.clone().unwrap_or_default();
    let mut note = format!(
        "this reset creates consumer {} of {}@{}, which has none",
        key.consumer_id, key.table, key.branch
    );
    if !response.did_you_mean.is_empty() {
        note.push_str(&format!("; did you mean {}?", response.did_you_mean));
    }
    note
}

/// `consumers reset`: one consumer to a position, or a bulk reset planned
/// first and applied exactly as planned (`key`: the table and branch).
pub(super) async fn reset(
    admin: &mut AdminClient<AuthChannel>,
    output: Output,
    key: pb::ConsumerKey,
    single: Single,
    bulk: &BulkTarget,
    change: &ChangeArgs,
) -> anyhow::Result<()> {
    let target = bulk.target()?;
    let Single {
        consumer_id,
        next_snapshot,
        create,
        export,
    } = single;
    match (next_snapshot, target) {
        (Some(next_snapshot), None) if bulk.including.is_none() && bulk.excluding.is_none() => {
            let consumer_id = consumer_id.expect("clap: the id comes before the position");
            let mut request = pb::ResetConsumerRequest {
                consumer: Some(pb::ConsumerKey { consumer_id, ..key }),
                next_snapshot,
                expected_next_snapshot: change.expected,
                force: change.force,
                execute: false,
                expected_lease_id: None,
                reason: change.reason.clone(),
            };
            let plan = admin
                .reset_consumer(request.clone())
                .await
                .map_err(call_error)?
                .into_inner();
            let response = if change.execute && (create || !plan.creates) {
                // Execute exactly the plan: a consumer that moved (or
                // appeared, or went) since is refused, not overwritten.
                request.execute = true;
                if request.expected_next_snapshot.is_none() {
                    request.expected_next_snapshot = plan.change.as_ref().and_then(|c| c.old_next_snapshot);
                }
                if request.force {
                    // Force only the lease the plan showed ("": none).
                    request.expected_lease_id = Some(planned_lease(plan.change.as_ref()));
                }
                admin
                    .reset_consumer(request.clone())
                    .await
                    .map_err(call_error)?
                    .into_inner()
            } else {
                plan
            };
            show(output, &response, "tidemark.v1.ResetConsumerResponse", |r| {
                print_changes(r.executed == Some(true), &[r.change.clone().unwrap_or_default()]);
                if r.creates {
                    println!("{}", creation_note(&request, r));
                }
                for warning in &r.warnings {
                    println!("{warning}");
                }
            })?;
            if response.creates && change.execute && !create {
                return Err(crate::cli::UsageError(format!(
                    "not executed: {} — add --create to create it",
                    creation_note(&request, &response)
                ))
                .into());
            }
            Ok(())
        }
        (None, Some(target)) => {
            if change.expected.is_some() {
                return Err(crate::cli::UsageError(
                    "--expected is for one consumer; a bulk reset takes its preconditions from its plan".into(),
                )
                .into());
            }
            // One consumer named: exactly that id.
            let including = match (&consumer_id, &bulk.including) {
                (Some(_), Some(_)) => {
                    return Err(crate::cli::UsageError("give a consumer id or --including, not both".into()).into());
                }
                (Some(id), None) => regex::escape(id),
                (None, including) => including.clone().unwrap_or_default(),
            };
            let mut request = pb::ResetConsumersRequest {
                table: key.table,
                branch: key.branch,
                including,
                excluding: bulk.excluding.clone().unwrap_or_default(),
                target: Some(pb::ResetTarget { target: Some(target) }),
                force: change.force,
                execute: false,
                expected_next_snapshots: Default::default(),
                expected_lease_ids: Default::default(),
            };
            let mut response = admin
                .reset_consumers(request.clone())
                .await
                .map_err(call_error)?
                .into_inner();
            if let Some(path) = &export {
                return super::plan_file::write(
                    path,
                    &super::plan_file::rows_of(&request.table, &request.branch, &response),
                );
            }
            if change.execute {
                // Apply exactly the plan: each consumer only if it is
                // still where the plan saw it.
                request.execute = true;
                request.expected_next_snapshots = response
                    .reset
                    .iter()
                    .filter_map(|c| Some((c.consumer.as_ref()?.consumer_id.clone(), c.old_next_snapshot?)))
                    .collect();
                if request.force {
                    request.expected_lease_ids = response
                        .reset
                        .iter()
                        .filter_map(|c| Some((c.consumer.as_ref()?.consumer_id.clone(), planned_lease(Some(c)))))
                        .collect();
                }
                if request.expected_next_snapshots.is_empty() {
                    response.executed = Some(true);
                } else {
                    response = admin.reset_consumers(request).await.map_err(call_error)?.into_inner();
                }
            }
            show(output, &response, "tidemark.v1.ResetConsumersResponse", |r| {
                print_changes(r.executed == Some(true), &r.reset);
                print_skipped(&r.skipped);
                for warning in &r.warnings {
                    println!("{warning}");
                }
            })?;
            check_skipped(&response.skipped)
        }
        _ => Err(crate::cli::UsageError(
            "give either <consumer_id> <next_snapshot> (one consumer), or one target: --to-snapshot, \
             --to-earliest, --to-latest, --to-datetime or --shift-by (with --including/--excluding or a \
             consumer id)"
                .into(),
        )
        .into()),
    }
}

/// What `consumers revoke-leases` revoked.
fn print_revoked_leases(r: &pb::RevokeLeasesResponse) {
    plan_banner(r.executed == Some(true));
    let mut t = Table::new(vec![
        "TABLE",
        "BRANCH",
        "CONSUMER",
        "HOLDER",
        "LEASE EPOCH",
        if r.executed == Some(true) {
            "KEY EPOCH NOW"
        } else {
            "KEY EPOCH AFTER"
        },
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
}

/// What `consumers revoke` revoked.
fn print_revoked(r: &pb::RevokeLeaseResponse) {
    plan_banner(r.executed == Some(true));
    // A plan speaks of what would happen (issue 34: it said "revoked").
    match (&r.lease, r.executed == Some(true)) {
        (Some(l), true) => println!(
            "revoked the lease of {} (epoch {}); the key's epoch is now {}",
            l.holder, l.epoch, r.epoch
        ),
        (Some(l), false) => println!(
            "would revoke the lease of {} (epoch {}); the key's epoch would become {}",
            l.holder, l.epoch, r.epoch
        ),
        (None, _) => println!("no live lease to revoke (the key's epoch is {})", r.epoch),
    }
}

/// `consumers delete`: one consumer (a plan unless `execute`).
pub(super) async fn delete(
    admin: &mut AdminClient<AuthChannel>,
    output: Output,
    request: pb::DeleteConsumerRequest,
) -> anyhow::Result<()> {
    let response = admin.delete_consumer(request).await.map_err(call_error)?.into_inner();
    show(output, &response, "tidemark.v1.DeleteConsumerResponse", |r| {
        print_changes(r.executed == Some(true), &[r.change.clone().unwrap_or_default()]);
    })
}

/// `consumers clear`: the consumers of a branch a pattern selects.
pub(super) async fn clear(
    admin: &mut AdminClient<AuthChannel>,
    output: Output,
    request: pb::ClearConsumersRequest,
) -> anyhow::Result<()> {
    let response = admin.clear_consumers(request).await.map_err(call_error)?.into_inner();
    show(output, &response, "tidemark.v1.ClearConsumersResponse", print_cleared)?;
    check_skipped(&response.skipped)
}

/// `consumers revoke-leases`: every live lease a pattern selects.
pub(super) async fn revoke_leases(
    admin: &mut AdminClient<AuthChannel>,
    output: Output,
    request: pb::RevokeLeasesRequest,
) -> anyhow::Result<()> {
    let response = admin.revoke_leases(request).await.map_err(call_error)?.into_inner();
    show(
        output,
        &response,
        "tidemark.v1.RevokeLeasesResponse",
        print_revoked_leases,
    )
}

/// `consumers revoke`: one consumer's live lease.
pub(super) async fn revoke(
    admin: &mut AdminClient<AuthChannel>,
    output: Output,
    request: pb::RevokeLeaseRequest,
) -> anyhow::Result<()> {
    let key = request.consumer.clone().unwrap_or_default();
    let response = admin.revoke_lease(request).await.map_err(call_error)?.into_inner();
    show(output, &response, "tidemark.v1.RevokeLeaseResponse", print_revoked)?;
    if response.key_known == Some(false) {
        let mut said = format!(
            "tidemark has no consumer {} of {}@{}",
            key.consumer_id, key.table, key.branch
        );
        if !response.did_you_mean.is_empty() {
            said.push_str(&format!("; did you mean {}?", response.did_you_mean));
        }
        return Err(crate::cli::UnknownName(said).into());
    }
    Ok(())
}

/// `consumers expire`: the consumers idle past their expiration.
pub(super) async fn expire(
    admin: &mut AdminClient<AuthChannel>,
    output: Output,
    request: pb::ExpireConsumersRequest,
) -> anyhow::Result<()> {
    let response = admin.expire_consumers(request).await.map_err(call_error)?.into_inner();
    show(output, &response, "tidemark.v1.ExpireConsumersResponse", print_expired)
}
