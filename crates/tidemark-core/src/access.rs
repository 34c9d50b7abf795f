//! Who may touch what: a caller's table scope and the leases it may use,
//! and the one error that refuses them (PERMISSION_DENIED with the reason).

use uuid::Uuid;

use crate::ids::TableName;
use crate::scope::TableScope;
use crate::state::LeaseRecord;

/// Why a caller was refused; nothing was read or changed on its behalf.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Denied {
    /// The table is outside the caller's scope.
    #[error("{principal} may not access table {table} (its tables: {scope})")]
    TableNotInScope {
        /// Who asked.
        principal: String,
        /// The table.
        table: String,
        /// The caller's tables.
        scope: String,
    },
    /// A call spanning every table from a caller scoped to some.
    #[error("{principal} is limited to tables {scope}: name a table to {what}")]
    EveryTable {
        /// Who asked.
        principal: String,
        /// The caller's tables.
        scope: String,
        /// What the call would do.
        what: String,
    },
    /// A table registration pointing outside the server's allowed locations
    /// (the server writes consumer files wherever a registration points).
    #[error("{principal} may not register a table at {location}: the server allows only locations under {allowed}")]
    LocationNotAllowed {
        /// Who asked.
        principal: String,
        /// The location asked for.
        location: String,
        /// The allowed prefixes.
        allowed: String,
    },
    /// A worker using a lease another principal acquired.
    #[error("lease {lease_id} was acquired by {owner}, not {principal}; a worker may only use its own leases")]
    LeaseNotOwned {
        /// The lease.
        lease_id: Uuid,
        /// Who acquired it.
        owner: String,
        /// Who asked.
        principal: String,
    },
}

impl Denied {
    /// The `google.rpc.ErrorInfo` reason.
    pub fn reason(&self) -> &'static str {
        match self {
            Denied::TableNotInScope { .. } | Denied::EveryTable { .. } => "TABLE_NOT_IN_SCOPE",
            Denied::LeaseNotOwned { .. } => "LEASE_NOT_OWNED",
            Denied::LocationNotAllowed { .. } => "LOCATION_NOT_ALLOWED",
        }
    }
}

/// A caller's rights.
#[derive(Debug, Clone, Copy)]
pub struct Access<'a> {
    /// The authenticated principal.
    pub principal: &'a str,
    /// The tables it may touch.
    pub scope: &'a TableScope,
    /// Whether it may use leases other principals acquired (operators);
    /// workers may only renew, commit or release their own.
    pub any_lease: bool,
}

impl Access<'_> {
    /// Refuses a table outside the scope.
    pub fn table(&self, table: &TableName) -> Result<(), Denied> {
        if self.scope.allows(table) {
            return Ok(());
        }
        Err(Denied::TableNotInScope {
            principal: self.principal.to_owned(),
            table: table.as_str().to_owned(),
            scope: self.scope.to_string(),
        })
    }

    /// Refuses a call spanning every table (`what` it would do) to a
    /// caller scoped to some.
    pub fn every_table(&self, what: &str) -> Result<(), Denied> {
        if self.scope.is_all() {
            return Ok(());
        }
        Err(Denied::EveryTable {
            principal: self.principal.to_owned(),
            scope: self.scope.to_string(),
            what: what.to_owned(),
        })
    }

    /// Refuses the use of `lease` when another principal acquired it and
    /// the caller may not use others' leases.
    pub fn lease(&self, lease: &LeaseRecord) -> Result<(), Denied> {
        if self.any_lease || lease.principal == self.principal {
            return Ok(());
        }
        Err(Denied::LeaseNotOwned {
            lease_id: lease.lease_id,
            owner: lease.principal.clone(),
            principal: self.principal.to_owned(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scope::TablePattern;

    #[test]
    fn scopes_and_leases_are_refused_with_their_reasons() {
        let scope = TableScope::Only(vec![TablePattern::parse("db.*").unwrap()]);
        let worker = Access {
            principal: "w",
            scope: &scope,
            any_lease: false,
        };
        let inside = TableName::parse("db.a", "table").unwrap();
        let outside = TableName::parse("other.a", "table").unwrap();
        assert!(worker.table(&inside).is_ok());
        let denied = worker.table(&outside).unwrap_err();
        assert_eq!(denied.reason(), "TABLE_NOT_IN_SCOPE");
        assert!(denied.to_string().contains("other.a"), "{denied}");
        assert_eq!(worker.every_table("list").unwrap_err().reason(), "TABLE_NOT_IN_SCOPE");
        let all = TableScope::All;
        let operator = Access {
            principal: "op",
            scope: &all,
            any_lease: true,
        };
        assert!(operator.every_table("list").is_ok());
    }

    #[test]
    fn a_worker_uses_only_its_own_leases_and_an_operator_any() {
        let all = TableScope::All;
        let lease = |principal: &str| LeaseRecord {
            lease_id: Uuid::from_u128(7),
            holder: "query".to_owned(),
            principal: principal.to_owned(),
            epoch: 1,
            ttl: std::time::Duration::from_secs(30),
            acquired_at: crate::Timestamp::from_micros(0),
            deadline: crate::Timestamp::from_micros(30_000_000),
            status: crate::state::LeaseStatus::Active,
            last_batch: None,
            wrote_consumer: false,
            legacy_warned_snapshot: None,
            full_scan_pin: None,
            caller: crate::Caller::UNKNOWN,
            committed_at: None,
        };
        let worker = Access {
            principal: "w",
            scope: &all,
            any_lease: false,
        };
        assert!(worker.lease(&lease("w")).is_ok());
        let denied = worker.lease(&lease("other")).unwrap_err();
        assert_eq!(denied.reason(), "LEASE_NOT_OWNED");
        assert!(denied.to_string().contains("other"), "{denied}");
        let operator = Access {
            principal: "op",
            scope: &all,
            any_lease: true,
        };
        assert!(operator.lease(&lease("w")).is_ok());
    }
}
