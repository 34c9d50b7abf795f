//! One parser per request type: a request as its handler uses it, every
//! field checked (INVALID_ARGUMENT naming each bad one) before anything is
//! read or changed, and what it touches, so the call's prologue checks the
//! caller's scope before any work. The worker protocol's parsers are here;
//! each operator call's parser sits in its own file under `admin/`, beside
//! its handler.

pub(crate) mod fields;
mod worker;

use tidemark_core::TableName;
use tidemark_core::validate::Violations;
use tidemark_service::store::StoreError;

/// What a request touches, for the scope check before any work.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Touches<'a> {
    /// One table.
    Table(&'a TableName),
    /// One table, or every table (doing what, for the refusal) when `None`.
    TableOrAll(Option<&'a TableName>, &'static str),
    /// A lease: the store checks the lease's own key and owner.
    Lease,
    /// Only what the caller's scope allows (the handler filters).
    Filtered,
}

/// A request type and its parsed form.
pub(crate) trait Parse {
    type Parsed;

    /// The parsed request, or INVALID_ARGUMENT naming every bad field.
    fn parse(self) -> Result<Self::Parsed, StoreError>;
}

/// What a parsed request touches.
pub(crate) trait Scoped {
    fn touches(&self) -> Touches<'_>;
}

/// The violations collected while parsing a request, as its error.
pub(crate) fn invalid(v: Violations) -> StoreError {
    StoreError::Rule(tidemark_core::CoreError::InvalidArgument(v.into_vec()))
}

/// `Ok(value)` when nothing was violated.
pub(crate) fn checked<T>(v: Violations, value: Option<T>) -> Result<T, StoreError> {
    match value {
        Some(value) if v.is_empty() => Ok(value),
        _ => Err(invalid(v)),
    }
}
