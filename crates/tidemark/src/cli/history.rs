//! `tidemark history ...`: the history of a consumer or a table.

// Printing to stdout is what these commands are for.
#![allow(clippy::print_stdout)]

use clap::Args;
use tidemark_proto::v1 as pb;

use super::render::{history_table, show};
use super::{Connection, call_error};

/// `tidemark history ...`
#[derive(Debug, Args)]
pub(crate) struct HistoryArgs {
    /// Table identifier "database.table".
    #[arg(value_parser = crate::cli::table_arg)]
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

/// Runs `tidemark history ...`.
pub(crate) async fn history(conn: &Connection, args: HistoryArgs) -> anyhow::Result<()> {
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
    let (mut table_known, mut did_you_mean);
    loop {
        let page = admin
            .list_history(request.clone())
            .await
            .map_err(call_error)?
            .into_inner();
        entries.extend(page.entries);
        next_page_token = page.next_page_token;
        (table_known, did_you_mean) = (page.table_known, page.did_you_mean);
        if !args.all || next_page_token.is_empty() {
            break;
        }
        request.page_token = next_page_token.clone();
    }
    let response = pb::ListHistoryResponse {
        entries,
        next_page_token,
        table_known,
        did_you_mean,
    };
    show(conn.output, &response, "tidemark.v1.ListHistoryResponse", |response| {
        history_table(&response.entries).print();
        if !response.next_page_token.is_empty() {
            println!("(more: --all)");
        }
    })?;
    let asked = match (&response.table_known, &args.consumer_id) {
        (Some(true), Some(id)) => format!("{id} of {}", args.table),
        _ => args.table.clone(),
    };
    super::check_known(&asked, response.table_known, &response.did_you_mean)
}
