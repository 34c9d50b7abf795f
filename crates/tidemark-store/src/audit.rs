//! The audit log: every executed operator change as one structured log
//! event under the target [`AUDIT_TARGET`] (principal, request id, the key,
//! what changed from what to what), beside the history table. The binary
//! can write these events alone to a file as JSON lines (`--audit-log`), to
//! ship to a SIEM.

use tidemark_core::{ConsumerKey, HistoryEvent};

use crate::CallContext;

/// The `tracing` target of audit events.
pub const AUDIT_TARGET: &str = "tidemark::audit";

/// An executed change to a consumer key (reset, delete, revoke, ...).
pub(crate) fn consumer_change(ctx: &CallContext, key: &ConsumerKey, event: &HistoryEvent) {
    tracing::info!(
        target: AUDIT_TARGET,
        principal = %ctx.principal,
        request_id = %ctx.request_id,
        table = key.table.as_str(),
        branch = key.branch.as_str(),
        consumer_id = key.consumer_id.as_str(),
        event = event.kind.as_str(),
        old_next = event.old_next,
        new_next = event.new_next,
        epoch = event.epoch,
        holder = event.holder.as_deref(),
        detail = event.detail.as_deref(),
        "operator change"
    );
}

/// An executed change to a table (its options, its registration): `what`
/// names it, `before` and `after` show it.
pub fn table_change(ctx: &CallContext, table: &str, what: &str, before: &str, after: &str) {
    tracing::info!(
        target: AUDIT_TARGET,
        principal = %ctx.principal,
        request_id = %ctx.request_id,
        table,
        event = what,
        before,
        after,
        "operator change"
    );
}
