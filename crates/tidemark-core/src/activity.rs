//! What a lease's query is doing (issue 55): the state an operator reads from the lease's
//! renewals and commits — a dead query (`not renewed for 4m`) and a hung
//! one (`renewing, not committing for 12m`) no longer look alike.

use std::fmt;
use std::time::Duration;

use crate::options::Human;
pub use crate::state::{Caller, MAX_CLIENT_LEN};
use crate::state::{LeaseRecord, LeaseStatus};
use crate::time::Timestamp;

/// A lease's state as an operator reads it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LeaseActivity {
    /// Live, renewed on time and committing: its last commit (or, before
    /// its first, its grant) was this long ago.
    Committing {
        /// Time since the last commit (or the grant).
        since_commit: Duration,
        /// Whether it has committed at all.
        committed: bool,
    },
    /// Live and renewed on time, but nothing committed for this long: a
    /// hung query whose keeper still renews. Revoke it; it never expires
    /// by itself.
    RenewingNotCommitting {
        /// Time since the last commit (or the grant).
        since_commit: Duration,
    },
    /// Live, but its last renewal was this long ago: most likely a dead
    /// query; it lapses when its ttl runs out.
    NotRenewed {
        /// Time since the last renewal.
        since_renewal: Duration,
    },
    /// Its deadline passed this long ago without a renewal.
    Expired {
        /// Time since the deadline.
        ago: Duration,
    },
    /// Released by its holder.
    Released,
    /// Revoked by an operator.
    Revoked,
}

/// How long a live lease may go without committing before it reads as
/// "not committing": a ttl, and never less than a minute (a query that
/// triggers every few seconds commits well within it).
const NOT_COMMITTING_AFTER: Duration = Duration::from_secs(60);

/// The slack past a keeper's renewal (every third of the ttl, SDKs and
/// docs alike) before a lease reads as "not renewed": a tenth of the ttl,
/// at least two seconds, for the network and a busy worker.
const NOT_RENEWED_SLACK_FLOOR: Duration = Duration::from_secs(2);

impl LeaseRecord {
    /// When the lease was last renewed (a grant, a renewal and a commit all
    /// set the deadline to that moment plus the ttl).
    pub fn last_renewed(&self) -> Timestamp {
        Timestamp::from_micros(
            self.deadline
                .as_micros()
                .saturating_sub(crate::time::duration_micros(self.ttl)),
        )
    }

    /// What the lease's query is doing at `now`.
    pub fn activity(&self, now: Timestamp) -> LeaseActivity {
        match self.status {
            LeaseStatus::Released => return LeaseActivity::Released,
            LeaseStatus::Revoked => return LeaseActivity::Revoked,
            LeaseStatus::Active => {}
        }
        if now >= self.deadline {
            return LeaseActivity::Expired {
                ago: self.deadline.until(now),
            };
        }
        let since_renewal = self.last_renewed().until(now);
        if since_renewal > self.ttl / 3 + (self.ttl / 10).max(NOT_RENEWED_SLACK_FLOOR) {
            return LeaseActivity::NotRenewed { since_renewal };
        }
        let since_commit = self.committed_at.unwrap_or(self.acquired_at).until(now);
        if since_commit > self.ttl.max(NOT_COMMITTING_AFTER) {
            LeaseActivity::RenewingNotCommitting { since_commit }
        } else {
            LeaseActivity::Committing {
                since_commit,
                committed: self.committed_at.is_some(),
            }
        }
    }
}

impl fmt::Display for LeaseActivity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            LeaseActivity::Committing {
                since_commit,
                committed: true,
            } => write!(f, "committing (last commit {} ago)", Human(since_commit)),
            LeaseActivity::Committing {
                since_commit,
                committed: false,
            } => write!(f, "renewing, no commit yet (granted {} ago)", Human(since_commit)),
            LeaseActivity::RenewingNotCommitting { since_commit } => {
                write!(f, "renewing, not committing for {}", Human(since_commit))
            }
            LeaseActivity::NotRenewed { since_renewal } => write!(f, "not renewed for {}", Human(since_renewal)),
            LeaseActivity::Expired { ago } => write!(f, "expired {} ago", Human(ago)),
            LeaseActivity::Released => f.write_str("released"),
            LeaseActivity::Revoked => f.write_str("revoked"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use uuid::Uuid;

    fn at(secs: i64) -> Timestamp {
        Timestamp::from_micros(secs * 1_000_000)
    }

    fn lease(ttl_secs: u64, acquired: i64, renewed: i64, committed: Option<i64>) -> LeaseRecord {
        let ttl = Duration::from_secs(ttl_secs);
        LeaseRecord {
            lease_id: Uuid::from_u128(1),
            holder: "q".into(),
            principal: "anonymous".into(),
            epoch: 1,
            ttl,
            acquired_at: at(acquired),
            deadline: at(renewed).plus(ttl),
            status: LeaseStatus::Active,
            last_batch: None,
            wrote_consumer: false,
            legacy_warned_snapshot: None,
            full_scan_pin: None,
            caller: Caller::UNKNOWN,
            committed_at: committed.map(at),
        }
    }

    #[test]
    fn a_dead_query_and_a_hung_one_read_differently() {
        // SIGKILLed right after its grant, holding a 10-minute lease: its
        // keeper would have renewed at 3m 20s.
        let dead = lease(600, 0, 0, None);
        assert!(matches!(dead.activity(at(250)), LeaseActivity::Committing { .. }));
        assert_eq!(
            dead.activity(at(262)),
            LeaseActivity::NotRenewed {
                since_renewal: Duration::from_secs(262)
            }
        );
        assert_eq!(dead.activity(at(262)).to_string(), "not renewed for 4m 22s");
        // Its keeper renews every 10 s of a 30 s ttl; its last commit was
        // 12 minutes ago.
        let hung = lease(30, 0, 720 + 55, Some(55));
        assert_eq!(
            hung.activity(at(780)).to_string(),
            "renewing, not committing for 12m 5s"
        );
        let healthy = lease(30, 0, 775, Some(778));
        assert_eq!(
            healthy.activity(at(780)),
            LeaseActivity::Committing {
                since_commit: Duration::from_secs(2),
                committed: true
            }
        );
        assert_eq!(healthy.activity(at(780)).to_string(), "committing (last commit 2s ago)");
        // A fresh grant has a minute before "not committing".
        assert!(matches!(
            lease(30, 0, 50, None).activity(at(59)),
            LeaseActivity::Committing { .. }
        ));
        assert!(matches!(
            lease(30, 0, 70, None).activity(at(75)),
            LeaseActivity::RenewingNotCommitting { .. }
        ));
    }

    #[test]
    fn ended_leases_say_how() {
        let mut l = lease(30, 0, 0, None);
        assert_eq!(l.activity(at(45)).to_string(), "expired 15s ago");
        l.status = LeaseStatus::Revoked;
        assert_eq!(l.activity(at(1)), LeaseActivity::Revoked);
        l.status = LeaseStatus::Released;
        assert_eq!(l.activity(at(1)), LeaseActivity::Released);
    }

    #[test]
    fn a_renewal_is_read_from_the_deadline() {
        let l = lease(30, 0, 40, None);
        assert_eq!(l.last_renewed(), at(40));
        // Within a third of its ttl and the slack (3 s of 30) it is renewing.
        assert!(matches!(l.activity(at(53)), LeaseActivity::Committing { .. }));
        assert!(matches!(l.activity(at(54)), LeaseActivity::NotRenewed { .. }));
    }

    #[test]
    fn the_client_name_is_capped_and_printable() {
        let long = "tidemark-python/1.0 ".repeat(20);
        let caller = Caller::new(Some("10.0.0.7:51234".into()), Some(&long));
        assert_eq!(
            caller.client.as_deref().map(|c| c.chars().count()),
            Some(MAX_CLIENT_LEN)
        );
        assert_eq!(Caller::new(None, Some("bad\u{7}name")).client, None);
        assert_eq!(Caller::new(None, Some("  ")).client, None);
    }
}
