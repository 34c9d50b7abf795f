//! Deliberate, realistic bugs the test suite must catch: proof that the
//! checks can fail. Each is compiled in only with the `mutants` feature
//! (which test builds enable and the `tidemark` binary never does; without
//! it `mutant!` is the constant `false`), and at most one is active at run
//! time: the one `TIDEMARK_MUTANT` names. `scripts/mutants.sh` runs each
//! against the checks that must catch it.

/// Every mutant: its name, and the behaviour it breaks.
pub const MUTANTS: &[(&str, &str)] = &[
    (
        "lease_ignores_epoch",
        "a call with the right lease id but another epoch is accepted (L, C1)",
    ),
    (
        "lease_ignores_expiry",
        "a lease past its deadline is still held, by the domain and by the database's own check (L, C1)",
    ),
    ("fence_ignores_pins", "retention fences ignore full-scan pins (E5)"),
    (
        "recovery_ignores_expired",
        "recovery plans a position retention already removed instead of POSITION_EXPIRED (R)",
    ),
    (
        "recovery_accepts_any_lease",
        "a recovery presenting a lease that is not the key's (another key's, or unknown) is answered (R, L)",
    ),
    (
        "cache_skips_version_check",
        "the remembered-state fast path writes without its compare-and-set (lost updates between replicas)",
    ),
    (
        "ack_before_commit",
        "a commit is acknowledged once queued, before its transaction commits (acknowledged but not durable)",
    ),
    (
        "group_commit_busy_as_written",
        "group commit reports a write it skipped (its row locked by another transaction) as written",
    ),
    (
        "database_acks_before_flush",
        "the database acknowledges a commit before its WAL is flushed (Postgres with synchronous_commit=off; \
         switched on by the history checker, which runs that database)",
    ),
    (
        "expiry_by_replica_clock",
        "Postgres: leases are judged by the replica's own clock instead of the database's (SPEC 1)",
    ),
    (
        "mirror_before_durable",
        "a commit's position reaches the table's consumer file before the database has it (or refused it) (SPEC 9)",
    ),
    (
        "store_skips_version_check",
        "a write goes through against whatever version the row has now: the compare-and-set is gone (lost updates)",
    ),
];

/// Whether the mutant `name` is active in this process.
#[cfg(feature = "mutants")]
pub fn active(name: &str) -> bool {
    static ACTIVE: std::sync::OnceLock<Option<String>> = std::sync::OnceLock::new();
    ACTIVE.get_or_init(|| std::env::var("TIDEMARK_MUTANT").ok()).as_deref() == Some(name)
}

/// Whether the mutant `name` is active: never, without the `mutants`
/// feature.
#[cfg(not(feature = "mutants"))]
#[inline(always)]
pub const fn active(_name: &str) -> bool {
    false
}

/// `mutant!("name")`: whether that deliberate bug is switched on.
#[macro_export]
macro_rules! mutant {
    ($name:literal) => {
        $crate::mutant::active($name)
    };
}
