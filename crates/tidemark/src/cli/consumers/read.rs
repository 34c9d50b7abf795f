//! `consumers list`, `lag` and `describe`: reading consumers.

use std::collections::BTreeMap;

use tidemark_client::{AdminClient, AuthChannel};
use tidemark_proto::v1 as pb;

use crate::cli::render::{Table, duration, history_table, opt, show, timestamp};
use crate::cli::{Output, call_error};

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
        lease_state(lease),
    ]
}

/// What the key's latest lease's query is doing ("-" when never leased).
pub(super) fn lease_state(lease: Option<&pb::LeaseInfo>) -> String {
    lease
        .map(|l| l.activity.clone())
        .filter(|a| !a.is_empty())
        .unwrap_or_else(|| "-".to_owned())
}

/// The consumers of the first page, or of every page (`all`), and the last
/// page's answer (its token, and whether the table filter names a table
/// tidemark knows).
async fn pages(
    admin: &mut AdminClient<AuthChannel>,
    mut request: pb::ListConsumersRequest,
    all: bool,
) -> anyhow::Result<pb::ListConsumersResponse> {
    let mut consumers = Vec::new();
    loop {
        let page = admin
            .list_consumers(request.clone())
            .await
            .map_err(call_error)?
            .into_inner();
        consumers.extend(page.consumers);
        if !all || page.next_page_token.is_empty() {
            return Ok(pb::ListConsumersResponse { consumers, ..page });
        }
        request.page_token = page.next_page_token;
    }
}

/// A listing filtered by a table tidemark has never seen is an error
/// naming the table most likely meant.
fn check_listed_table(request: &pb::ListConsumersRequest, response: &pb::ListConsumersResponse) -> anyhow::Result<()> {
    crate::cli::check_known(&request.table, response.table_known, &response.did_you_mean)
}

/// Every consumer the request selects, most lagging first (in time where
/// known, then in snapshots), at most `top`.
async fn worst_first(
    admin: &mut AdminClient<AuthChannel>,
    request: pb::ListConsumersRequest,
    top: usize,
) -> anyhow::Result<pb::ListConsumersResponse> {
    let listed = pages(admin, request, true).await?;
    let mut consumers = listed.consumers;
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
        ..listed
    })
}

fn print_lag(response: &pb::ListConsumersResponse) {
    let mut t = Table::new(vec![
        "TABLE",
        "BRANCH",
        "CONSUMER",
        "NEXT",
        "LATEST",
        "LAG",
        "LAG TIME",
        "IDLE",
        "LEASE",
        "LEASE STATE",
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
            lease_state(c.lease.as_ref()),
        ]);
    }
    t.print();
}

/// Lists consumers: the first page, or with `all` every page.
pub(super) async fn list(
    admin: &mut AdminClient<AuthChannel>,
    output: Output,
    request: pb::ListConsumersRequest,
    all: bool,
) -> anyhow::Result<()> {
    let response = pages(admin, request.clone(), all).await?;
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
            "LEASE STATE",
        ]);
        for c in &r.consumers {
            t.row(consumer_row(c));
        }
        t.print();
        if !r.next_page_token.is_empty() {
            println!("(more: --all, or narrow with --table/--branch/--prefix)");
        }
    })?;
    check_listed_table(&request, &response)
}

fn or_dash(text: &str) -> &str {
    if text.is_empty() { "-" } else { text }
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
        Some(l) => {
            println!(
                "lease         {} holder {} epoch {} (remaining {}){}",
                l.state,
                l.holder,
                l.epoch,
                duration(l.remaining.as_ref()),
                l.full_scan_pin
                    .map(|p| format!(", pins snapshot {p}"))
                    .unwrap_or_default()
            );
            println!("lease state   {}", lease_state(Some(l)));
            println!(
                "lease caller  {} ({})",
                or_dash(&l.peer),
                if l.client.is_empty() {
                    "no client name"
                } else {
                    &l.client
                }
            );
            println!(
                "renewed       {}, last commit {}",
                timestamp(l.last_renewed_at.as_ref()),
                timestamp(l.last_commit_at.as_ref())
            );
        }
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

/// `consumers lag`: the most lagging consumers, once or every `watch`.
pub(super) async fn lag(
    admin: &mut AdminClient<AuthChannel>,
    output: Output,
    request: pb::ListConsumersRequest,
    top: usize,
    watch: Option<crate::flags::HumanDuration>,
) -> anyhow::Result<()> {
    loop {
        let response = worst_first(admin, request.clone(), top).await?;
        if watch.is_some() && output == Output::Table {
            // Clear the screen and go home, as `watch` does.
            print!("\x1b[2J\x1b[H");
        }
        show(output, &response, "tidemark.v1.ListConsumersResponse", print_lag)?;
        check_listed_table(&request, &response)?;
        match &watch {
            Some(every) => tokio::time::sleep(every.0).await,
            None => return Ok(()),
        }
    }
}

/// `consumers describe`: one consumer, its lease and its recent history.
pub(super) async fn describe(
    admin: &mut AdminClient<AuthChannel>,
    output: Output,
    request: pb::DescribeConsumerRequest,
) -> anyhow::Result<()> {
    let response = admin.describe_consumer(request).await.map_err(call_error)?.into_inner();
    show(
        output,
        &response,
        "tidemark.v1.DescribeConsumerResponse",
        print_described,
    )
}
